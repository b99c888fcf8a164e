#include "model/backbone/conv_norm.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/ops/cudnn_convolution_add_relu.h>
#include <ATen/ops/cudnn_convolution_relu.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <string>

#include "model/flop_count.h"

namespace mrcnn::model {
namespace {

// Whether the project computes the weight gradient of conv(x, weight) itself (see conv2d_train):
// a channels-last CPU input, a kernel wider than 1x1.
bool own_weight_grad_applies(const at::Tensor& x, const at::Tensor& weight) {
  return x.device().is_cpu() && x.dim() == 4 && !x.is_contiguous() &&
         x.is_contiguous(at::MemoryFormat::ChannelsLast) && (weight.size(2) > 1 || weight.size(3) > 1);
}

// The weight gradient of a stride-1 convolution (no dilation, no groups) as one matrix product per
// kernel tap ("shifted GEMM"). x is copied, zero-padded, into a plain NHWC buffer xp of width
// Hp = H + 2 * padding by Wp = W + 2 * padding per image, S = Hp * Wp rows, and the output
// gradient into a buffer gp of the same shape, zeros outside its Ho x Wo corner. Output
// pixel (h, w) of image b meets input pixel (h + i, w + j) under tap (i, j): row b * S + h * Wp + w
// of gp meets row b * S + h * Wp + w + (i * Wp + j) of xp. So for every tap the rows of xp from
// i * Wp + j on line up with those of gp, across the whole batch, and
//   dW[:, :, i, j] = gp^T [C_out, rows] x xp[i * Wp + j, + rows) [rows, C_in],
// rows ending at the last output pixel, (n - 1) * S + (Ho - 1) * Wp + Wo. What wraps around a
// row's or an image's end meets gp's zeros; the last row read, that pixel's under the last tap,
// is xp's last (n * S - 1). The rows go in chunks of about 4 MB of both operands, which stay in
// cache across the kh * kw products. Returned channels-last ([C_out, kh, kw, C_in] in memory),
// like the weight.
at::Tensor weight_grad_by_taps(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                               int64_t padding) {
  // Counted by model/flop_count.h as the convolution's weight gradient (the products inside are
  // not counted again: the padding's share would inflate them).
  RECORD_FUNCTION(kConvWeightGradScope, std::vector<c10::IValue>({grad, x, weight}));
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t co = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  const int64_t hp = h + 2 * padding, wp = w + 2 * padding;
  const int64_t ho = hp - kh + 1, wo = wp - kw + 1;
  const int64_t per_image = hp * wp;
  const at::TensorOptions opts = x.options().memory_format(at::MemoryFormat::Contiguous);
  const at::Tensor xp = at::empty({n, hp, wp, c}, opts);
  xp.narrow(1, 0, padding).zero_();
  xp.narrow(1, padding + h, padding).zero_();
  xp.narrow(1, padding, h).narrow(2, 0, padding).zero_();
  xp.narrow(1, padding, h).narrow(2, padding + w, padding).zero_();
  xp.narrow(1, padding, h).narrow(2, padding, w).copy_(x.permute({0, 2, 3, 1}));
  const at::Tensor gp = at::empty({n, hp, wp, co}, opts);
  gp.narrow(1, ho, hp - ho).zero_();
  gp.narrow(1, 0, ho).narrow(2, wo, wp - wo).zero_();
  gp.narrow(1, 0, ho).narrow(2, 0, wo).copy_(grad.permute({0, 2, 3, 1}));
  const at::Tensor xflat = xp.view({n * per_image, c});
  const at::Tensor gflat = gp.view({n * per_image, co});
  at::Tensor acc = at::zeros({co, kh * kw, c}, opts);
  const int64_t rows = (n - 1) * per_image + (ho - 1) * wp + wo;
  const int64_t chunk = std::max<int64_t>(512, (int64_t{4} << 20) / ((c + co) * x.element_size()));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t len = std::min(chunk, rows - r0);
    const at::Tensor g = gflat.narrow(0, r0, len).t();  // [C_out, len]
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) acc.select(1, i * kw + j).addmm_(g, xflat.narrow(0, i * wp + j + r0, len));
  }
  return acc.view({co, kh, kw, c}).permute({0, 3, 1, 2});
}

