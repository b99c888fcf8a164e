// mrcnn::multilevel_roi_align: schema, dispatcher stub and torchvision's scale inference.
// Kernels: cpu/, cuda/, autograd/, autocast/; portable/ where implementation.h chooses it.
#include "model/ops/multilevel_roi_align.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "model/ops/implementation.h"
#include "model/ops/portable/portable.h"

#include <cmath>

namespace mrcnn::ops {

at::Tensor multilevel_roi_align(at::TensorList features, const at::Tensor& rois,
                                int64_t output_size, int64_t sampling_ratio, bool aligned,
                                at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                                int64_t canonical_level) {
  if (use_portable(rois.device().type())) {
    return portable::multilevel_roi_align(features, rois, output_size, sampling_ratio, aligned,
                                          spatial_scales, canonical_scale, canonical_level);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::multilevel_roi_align", "")
                       .typed<decltype(multilevel_roi_align)>();
  return op.call(features, rois, output_size, sampling_ratio, aligned, spatial_scales,
                 canonical_scale, canonical_level);
}

std::vector<double> infer_spatial_scales(at::TensorList features, int64_t image_height,
                                         int64_t image_width) {
  TORCH_CHECK(image_height > 0 && image_width > 0,
              "infer_spatial_scales: image size must be > 0, got ", image_height, "x",
              image_width);
  std::vector<double> scales;
  scales.reserve(features.size());
  for (size_t l = 0; l < features.size(); ++l) {
    TORCH_CHECK(features[l].dim() == 4, "infer_spatial_scales: features[", l,
                "] must be [N, C, H, W], got ", features[l].dim(), "D");
    // torchvision's _infer_scale uses the height only: 2 ** round(log2(H_l / image_height)),
    // the log2 taken in float32.
    const double approx = static_cast<double>(features[l].size(2)) /
                          static_cast<double>(image_height);
    const float lg = std::log2(static_cast<float>(approx));
    scales.push_back(std::pow(2.0, static_cast<double>(std::nearbyint(lg))));
  }
  return scales;
}

at::Tensor map_rois_to_levels(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                              int64_t canonical_scale, int64_t canonical_level) {
  if (use_portable(rois.device().type())) {
    return portable::map_rois_to_levels(rois, k_min, k_max, canonical_scale, canonical_level);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::map_rois_to_levels", "")
                       .typed<decltype(map_rois_to_levels)>();
  return op.call(rois, k_min, k_max, canonical_scale, canonical_level);
}

namespace detail {

std::vector<at::Tensor> multilevel_roi_align_backward(
    const at::Tensor& grad, const at::Tensor& rois, at::ArrayRef<double> spatial_scales,
    int64_t output_size, int64_t sampling_ratio, bool aligned, int64_t canonical_scale,
    int64_t canonical_level, int64_t batch_size, int64_t channels, at::IntArrayRef level_heights,
    at::IntArrayRef level_widths, at::IntArrayRef level_channels_last) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::_multilevel_roi_align_backward", "")
                       .typed<decltype(multilevel_roi_align_backward)>();
  return op.call(grad, rois, spatial_scales, output_size, sampling_ratio, aligned,
                 canonical_scale, canonical_level, batch_size, channels, level_heights,
                 level_widths, level_channels_last);
}

}  // namespace detail

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def(
      "multilevel_roi_align(Tensor[] features, Tensor rois, int output_size, int sampling_ratio, "
      "bool aligned, float[] spatial_scales, int canonical_scale=224, int canonical_level=4) "
      "-> Tensor");
  m.def(
      "_multilevel_roi_align_backward(Tensor grad, Tensor rois, float[] spatial_scales, "
      "int output_size, int sampling_ratio, bool aligned, int canonical_scale, "
      "int canonical_level, int batch_size, int channels, int[] level_heights, "
      "int[] level_widths, int[] level_channels_last) -> Tensor[]");
  m.def(
      "map_rois_to_levels(Tensor rois, int k_min, int k_max, int canonical_scale=224, "
      "int canonical_level=4) -> Tensor");
}

}  // namespace mrcnn::ops
