// Autograd of mrcnn::roi_align: the backward is an op (mrcnn::_roi_align_backward) with its own
// device kernels, so this wrapper serves every device.
#include <torch/autograd.h>
#include <torch/library.h>

#include "model/ops/roi_align.h"

namespace mrcnn::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Variable;
using torch::autograd::variable_list;

class RoIAlignFunction : public torch::autograd::Function<RoIAlignFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Variable& input, const Variable& rois,
                               double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                               int64_t sampling_ratio, bool aligned) {
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["pooled_height"] = pooled_height;
    ctx->saved_data["pooled_width"] = pooled_width;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["input_shape"] = input.sizes();
    ctx->saved_data["channels_last"] =
        input.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
    ctx->save_for_backward({rois});
    at::AutoDispatchBelowADInplaceOrView guard;
    return {roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio,
                      aligned)};
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_output) {
    const auto saved = ctx->get_saved_variables();
    const auto shape = ctx->saved_data["input_shape"].toIntVector();
    at::Tensor grad_input = detail::roi_align_backward(
        grad_output[0], saved[0], ctx->saved_data["spatial_scale"].toDouble(),
        ctx->saved_data["pooled_height"].toInt(), ctx->saved_data["pooled_width"].toInt(),
        shape[0], shape[1], shape[2], shape[3], ctx->saved_data["sampling_ratio"].toInt(),
        ctx->saved_data["aligned"].toBool(), ctx->saved_data["channels_last"].toBool());
    // One entry per forward argument: only `input` is differentiable.
    return {grad_input, Variable(), Variable(), Variable(), Variable(), Variable(), Variable()};
  }
};

// The backward op itself is not differentiable (no double backward).
class RoIAlignBackwardFunction : public torch::autograd::Function<RoIAlignBackwardFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Variable& grad, const Variable& rois,
                               double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                               int64_t batch_size, int64_t channels, int64_t height,
                               int64_t width, int64_t sampling_ratio, bool aligned,
                               bool channels_last) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return {detail::roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width,
                                       batch_size, channels, height, width, sampling_ratio,
                                       aligned, channels_last)};
  }

  static variable_list backward(AutogradContext*, const variable_list&) {
    TORCH_CHECK(false, "mrcnn::roi_align: double backward is not supported");
  }
};

at::Tensor roi_align_autograd(const at::Tensor& input, const at::Tensor& rois,
                              double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                              int64_t sampling_ratio, bool aligned) {
  return RoIAlignFunction::apply(input, rois, spatial_scale, pooled_height, pooled_width,
                                 sampling_ratio, aligned)[0];
}

at::Tensor roi_align_backward_autograd(const at::Tensor& grad, const at::Tensor& rois,
                                       double spatial_scale, int64_t pooled_height,
                                       int64_t pooled_width, int64_t batch_size,
                                       int64_t channels, int64_t height, int64_t width,
                                       int64_t sampling_ratio, bool aligned, bool channels_last) {
  return RoIAlignBackwardFunction::apply(grad, rois, spatial_scale, pooled_height, pooled_width,
                                         batch_size, channels, height, width, sampling_ratio,
                                         aligned, channels_last)[0];
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, Autograd, m) {
  m.impl("roi_align", TORCH_FN(roi_align_autograd));
  m.impl("_roi_align_backward", TORCH_FN(roi_align_backward_autograd));
}

}  // namespace mrcnn::ops