// The input and weight gradients of conv(x, weight) (stride, padding, no dilation or groups),
// each only when asked for. With `own_weight_grad` where own_weight_grad_applies() says: stride 1 by
// weight_grad_by_taps, other strides from NCHW copies of x and the output gradient; returned in
// the weight's own memory format.
std::pair<at::Tensor, at::Tensor> conv_grads(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                             int64_t stride, int64_t padding, bool need_x, bool need_weight,
                                             bool own_weight_grad_on) {
  const auto backward = [&](const at::Tensor& g, const at::Tensor& in, const at::Tensor& w, bool gx, bool gw) {
    return at::convolution_backward(g, in, w, /*bias_sizes=*/std::nullopt, {stride, stride}, {padding, padding},
                                    /*dilation=*/{1, 1}, /*transposed=*/false, /*output_padding=*/{0, 0},
                                    /*groups=*/1, {gx, gw, false});
  };
  if (!(own_weight_grad_on && need_weight && own_weight_grad_applies(x, weight))) {
    auto [gx, gw, gb] = backward(grad, x, weight, need_x, need_weight);
    return {gx, gw};
  }
  at::Tensor gx;
  if (need_x) gx = std::get<0>(backward(grad, x, weight, true, false));
  const bool taps = stride == 1 && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) &&
                    grad.scalar_type() == x.scalar_type();
  const at::Tensor gw = taps ? weight_grad_by_taps(grad, x, weight, padding)
                             : std::get<1>(backward(grad.contiguous(), x.contiguous(), weight.contiguous(), false, true));
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
                               ctx->needs_input_grad(1), /*own_weight_grad=*/true);
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
                            const at::Tensor& bias, int64_t stride, int64_t padding, bool own_weight_grad) {
    ctx->save_for_backward({x, weight, scale});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["own_weight_grad"] = own_weight_grad;
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
                   ctx->saved_data["own_weight_grad"].toBool());
    at::Tensor grad_weight;
    if (grad_folded.defined()) grad_weight = grad_folded * scale.view({-1, 1, 1, 1});
    return {grad_x, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The fused call's values: relu(conv(input, folded) + b [+ z]), input and folded already in `dtype`
// and `format`: one cuDNN call on CUDA; LibTorch's ops on the CPU (the rehearsal).
at::Tensor fused_conv_relu_values(const at::Tensor& input, const at::Tensor& folded, const at::Tensor& b,
                                  const std::optional<at::Tensor>& z, at::ScalarType dtype, at::MemoryFormat format,
                                  int64_t stride, int64_t padding) {
  if (input.is_cuda())
    return z.has_value()
               ? at::cudnn_convolution_add_relu(input, folded, z->to(dtype).contiguous(format), at::Scalar(1.0), b,
                                                {stride, stride}, {padding, padding}, {1, 1}, 1)
               : at::cudnn_convolution_relu(input, folded, b, {stride, stride}, {padding, padding}, {1, 1}, 1);
  at::Tensor y = at::conv2d(input, folded, b, {stride, stride}, {padding, padding});
  if (z.has_value()) y.add_(z->to(dtype));
  return y.relu_();
}

// The fused call's dtype: autocast's when autocast is on (as at::conv2d would run there), else x's.
at::ScalarType fused_dtype(const at::Tensor& x) {
  return at::autocast::is_autocast_enabled(at::kCUDA) ? at::autocast::get_autocast_dtype(at::kCUDA)
                                                     : x.scalar_type();
}

// relu(conv(x, weight * scale) + bias [+ z]) as one cuDNN call (CUDA only), in autocast's dtype
// when autocast is on (as at::conv2d would run there), else in x's. Saves the input in that
// dtype, the weight, and the output (the ReLU's mask); the backward recomputes the folded weight
// as FoldedConvolution does. Gradients: x, weight (when trainable) and z (the masked gradient).
struct FusedConvReLU : public torch::autograd::Function<FusedConvReLU> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& scale, const at::Tensor& bias,
                            const std::optional<at::Tensor>& z, int64_t stride, int64_t padding) {
    const at::ScalarType dtype = fused_dtype(x);
    const at::MemoryFormat format = x.suggest_memory_format();
    const at::Tensor input = x.to(dtype).contiguous(format);
    const at::Tensor folded = (weight * scale.view({-1, 1, 1, 1})).to(dtype).contiguous(format);
    const at::Tensor b = bias.to(dtype);
    const at::Tensor y = fused_conv_relu_values(input, folded, b, z, dtype, format, stride, padding);
    ctx->save_for_backward({input, weight, scale, y});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    // needs_input_grad counts the tensors given, and an absent z is none: its index 4 exists only
    // with a z.
    ctx->saved_data["has_z"] = z.has_value();
    ctx->saved_data["z_dtype"] = static_cast<int64_t>(z.has_value() ? z->scalar_type() : dtype);
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& scale = saved[2];
    const at::Tensor& y = saved[3];
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const int64_t padding = ctx->saved_data["padding"].toInt();
    const at::Tensor g = at::threshold_backward(grads[0].to(y.scalar_type()), y, 0);
    const at::Tensor folded =
        (weight * scale.view({-1, 1, 1, 1})).to(input.scalar_type()).contiguous(input.suggest_memory_format());
    const bool need_x = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    at::Tensor grad_x, grad_w, grad_z;
    if (need_x || need_w) {
      auto [gx, gw, gb] = at::convolution_backward(g, input, folded, /*bias_sizes=*/std::nullopt, {stride, stride},
                                                   {padding, padding}, {1, 1}, /*transposed=*/false, {0, 0}, 1,
                                                   {need_x, need_w, false});
      if (need_x) grad_x = gx.to(static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt()));
      if (need_w) grad_w = gw.to(weight.scalar_type()) * scale.view({-1, 1, 1, 1});
    }
    if (ctx->saved_data["has_z"].toBool() && ctx->needs_input_grad(4))
      grad_z = g.to(static_cast<at::ScalarType>(ctx->saved_data["z_dtype"].toInt()));
    return {grad_x, grad_w, at::Tensor(), at::Tensor(), grad_z, at::Tensor(), at::Tensor()};
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
      return FoldedConvolution::apply(x, weight, scale, frozen_norm->bias, stride_, padding_, own_weight_grad);
    }
    if (!weight.requires_grad()) {
      // Frozen: the fold, in the convolution's dtype, made once (autocast leaves a weight and a
      // bias already in its dtype as they are, so the values are those of the plain path below).
      const at::ScalarType dtype = at::autocast::is_autocast_enabled(x.device().type())
                                       ? at::autocast::get_autocast_dtype(x.device().type())
                                       : weight.scalar_type();
      const FrozenFold& f = frozen_fold(dtype, weight.suggest_memory_format());
      return at::conv2d(x, f.weight, f.bias, {stride_, stride_}, {padding_, padding_});
    }
    // Trainable layers without a graph, and autocast, whose casts the plain path leaves to conv2d.
    return at::conv2d(x, weight * scale.view({-1, 1, 1, 1}), frozen_norm->bias, {stride_, stride_},
                      {padding_, padding_});
  }
  return group_norm->forward(conv2d_train(x, weight, {}, stride_, padding_, own_weight_grad));
}

