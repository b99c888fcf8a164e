// CUDA kernels of mrcnn::multilevel_roi_align, its backward and mrcnn::map_rois_to_levels. The
// level of every RoI is computed once on the device; one forward launch covers all levels; the
// backward scatters with atomics, or, under at::globalContext().deterministicAlgorithms(), runs
// the gather kernel once per level (bitwise reproducible). float16/bfloat16 features are read as
// they are and pooled in float32 (float32 RoIs); their gradients accumulate in float32.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "model/ops/cuda/roi_align_launch.cuh"
#include "model/ops/detail/level_range.h"
#include "model/ops/detail/roi_align_check.h"

namespace mrcnn::ops {
namespace {

constexpr const char* kOp = "mrcnn::multilevel_roi_align";

at::Tensor compute_levels(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                          int64_t canonical_scale, int64_t canonical_level) {
  at::Tensor out = at::empty({rois.size(0)}, rois.options().dtype(at::kLong));
  if (rois.size(0) == 0) return out;
  const at::Tensor r = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES(r.scalar_type(), "mrcnn_map_rois_to_levels_cuda", [&] {
    const int64_t n = r.size(0);
    const int64_t stride = r.size(1);
    const int64_t first = stride == 5 ? 1 : 0;   // [K, 5] rois or [K, 4] boxes
    cuda::map_levels_kernel<scalar_t>
        <<<cuda::grid_for(n), cuda::kThreadsPerBlock, 0, c10::cuda::getCurrentCUDAStream()>>>(
            n, r.const_data_ptr<scalar_t>() + first, stride, k_min, k_max, canonical_scale,
            canonical_level, out.mutable_data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

void check_rois_device(const at::Tensor& rois, const at::Tensor& like) {
  TORCH_CHECK(rois.is_cuda() && rois.device() == like.device(), kOp,
              ": rois must be on the features' device ", like.device(), ", got ", rois.device());
}

at::Tensor multilevel_forward_cuda(at::TensorList features, const at::Tensor& rois,
                                   int64_t output_size, int64_t sampling_ratio, bool aligned,
                                   at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                                   int64_t canonical_level) {
  const auto range = detail::fpn_level_range(spatial_scales, features.size(), kOp);
  TORCH_CHECK(features.size() <= static_cast<size_t>(cuda::kMaxLevels), kOp, ": at most ",
              cuda::kMaxLevels, " levels are supported on CUDA, got ", features.size());
  const at::Tensor& f0 = features[0];
  detail::check_multilevel_args(features, rois, output_size, canonical_scale, kOp);
  check_rois_device(rois, f0);
  c10::cuda::CUDAGuard device_guard(f0.device());
  const bool cl = f0.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
  at::Tensor output =
      at::empty({rois.size(0), f0.size(1), output_size, output_size}, f0.options(),
                cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  if (output.numel() == 0) return output;
  const at::Tensor rois_c = rois.contiguous();
  const at::Tensor levels =
      compute_levels(rois_c, range.k_min, range.k_max, canonical_scale, canonical_level);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, f0.scalar_type(),
                                  "mrcnn_multilevel_roi_align_forward_cuda", [&] {
    cuda::LevelViews<scalar_t> views;
    views.batch_size = static_cast<int>(f0.size(0));
    views.fault = cuda::fault_word(f0);
    views.count = static_cast<int>(features.size());
    for (size_t l = 0; l < features.size(); ++l) {
      views.level[l] = cuda::level_view<scalar_t>(features[l], spatial_scales[l]);
    }
    cuda::launch_forward<scalar_t>(views, rois_c, levels, f0.size(1), output_size, output_size,
                                   sampling_ratio, aligned, output);
  });
  return output;
}

std::vector<at::Tensor> multilevel_backward_cuda(
    const at::Tensor& grad, const at::Tensor& rois, at::ArrayRef<double> spatial_scales,
    int64_t output_size, int64_t sampling_ratio, bool aligned, int64_t canonical_scale,
    int64_t canonical_level, int64_t batch_size, int64_t channels, at::IntArrayRef level_heights,
    at::IntArrayRef level_widths, at::IntArrayRef level_channels_last) {
  const size_t num_levels = level_heights.size();
  TORCH_CHECK(num_levels <= static_cast<size_t>(cuda::kMaxLevels), kOp, ": at most ",
              cuda::kMaxLevels, " levels are supported on CUDA");
  const auto range = detail::fpn_level_range(spatial_scales, num_levels, kOp);
  check_rois_device(rois, grad);
  detail::check_multilevel_backward_args(grad, rois, channels, output_size, canonical_scale,
                                         level_heights, level_widths, level_channels_last, kOp);
  c10::cuda::CUDAGuard device_guard(grad.device());
  const bool deterministic = cuda::deterministic_backward();
  // Reduced-precision gradients accumulate in float32, rounded once at the end.
  const at::ScalarType dtype = grad.scalar_type();
  const at::ScalarType acc = detail::roi_dtype_for(dtype);
  std::vector<at::Tensor> grads;
  for (size_t l = 0; l < num_levels; ++l) {
    grads.push_back(cuda::make_grad_buffer({batch_size, channels, level_heights[l], level_widths[l]},
                                           grad.options().dtype(acc),
                                           level_channels_last[l] != 0, deterministic));
  }
  if (grad.numel() == 0) {
    for (at::Tensor& g : grads) g.zero_();
    return detail::rounded_to(std::move(grads), dtype);
  }
  const at::Tensor rois_c = rois.contiguous();
  const at::Tensor levels =
      compute_levels(rois_c, range.k_min, range.k_max, canonical_scale, canonical_level);
  const std::vector<double> scales = spatial_scales.vec();
  const at::Tensor grad_acc = grad.to(acc);
  AT_DISPATCH_FLOATING_TYPES(acc, "mrcnn_multilevel_roi_align_backward_cuda", [&] {
    cuda::launch_backward<scalar_t>(grad_acc, rois_c, levels, grads, scales, batch_size, channels,
                                    output_size, output_size, sampling_ratio, aligned,
                                    deterministic);
  });
  return detail::rounded_to(std::move(grads), dtype);
}

at::Tensor map_rois_to_levels_cuda(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                                   int64_t canonical_scale, int64_t canonical_level) {
  detail::check_level_map_args(rois, k_min, k_max);
  c10::cuda::CUDAGuard device_guard(rois.device());
  return compute_levels(rois, k_min, k_max, canonical_scale, canonical_level);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("multilevel_roi_align", TORCH_FN(multilevel_forward_cuda));
  m.impl("_multilevel_roi_align_backward", TORCH_FN(multilevel_backward_cuda));
  m.impl("map_rois_to_levels", TORCH_FN(map_rois_to_levels_cuda));
}

}  // namespace mrcnn::ops
