// ResNet body for the FPN (He et al.): a stem (7x7 stride-2 convolution, norm, ReLU, 3x3
// stride-2 max pool) and four stages res2..res5 of basic blocks (depth 18, 34) or bottlenecks
// (50, 101), returning each stage's output C2..C5 at strides 4, 8, 16, 32.
//
// Parameter names (detectron2's): stem.conv1.*, res<s>.<b>.conv1|conv2[|conv3].*,
// res<s>.<b>.shortcut.* (the projection of a stage's first block), each a ConvNorm.
// Stages below BackboneOptions::freeze_at are frozen when the module is built
// (requires_grad false), so no gradient is computed for them.
//
// Thread-safety: as any torch::nn::Module.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <vector>

#include "model/backbone/conv_norm.h"
#include "model/backbone/padding_masks.h"
#include "model/options.h"

namespace mrcnn::model {

// A residual block: relu(branch(x) + shortcut(x)). With `masks`, every map a spatial operation
// reads is zeroed outside the images' valid regions (see padding_masks.h).
class ResidualBlockImpl : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x, PaddingMasks* masks) = 0;
};

class ResNetImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument on an unsupported depth or group-norm split.
  explicit ResNetImpl(const BackboneOptions& options);

  // images [N, 3, H, W] (H, W multiples of 32) -> {C2, C3, C4, C5}. With `masks`, every output
  // and every map a spatial operation reads is zero outside the images' valid regions.
  std::vector<at::Tensor> forward(const at::Tensor& images, PaddingMasks* masks = nullptr);

  // Output channels of res2..res5.
  const std::vector<int64_t>& out_channels() const { return out_channels_; }

  // From-scratch initialization: convolutions Kaiming-normal (fan out, ReLU), norms identity.
  void init_weights(at::Generator gen);

  const BackboneOptions& options() const { return options_; }

 private:
  BackboneOptions options_;
  ConvNorm stem_{nullptr};
  std::vector<std::vector<std::shared_ptr<ResidualBlockImpl>>> stages_;  // res2..res5
  std::vector<int64_t> out_channels_;
};
TORCH_MODULE(ResNet);

}  // namespace mrcnn::model
