// CUDA kernels of mrcnn::roi_align and mrcnn::_roi_align_backward (device code:
// roi_align_device.cuh). The backward uses atomics unless
// at::globalContext().deterministicAlgorithms() is set, in which case it runs the gather kernel
// (bitwise reproducible, no atomics). float16/bfloat16 features are read as they are and pooled
// in float32; their gradient accumulates in float32 and is rounded once.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "model/ops/cuda/roi_align_launch.cuh"
#include "model/ops/detail/roi_align_check.h"

namespace mrcnn::ops {
namespace {

void check_cuda(const at::Tensor& input, const at::Tensor& rois, const char* op) {
  TORCH_CHECK(input.is_cuda() && rois.is_cuda(), op, ": expected CUDA tensors, got ",
              input.device(), " and ", rois.device());
  TORCH_CHECK(input.device() == rois.device(), op, ": input and rois must be on one device, got ",
              input.device(), " and ", rois.device());
}

at::Tensor roi_align_forward_cuda(const at::Tensor& input, const at::Tensor& rois,
                                  double spatial_scale, int64_t pooled_height,
                                  int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  constexpr const char* kOp = "mrcnn::roi_align";
  detail::check_roi_align_args(input, rois, pooled_height, pooled_width, kOp);
  check_cuda(input, rois, kOp);
  c10::cuda::CUDAGuard device_guard(input.device());
  const bool cl = input.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
  at::Tensor output = at::empty({rois.size(0), input.size(1), pooled_height, pooled_width},
                                input.options(),
                                cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  if (output.numel() == 0) return output;
  detail::check_nonempty_map(input, kOp);
  const at::Tensor rois_c = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "mrcnn_roi_align_forward_cuda", [&] {
    cuda::LevelViews<scalar_t> views;
    views.batch_size = static_cast<int>(input.size(0));
    views.fault = cuda::fault_word(input);
    views.count = 1;
    views.level[0] = cuda::level_view<scalar_t>(input, spatial_scale);
    cuda::launch_forward<scalar_t>(views, rois_c, at::Tensor(), input.size(1), pooled_height,
                                   pooled_width, sampling_ratio, aligned, output);
  });
  return output;
}

at::Tensor roi_align_backward_cuda(const at::Tensor& grad, const at::Tensor& rois,
                                   double spatial_scale, int64_t pooled_height,
                                   int64_t pooled_width, int64_t batch_size, int64_t channels,
                                   int64_t height, int64_t width, int64_t sampling_ratio,
                                   bool aligned, bool channels_last) {
  constexpr const char* kOp = "mrcnn::_roi_align_backward";
  check_cuda(grad, rois, kOp);
  detail::check_roi_align_backward_args(grad, rois, channels, pooled_height, pooled_width, kOp);
  c10::cuda::CUDAGuard device_guard(grad.device());
  const bool deterministic = cuda::deterministic_backward();
  const at::ScalarType dtype = grad.scalar_type();
  const at::ScalarType acc = detail::roi_dtype_for(dtype);
  std::vector<at::Tensor> grads = {cuda::make_grad_buffer({batch_size, channels, height, width},
                                                          grad.options().dtype(acc),
                                                          channels_last, deterministic)};
  if (grads[0].numel() == 0) return grads[0].to(dtype);
  if (grad.numel() == 0) return grads[0].zero_().to(dtype);
  const at::Tensor rois_c = rois.contiguous();
  const at::Tensor grad_acc = grad.to(acc);
  AT_DISPATCH_FLOATING_TYPES(acc, "mrcnn_roi_align_backward_cuda", [&] {
    cuda::launch_backward<scalar_t>(grad_acc, rois_c, at::Tensor(), grads, {spatial_scale},
                                    batch_size, channels, pooled_height, pooled_width,
                                    sampling_ratio, aligned, deterministic);
  });
  return grads[0].to(dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("roi_align", TORCH_FN(roi_align_forward_cuda));
  m.impl("_roi_align_backward", TORCH_FN(roi_align_backward_cuda));
}

}  // namespace mrcnn::ops
