// Feature Pyramid Network (Lin et al.) on C2..C5: a 1x1 lateral convolution per level
// (inner.<i>), a top-down path of nearest 2x upsampling and sums, a 3x3 output convolution per
// level (layer.<i>), and P6 as a stride-2 subsample of P5 (max pool, kernel 1), as the reference
// and torchvision's LastLevelMaxPool. All levels have out_channels channels.
//
// Parameter names: inner.<0..3>.weight|bias (C2..C5), layer.<0..3>.weight|bias (P2..P5).
// Thread-safety: as any torch::nn::Module.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "model/backbone/padding_masks.h"

namespace mrcnn::model {

class FPNImpl : public torch::nn::Module {
 public:
  // in_channels: channels of C2..C5.
  FPNImpl(const std::vector<int64_t>& in_channels, int64_t out_channels);

  // {C2..C5} -> {P2, P3, P4, P5, P6}. With `masks`, every level (and every map the 3x3
  // convolutions read) is zero outside the images' valid regions.
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& c, PaddingMasks* masks = nullptr);

  // Kaiming-uniform (a = 1) weights, zero biases (the reference's c2_xavier_fill).
  void init_weights(at::Generator gen);

  int64_t out_channels() const { return out_channels_; }

  // lateral (1x1) and output (3x3) convolutions, C2..C5 / P2..P5 order.
  std::vector<torch::nn::Conv2d> inner;
  std::vector<torch::nn::Conv2d> layer;
  bool own_weight_grad = false;  // for the 3x3 convolutions: see conv2d_train

 private:
  int64_t out_channels_;
};
TORCH_MODULE(FPN);

}  // namespace mrcnn::model