const ConvNormImpl::FrozenFold& ConvNormImpl::frozen_fold(at::ScalarType dtype, at::MemoryFormat format) {
  const at::Tensor& scale = frozen_norm->scale;
  const at::Tensor& bias = frozen_norm->bias;
  const std::array<int64_t, 3> versions{weight._version(), scale._version(), bias._version()};
  const std::array<const void*, 3> storage{weight.const_data_ptr(), scale.const_data_ptr(), bias.const_data_ptr()};
  FrozenFold& f = frozen_fold_;
  const bool same_kind = f.weight.defined() && f.storage == storage && f.weight.scalar_type() == dtype &&
                         f.weight.is_contiguous(format);
  if (same_kind && f.versions == versions) return f;
  const c10::NoGradGuard no_grad;
  // What the unfolded paths compute: the float32 fold, then autocast's (or the fused call's) cast
  // of it and of the bias.
  const at::Tensor w = (weight * scale.view({-1, 1, 1, 1})).to(dtype).contiguous(format);
  const at::Tensor b = bias.to(dtype);
  if (same_kind) {
    f.weight.copy_(w);  // in place: graphs captured with these tensors read the new values
    f.bias.copy_(b);
  } else {
    f.weight = w.clone(at::MemoryFormat::Preserve);
    f.bias = b.clone();
  }
  f.versions = versions;
  f.storage = storage;
  return f;
}

bool ConvNormImpl::fuses(const at::Tensor& x) const {
  return fused_relu && frozen_norm && (x.is_cuda() || fused_relu_on_cpu) && x.dim() == 4;
}

at::Tensor ConvNormImpl::forward_relu(const at::Tensor& x) {
  if (!fuses(x)) return forward(x).relu_();
  if (frozen_without_graph(x, std::nullopt)) return frozen_fused(x, std::nullopt);
  return FusedConvReLU::apply(x, weight, frozen_norm->scale, frozen_norm->bias, std::nullopt, stride_, padding_);
}

at::Tensor ConvNormImpl::forward_add_relu(const at::Tensor& x, const at::Tensor& z) {
  if (!fuses(x)) return forward(x).add_(z).relu_();
  if (frozen_without_graph(x, z)) return frozen_fused(x, z);
  return FusedConvReLU::apply(x, weight, frozen_norm->scale, frozen_norm->bias, z, stride_, padding_);
}

bool ConvNormImpl::frozen_without_graph(const at::Tensor& x, const std::optional<at::Tensor>& z) const {
  return !weight.requires_grad() &&
         (!at::GradMode::is_enabled() || (!x.requires_grad() && !(z.has_value() && z->requires_grad())));
}

at::Tensor ConvNormImpl::frozen_fused(const at::Tensor& x, const std::optional<at::Tensor>& z) {
  // FusedConvReLU's forward with the fold made once (nothing here needs a gradient: no node).
  const at::ScalarType dtype = fused_dtype(x);
  const at::MemoryFormat format = x.suggest_memory_format();
  const FrozenFold& f = frozen_fold(dtype, format);
  return fused_conv_relu_values(x.to(dtype).contiguous(format), f.weight, f.bias, z, dtype, format, stride_, padding_);
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
                        int64_t padding, bool own_weight_grad) {
  if (own_weight_grad && weight.requires_grad() && at::GradMode::is_enabled() &&
      !at::autocast::is_autocast_enabled(x.device().type()) && own_weight_grad_applies(x, weight)) {
    return TrainConvolution::apply(x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                                   stride, padding);
  }
  return at::conv2d(x, weight, bias, {stride, stride}, {padding, padding});
}

}  // namespace mrcnn::model
