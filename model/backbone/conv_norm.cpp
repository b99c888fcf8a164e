#include "model/backbone/conv_norm.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>

#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <string>

namespace mrcnn::model {
namespace {

// Whether the weight gradient of conv(x, weight) is taken from NCHW copies (see conv2d_train).
bool weight_grad_from_nchw(const at::Tensor& x, const at::Tensor& weight) {
  return x.device().is_cpu() && x.dim() == 4 && !x.is_contiguous() &&
         x.is_contiguous(at::MemoryFormat::ChannelsLast) && (weight.size(2) > 1 || weight.size(3) > 1);
}

// The input and weight gradients of conv(x, weight) (stride, padding, no dilation or groups),
// each only when asked for; with `nchw_weight_grad`, the weight gradient as weight_grad_from_nchw
// says, returned in the weight's own memory format.
std::pair<at::Tensor, at::Tensor> conv_grads(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                             int64_t stride, int64_t padding, bool need_x, bool need_weight,
                                             bool nchw_weight_grad) {
  const auto backward = [&](const at::Tensor& g, const at::Tensor& in, const at::Tensor& w, bool gx, bool gw) {
    return at::convolution_backward(g, in, w, /*bias_sizes=*/std::nullopt, {stride, stride}, {padding, padding},
                                    /*dilation=*/{1, 1}, /*transposed=*/false, /*output_padding=*/{0, 0},
                                    /*groups=*/1, {gx, gw, false});
  };
  if (!(nchw_weight_grad && need_weight && weight_grad_from_nchw(x, weight))) {
    auto [gx, gw, gb] = backward(grad, x, weight, need_x, need_weight);
    return {gx, gw};
  }
  at::Tensor gx;
  if (need_x) gx = std::get<0>(backward(grad, x, weight, true, false));
  const at::Tensor gw = std::get<1>(backward(grad.contiguous(), x.contiguous(), weight.contiguous(), false, true));
  return {gx, gw.contiguous(weight.suggest_memory_format())};
}

// at::conv2d with conv_grads' backward (bias gradient: the output gradient summed per channel).
struct TrainConvolution : public torch::autograd::Function<TrainConvolution> {
  // bias: optional (an undefined at::Tensor is not a valid custom-function input).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, int64_t stride, int64_t padding) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["has_bias"] = bias.has_value();
    return at::conv2d(x, weight, bias, {stride, stride}, {padding, padding});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [gx, gw] = conv_grads(grads[0], saved[0], saved[1], ctx->saved_data["stride"].toInt(),
                               ctx->saved_data["padding"].toInt(), ctx->needs_input_grad(0),
                               ctx->needs_input_grad(1), /*nchw_weight_grad=*/true);
    at::Tensor gb;
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) gb = grads[0].sum({0, 2, 3});
    return {gx, gw, gb, at::Tensor(), at::Tensor()};
  }
};

// conv(x, weight * scale, bias) whose backward recomputes the folded weight instead of keeping
// it: autograd through a plain `weight * scale` would hold one folded copy of every trainable
// backbone weight from forward to backward (about 90 MB for ResNet-50). Gradients: x and weight
// (scale and bias are constants).
struct FoldedConvolution : public torch::autograd::Function<FoldedConvolution> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& scale,
                            const at::Tensor& bias, int64_t stride, int64_t padding, bool nchw_weight_grad) {
    ctx->save_for_backward({x, weight, scale});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["nchw_weight_grad"] = nchw_weight_grad;
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
    auto [grad_x, grad_folded] =
        conv_grads(grads[0], x, folded, stride, padding, ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                   ctx->saved_data["nchw_weight_grad"].toBool());
    at::Tensor grad_weight;
    if (grad_folded.defined()) grad_weight = grad_folded * scale.view({-1, 1, 1, 1});
    return {grad_x, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
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
      return FoldedConvolution::apply(x, weight, scale, frozen_norm->bias, stride_, padding_, nchw_weight_grad);
    }
    // Frozen layers (no graph), and autocast, whose casts the plain path leaves to conv2d.
    return at::conv2d(x, weight * scale.view({-1, 1, 1, 1}), frozen_norm->bias, {stride_, stride_},
                      {padding_, padding_});
  }
  return group_norm->forward(conv2d_train(x, weight, {}, stride_, padding_, nchw_weight_grad));
}

bool cpu_below_avx512() {
  // LibTorch's own choice (at::native::get_cpu_capability) is not exported: the same rule.
  if (const char* env = std::getenv("ATEN_CPU_CAPABILITY"); env != nullptr && *env != '\0')
    return std::string_view(env) != "avx512";
#if defined(__x86_64__)
  return !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"));
#else
  return true;
#endif
}

at::Tensor conv2d_train(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t stride,
                        int64_t padding, bool nchw_weight_grad) {
  if (nchw_weight_grad && weight.requires_grad() && at::GradMode::is_enabled() &&
      !at::autocast::is_autocast_enabled(x.device().type()) && weight_grad_from_nchw(x, weight)) {
    return TrainConvolution::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                                   stride, padding);
  }
  return at::conv2d(x, weight, bias, {stride, stride}, {padding, padding});
}

}  // namespace mrcnn::model
