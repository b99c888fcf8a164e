// Autocast of mrcnn::roi_align and mrcnn::multilevel_roi_align: a float32 island. Under autocast
// (CUDA float16/bfloat16, CPU bfloat16) the inputs are cast to float32, pooled in float32 and the
// result cast back to the input's dtype; sums of many bilinear samples stay accurate.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "model/ops/multilevel_roi_align.h"
#include "model/ops/roi_align.h"

namespace mrcnn::ops {
namespace {

template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor roi_align_autocast(const at::Tensor& input, const at::Tensor& rois,
                              double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                              int64_t sampling_ratio, bool aligned) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  return roi_align(at::autocast::cached_cast(at::kFloat, input, kDevice),
                   at::autocast::cached_cast(at::kFloat, rois, kDevice), spatial_scale,
                   pooled_height, pooled_width, sampling_ratio, aligned)
      .to(input.scalar_type());
}

template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor multilevel_autocast(at::TensorList features, const at::Tensor& rois,
                               int64_t output_size, int64_t sampling_ratio, bool aligned,
                               at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                               int64_t canonical_level) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  const at::ScalarType dtype = features.empty() ? at::kFloat : features[0].scalar_type();
  std::vector<at::Tensor> f32;
  f32.reserve(features.size());
  for (const at::Tensor& f : features) f32.push_back(at::autocast::cached_cast(at::kFloat, f, kDevice));
  return multilevel_roi_align(f32, at::autocast::cached_cast(at::kFloat, rois, kDevice),
                              output_size, sampling_ratio, aligned, spatial_scales,
                              canonical_scale, canonical_level)
      .to(dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, AutocastCUDA, m) {
  m.impl("roi_align",
         TORCH_FN((roi_align_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>)));
  m.impl("multilevel_roi_align",
         TORCH_FN((multilevel_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>)));
}

TORCH_LIBRARY_IMPL(mrcnn, AutocastCPU, m) {
  m.impl("roi_align",
         TORCH_FN((roi_align_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>)));
  m.impl("multilevel_roi_align",
         TORCH_FN((multilevel_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>)));
}

}  // namespace mrcnn::ops
