#include "model/backbone/conv_norm.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <stdexcept>
#include <string>

namespace mrcnn::model {
namespace {

// conv(x, weight * scale, bias) whose backward recomputes the folded weight instead of keeping
// it: autograd through a plain `weight * scale` would hold one folded copy of every trainable
// backbone weight from forward to backward (about 90 MB for ResNet-50). Gradients: x and weight
// (scale and bias are constants).
struct FoldedConvolution : public torch::autograd::Function<FoldedConvolution> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& scale,
                            const at::Tensor& bias, int64_t stride, int64_t padding) {
    ctx->save_for_backward({x, weight, scale});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    return at::conv2d(x, weight * scale.view({-1, 1, 1, 1}), bias, {stride, stride},
                      {padding, padding});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& scale = saved[2];
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const int64_t padding = ctx->saved_data["padding"].toInt();
    const at::Tensor folded = weight * scale.view({-1, 1, 1, 1});
    auto [grad_x, grad_folded, grad_bias] = at::convolution_backward(
        grads[0], x, folded, /*bias_sizes=*/std::nullopt, {stride, stride}, {padding, padding},
        /*dilation=*/{1, 1}, /*transposed=*/false, /*output_padding=*/{0, 0}, /*groups=*/1,
        {ctx->needs_input_grad(0), ctx->needs_input_grad(1), false});
    at::Tensor grad_weight;
    if (grad_folded.defined()) grad_weight = grad_folded * scale.view({-1, 1, 1, 1});
    return {grad_x, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

FrozenBatchNorm2dImpl::FrozenBatchNorm2dImpl(int64_t channels) {
  scale = register_buffer("scale", at::ones({channels}));
  bias = register_buffer("bias", at::zeros({channels}));
}

at::Tensor FrozenBatchNorm2dImpl::forward(const at::Tensor& x) const {
  return at::addcmul(bias.view({1, -1, 1, 1}).to(x.scalar_type()), x,
                     scale.view({1, -1, 1, 1}).to(x.scalar_type()));
}

ConvNormImpl::ConvNormImpl(int64_t in_channels, int64_t out_channels, int64_t kernel,
                           int64_t stride, NormKind norm, int64_t group_norm_groups)
    : stride_(stride), padding_((kernel - 1) / 2) {
  weight = register_parameter("weight", at::empty({out_channels, in_channels, kernel, kernel}));
  if (norm == NormKind::kFrozenBatchNorm) {
    frozen_norm = register_module("norm", FrozenBatchNorm2d(out_channels));
  } else {
    if (group_norm_groups <= 0 || out_channels % group_norm_groups != 0)
      throw std::invalid_argument("group norm: " + std::to_string(out_channels) +
                                  " channels do not split into " +
                                  std::to_string(group_norm_groups) + " groups");
    group_norm = register_module(
        "norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(group_norm_groups, out_channels)));
  }
}

at::Tensor ConvNormImpl::forward(const at::Tensor& x) {
  if (frozen_norm) {
    // Folding per call costs one pass over the weight (small) and saves a pass over the
    // activations (large) in both forward and backward.
    const at::Tensor& scale = frozen_norm->scale;
    if (weight.requires_grad() && at::GradMode::is_enabled() &&
        !at::autocast::is_autocast_enabled(x.device().type())) {
      return FoldedConvolution::apply(x, weight, scale, frozen_norm->bias, stride_, padding_);
    }
    // Frozen layers (no graph), and autocast, whose casts the plain path leaves to conv2d.
    return at::conv2d(x, weight * scale.view({-1, 1, 1, 1}), frozen_norm->bias, {stride_, stride_},
                      {padding_, padding_});
  }
  return group_norm->forward(at::conv2d(x, weight, {}, {stride_, stride_}, {padding_, padding_}));
}

}  // namespace mrcnn::model
