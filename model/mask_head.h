// The mask branch's layers: num_convs 3x3 convolutions with ReLU on 14x14 pooled RoIs (fcn1..N,
// the reference's MaskRCNNFPNFeatureExtractor) and the predictor: a 2x2 stride-2 deconvolution
// with ReLU (conv5_mask) and a 1x1 convolution to one 28x28 logit map per class
// (mask_fcn_logits). Training and inference only ever use the map of one class per RoI (its
// label, or its predicted class), so the predictor computes just that one: a K x 28^2 x 256 by
// 256 x 1 product per RoI instead of a 256 -> num_classes convolution, and no [K, C, 28, 28]
// tensor (65 MB at 256 RoIs and 81 classes) to keep for backward.
//
// Parameter names: mask_head.fcn<i>.*, mask_predictor.conv5_mask.*,
// mask_predictor.mask_fcn_logits.* (under roi_heads.).
// Thread-safety: as any torch::nn::Module.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <vector>

namespace mrcnn::model {

class MaskHeadImpl : public torch::nn::Module {
 public:
  MaskHeadImpl(int64_t in_channels, int64_t channels, int64_t num_convs);

  // [K, C_in, R, R] -> [K, channels, R, R].
  at::Tensor forward(const at::Tensor& pooled);

  // Kaiming-normal (fan out, ReLU) weights, zero biases.
  void init_weights(at::Generator gen);

  std::vector<torch::nn::Conv2d> fcn;  // fcn1..fcnN
  bool own_weight_grad = false;        // see conv2d_train
};
TORCH_MODULE(MaskHead);

class MaskPredictorImpl : public torch::nn::Module {
 public:
  MaskPredictorImpl(int64_t channels, int64_t num_classes);

  // [K, channels, R, R] and labels int64 [K] -> logits of each RoI's own class [K, 2R, 2R],
  // equal to forward_all(x)[k, labels[k]].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& labels);

  // Every class: [K, channels, R, R] -> [K, num_classes, 2R, 2R].
  at::Tensor forward_all(const at::Tensor& x);

  // Kaiming-normal (fan out, ReLU) weights, zero biases.
  void init_weights(at::Generator gen);

  torch::nn::ConvTranspose2d conv5_mask{nullptr};
  torch::nn::Conv2d mask_fcn_logits{nullptr};
};
TORCH_MODULE(MaskPredictor);

}  // namespace mrcnn::model
