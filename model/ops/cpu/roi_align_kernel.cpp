// CPU kernels of mrcnn::roi_align and mrcnn::_roi_align_backward (engine: roi_align_impl.h).
// float16/bfloat16 features are read as they are and pooled in float32 (float32 RoIs); their
// gradient is accumulated in float32 and rounded once.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "model/ops/cpu/roi_align_impl.h"
#include "model/ops/detail/roi_align_check.h"

namespace mrcnn::ops {
namespace {

bool wants_channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
}

template <typename T>
cpu::LevelData<T> level_view(const at::Tensor& t, bool channels_last) {
  cpu::LevelData<T> lv;
  lv.data = const_cast<T*>(t.const_data_ptr<T>());
  lv.channels_last = channels_last;
  lv.stride_n = t.size(1) * t.size(2) * t.size(3);
  lv.stride_c = channels_last ? 1 : t.size(2) * t.size(3);
  return lv;
}

void check_cpu(const at::Tensor& input, const at::Tensor& rois, const char* op) {
  TORCH_CHECK(input.device().is_cpu() && rois.device().is_cpu(), op,
              ": expected CPU tensors, got input on ", input.device(), " and rois on ",
              rois.device());
}

at::Tensor roi_align_forward_kernel(const at::Tensor& input, const at::Tensor& rois,
                                    double spatial_scale, int64_t pooled_height,
                                    int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  constexpr const char* kOp = "mrcnn::roi_align";
  detail::check_roi_align_args(input, rois, pooled_height, pooled_width, kOp);
  check_cpu(input, rois, kOp);
  TORCH_CHECK(input.size(2) * input.size(3) < (int64_t{1} << 31), kOp,
              ": feature maps of more than 2^31 pixels are not supported");
  const bool cl = wants_channels_last(input);
  const auto fmt = cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  const int64_t num_rois = rois.size(0);
  const int64_t channels = input.size(1);
  at::Tensor output =
      at::empty({num_rois, channels, pooled_height, pooled_width}, input.options(), fmt);
  if (output.numel() == 0) return output;
  detail::check_nonempty_map(input, kOp);
  const at::Tensor input_c = input.contiguous(fmt);
  const at::Tensor rois_c = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(),
                                  "mrcnn_roi_align_forward", [&] {
    using C = at::opmath_type<scalar_t>;
    const std::vector<cpu::LevelGeometry> geometry = {
        {input.size(2), input.size(3), spatial_scale}};
    const auto plan = cpu::make_sampling_plan<C>(
        rois_c.const_data_ptr<C>(), num_rois, nullptr, geometry, input.size(0),
        pooled_height, pooled_width, sampling_ratio, aligned);
    cpu::roi_align_forward<scalar_t, C>(plan, {level_view<scalar_t>(input_c, cl)}, channels,
                                        output.mutable_data_ptr<scalar_t>(), cl);
  });
  return output;
}

at::Tensor roi_align_backward_kernel(const at::Tensor& grad, const at::Tensor& rois,
                                     double spatial_scale, int64_t pooled_height,
                                     int64_t pooled_width, int64_t batch_size, int64_t channels,
                                     int64_t height, int64_t width, int64_t sampling_ratio,
                                     bool aligned, bool channels_last) {
  constexpr const char* kOp = "mrcnn::_roi_align_backward";
  check_cpu(grad, rois, kOp);
  detail::check_roi_align_backward_args(grad, rois, channels, pooled_height, pooled_width, kOp);
  const auto fmt = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  // Reduced-precision gradients accumulate in float32, rounded once at the end.
  const at::ScalarType dtype = grad.scalar_type();
  const at::ScalarType acc = detail::roi_dtype_for(dtype);
  at::Tensor grad_input =
      at::empty({batch_size, channels, height, width}, grad.options().dtype(acc), fmt).zero_();
  if (grad.numel() == 0) return grad_input.to(dtype);
  // The gradient is read in the layout of grad_input: channels-last accumulation walks whole
  // channel vectors, which needs the incoming gradient channels-last too (one transposing copy
  // of [K, C, PH, PW] is far cheaper than strided scatters).
  const bool grad_cl = channels_last;
  const at::Tensor grad_c = grad.to(acc).contiguous(fmt);
  const at::Tensor rois_c = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES(acc, "mrcnn_roi_align_backward", [&] {
    const std::vector<cpu::LevelGeometry> geometry = {{height, width, spatial_scale}};
    const auto plan = cpu::make_sampling_plan<scalar_t>(
        rois_c.const_data_ptr<scalar_t>(), rois.size(0), nullptr, geometry, batch_size,
        pooled_height, pooled_width, sampling_ratio, aligned);
    cpu::roi_align_backward<scalar_t>(plan, {level_view<scalar_t>(grad_input, channels_last)},
                                      channels, grad_c.const_data_ptr<scalar_t>(), grad_cl);
  });
  return grad_input.to(dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("roi_align", TORCH_FN(roi_align_forward_kernel));
  m.impl("_roi_align_backward", TORCH_FN(roi_align_backward_kernel));
}

}  // namespace mrcnn::ops
