// The backbone's building blocks: a frozen batch norm stored folded, and a bias-free convolution
// followed by its normalization (detectron2's Conv2d-with-norm), named so that a checkpoint reads
// "<conv>.weight", "<conv>.norm.scale", "<conv>.norm.bias" (frozen) or "<conv>.norm.weight",
// "<conv>.norm.bias" (group norm).
//
// Thread-safety: as any torch::nn::Module, forward() may run concurrently only when nothing
// modifies the parameters at the same time.
#pragma once

#include <array>
#include <optional>

#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "model/options.h"

namespace mrcnn::model {

// Batch norm with fixed statistics, stored folded: y = x * scale + bias per channel, where
// scale = gamma / sqrt(running_var + eps) and bias = beta - running_mean * scale are computed
// once, when weights are converted (model/tools/convert_weights.py), never per step. Both are
// buffers (saved and loaded, never trained). A fresh module is the identity.
class FrozenBatchNorm2dImpl : public torch::nn::Module {
 public:
  explicit FrozenBatchNorm2dImpl(int64_t channels);

  // x: [N, C, H, W]; the per-channel affine (used by itself only in tests: ConvNorm folds it
  // into the convolution).
  at::Tensor forward(const at::Tensor& x) const;

  at::Tensor scale;  // float32 [C]
  at::Tensor bias;   // float32 [C]
};
TORCH_MODULE(FrozenBatchNorm2d);

// at::conv2d(x, weight, bias, stride, padding) for a trainable convolution. With
// `own_weight_grad` (ModelOptions::cpu_own_weight_grad), when x is a channels-last CPU tensor
// and the kernel is wider than 1x1, the backward computes the weight gradient itself: at stride 1
// as one matrix product per kernel tap over zero-padded NHWC copies of x and the output gradient
// ("shifted GEMM"), at other strides from NCHW copies; the input gradient stays LibTorch's
// channels-last one. Otherwise (CUDA, NCHW, 1x1, no gradient needed, autocast) it is exactly
// at::conv2d.
at::Tensor conv2d_train(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t stride,
                        int64_t padding, bool own_weight_grad);

// Whether LibTorch's CPU kernels run below AVX-512 here (ATEN_CPU_CAPABILITY can lower it): where
// ModelOptions::cpu_own_weight_grad applies.
bool cpu_below_avx512();

// conv(kernel x kernel, stride, padding (kernel-1)/2, no bias) followed by a normalization; no
// activation. With a frozen batch norm the affine folds into the convolution at each call:
// conv(x, weight * scale) + bias, one pass over the activations instead of two; the gradient
// still reaches `weight` when it is trainable.
class ConvNormImpl : public torch::nn::Module {
 public:
  ConvNormImpl(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride,
               NormKind norm, int64_t group_norm_groups);

  at::Tensor forward(const at::Tensor& x);

  // relu(forward(x)) and relu(forward(x) + z). When fuses(x), each is one cuDNN call with the
  // bias, the sum and the ReLU in the convolution's epilogue (BackboneOptions::fused_conv_relu);
  // otherwise exactly forward(x).relu_() and forward(x).add_(z).relu_(). The fused output is
  // kept for the backward: change it only out of place.
  at::Tensor forward_relu(const at::Tensor& x);
  at::Tensor forward_add_relu(const at::Tensor& x, const at::Tensor& z);
  // fused_relu, a frozen batch norm and a CUDA input (or fused_relu_on_cpu).
  bool fuses(const at::Tensor& x) const;

  int64_t in_channels() const { return weight.size(1); }
  int64_t out_channels() const { return weight.size(0); }
  int64_t stride() const { return stride_; }

  at::Tensor weight;                             // [out, in, k, k]
  FrozenBatchNorm2d frozen_norm{nullptr};        // set with NormKind::kFrozenBatchNorm
  torch::nn::GroupNorm group_norm{nullptr};      // set with NormKind::kGroupNorm
  bool own_weight_grad = false;                  // see conv2d_train
  bool fused_relu = false;                       // see forward_relu
  // Tests: the fused node on the CPU too, its forward by LibTorch's ops (conv2d, add, ReLU) and
  // its backward the one the GPU runs. The harness never sets it.
  bool fused_relu_on_cpu = false;

 private:
  // A frozen layer's folded weight (weight * scale) and bias, in the dtype its convolution runs in
  // (autocast's where autocast is on), made once and kept while the weight, the scale and the bias
  // keep their storage and version: a frozen layer no longer folds and casts at every call (two
  // small kernels and their host work, per layer and step). Refreshed in place when one of them
  // changes (a loaded checkpoint), so that captured graphs keep reading the current values.
  struct FrozenFold {
    at::Tensor weight, bias;
    std::array<int64_t, 3> versions{-1, -1, -1};
    std::array<const void*, 3> storage{};
  };
  const FrozenFold& frozen_fold(at::ScalarType dtype, at::MemoryFormat format);
  FrozenFold frozen_fold_;
  // A frozen layer whose input (and z) needs no gradient: the fused call without an autograd node,
  // its fold made once.
  bool frozen_without_graph(const at::Tensor& x, const std::optional<at::Tensor>& z) const;
  at::Tensor frozen_fused(const at::Tensor& x, const std::optional<at::Tensor>& z);

  int64_t stride_;
  int64_t padding_;
};
TORCH_MODULE(ConvNorm);

}  // namespace mrcnn::model
