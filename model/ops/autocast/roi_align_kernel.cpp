// Autocast of mrcnn::roi_align and mrcnn::multilevel_roi_align: pooled in float32. Under autocast
// (CUDA float16/bfloat16, CPU bfloat16) float16/bfloat16 features go to the kernels as they are,
// with the RoIs in float32: every implementation reads them, computes in float32 and rounds the
// result once to the features' dtype (the native kernels without a float32 copy of the maps, the
// portable compositions through one), and accumulates their gradients in float32. Features of
// any other dtype, or of mixed dtypes across levels, are cast to float32 and the result back to
// the first level's dtype. Both ways give the same values: float32 holds every float16 and
// bfloat16 value exactly, and the kernels compute as they would on those float32 values.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "model/ops/multilevel_roi_align.h"
#include "model/ops/roi_align.h"
#include "model/ops/detail/roi_align_check.h"

namespace mrcnn::ops {
namespace {

template <c10::DispatchKey kAutocastKey, c10::DeviceType kDevice>
at::Tensor roi_align_autocast(const at::Tensor& input, const at::Tensor& rois,
                              double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                              int64_t sampling_ratio, bool aligned) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocastKey);
  if (detail::reduced_precision(input.scalar_type())) {
    return roi_align(input, rois.to(at::kFloat), spatial_scale, pooled_height, pooled_width,
                     sampling_ratio, aligned);
  }
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
  const bool one_reduced_dtype =
      detail::reduced_precision(dtype) &&
      std::all_of(features.begin(), features.end(),
                  [&](const at::Tensor& f) { return f.scalar_type() == dtype; });
  if (one_reduced_dtype) {
    return multilevel_roi_align(features, rois.to(at::kFloat), output_size, sampling_ratio,
                                aligned, spatial_scales, canonical_scale, canonical_level);
  }
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
