#include "model/backbone/conv_norm.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace mrcnn::model {

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
    const at::Tensor folded = weight * frozen_norm->scale.view({-1, 1, 1, 1});
    return at::conv2d(x, folded, frozen_norm->bias, {stride_, stride_}, {padding_, padding_});
  }
  return group_norm->forward(at::conv2d(x, weight, {}, {stride_, stride_}, {padding_, padding_}));
}

}  // namespace mrcnn::model
