#include "model/backbone/resnet.h"

#include <ATen/ATen.h>

#include <array>
#include <stdexcept>
#include <string>

#include "model/init.h"

namespace mrcnn::model {
namespace {

// conv3x3 -> norm -> relu -> conv3x3 -> norm, + shortcut, relu (ResNet-18/34).
class BasicBlockImpl : public ResidualBlockImpl {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride, const BackboneOptions& o) {
    conv1_ = register_module("conv1", ConvNorm(in, out, 3, stride, o.norm, o.group_norm_groups));
    conv2_ = register_module("conv2", ConvNorm(out, out, 3, 1, o.norm, o.group_norm_groups));
    if (stride != 1 || in != out)
      shortcut_ =
          register_module("shortcut", ConvNorm(in, out, 1, stride, o.norm, o.group_norm_groups));
  }

  at::Tensor forward(const at::Tensor& x, PaddingMasks* masks) override {
    at::Tensor y = conv1_->forward(x);
    // In place before the ReLU: a convolution's backward needs its input and weight, not its
    // output; the ReLU's needs its own output, which nothing modifies afterwards.
    if (masks) masks->apply_(y);
    y = conv2_->forward(y.relu_());
    y.add_(shortcut_ ? shortcut_->forward(x) : x);
    if (masks) masks->apply_(y);
    return y.relu_();
  }

 private:
  ConvNorm conv1_{nullptr}, conv2_{nullptr}, shortcut_{nullptr};
};

// conv1x1 -> conv3x3 -> conv1x1 (x4 channels), each normalized, + shortcut, relu (ResNet-50/101).
class BottleneckImpl : public ResidualBlockImpl {
 public:
  BottleneckImpl(int64_t in, int64_t mid, int64_t out, int64_t stride, const BackboneOptions& o) {
    const int64_t s1 = o.stride_in_1x1 ? stride : 1;
    const int64_t s3 = o.stride_in_1x1 ? 1 : stride;
    conv1_ = register_module("conv1", ConvNorm(in, mid, 1, s1, o.norm, o.group_norm_groups));
    conv2_ = register_module("conv2", ConvNorm(mid, mid, 3, s3, o.norm, o.group_norm_groups));
    conv3_ = register_module("conv3", ConvNorm(mid, out, 1, 1, o.norm, o.group_norm_groups));
    if (stride != 1 || in != out)
      shortcut_ =
          register_module("shortcut", ConvNorm(in, out, 1, stride, o.norm, o.group_norm_groups));
  }

  at::Tensor forward(const at::Tensor& x, PaddingMasks* masks) override {
    if (conv1_->fuses(x)) return fused_forward(x, masks);
    at::Tensor y = conv1_->forward(x);
    if (masks) masks->apply_(y);  // conv2 is 3x3: it must read zeros beyond the valid region
    y = conv2_->forward(y.relu_()).relu_();
    // conv3 is 1x1, stride 1: it mixes no positions, so conv2's output needs no mask.
    y = conv3_->forward(y);
    y.add_(shortcut_ ? shortcut_->forward(x) : x);
    if (masks) masks->apply_(y);
    return y.relu_();
  }

 private:
  // The same block with each ReLU in its convolution's epilogue (ConvNorm::forward_relu): the
  // masks then apply after the ReLU, which for masks of zeros and ones is the same product.
  at::Tensor fused_forward(const at::Tensor& x, PaddingMasks* masks) {
    at::Tensor y = conv1_->forward_relu(x);
    if (masks) y = masks->applied(y);
    y = conv2_->forward_relu(y);
    y = conv3_->forward_add_relu(y, shortcut_ ? shortcut_->forward(x) : x);
    return masks ? masks->applied(y) : y;
  }

  ConvNorm conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, shortcut_{nullptr};
};

std::array<int, 4> blocks_per_stage(int depth) {
  switch (depth) {
    case 18: return {2, 2, 2, 2};
    case 34: return {3, 4, 6, 3};
    case 50: return {3, 4, 6, 3};
    case 101: return {3, 4, 23, 3};
    default:
      throw std::invalid_argument("ResNet: depth must be 18, 34, 50 or 101, got " +
                                  std::to_string(depth));
  }
}

}  // namespace

ResNetImpl::ResNetImpl(const BackboneOptions& options) : options_(options) {
  const std::array<int, 4> blocks = blocks_per_stage(options.depth);
  const bool bottleneck = options.depth >= 50;
  const int64_t base = options.base_channels;
  auto stem = register_module("stem", std::make_shared<torch::nn::Module>());
  stem_ = stem->register_module(
      "conv1", ConvNorm(3, base, 7, 2, options.norm, options.group_norm_groups));

  int64_t in = base;
  for (int s = 0; s < 4; ++s) {
    const int64_t mid = base << s;
    const int64_t out = bottleneck ? mid * 4 : mid;
    auto list = register_module("res" + std::to_string(s + 2), torch::nn::ModuleList());
    std::vector<std::shared_ptr<ResidualBlockImpl>> stage;
    for (int b = 0; b < blocks[s]; ++b) {
      const int64_t stride = (b == 0 && s > 0) ? 2 : 1;
      std::shared_ptr<ResidualBlockImpl> block;
      if (bottleneck)
        block = std::make_shared<BottleneckImpl>(in, mid, out, stride, options);
      else
        block = std::make_shared<BasicBlockImpl>(in, out, stride, options);
      list->push_back(block);
      stage.push_back(std::move(block));
      in = out;
    }
    stages_.push_back(std::move(stage));
    out_channels_.push_back(out);
  }

  for (const auto& m : modules(/*include_self=*/false))
    if (auto* conv = m->as<ConvNormImpl>()) conv->fused_relu = options.fused_conv_relu;
  // Freeze the stem (1) and the first stages (2..5 -> res2..res5) below freeze_at.
  if (options.freeze_at >= 1)
    for (auto& p : stem->parameters()) p.set_requires_grad(false);
  for (int s = 0; s < 4 && s + 2 <= options.freeze_at; ++s)
    for (auto& block : stages_[s])
      for (auto& p : block->parameters()) p.set_requires_grad(false);
}

std::vector<at::Tensor> ResNetImpl::forward(const at::Tensor& images, PaddingMasks* masks) {
  at::Tensor x = stem_->forward(images);
  if (masks) masks->apply_(x);
  x = at::max_pool2d(x.relu_(), {3, 3}, {2, 2}, {1, 1});
  // A pooling window at the valid region's edge reaches one valid row beyond it.
  if (masks) x = masks->applied(x);  // max_pool2d's backward keeps its output: no in-place here
  std::vector<at::Tensor> outs;
  outs.reserve(4);
  for (auto& stage : stages_) {
    for (auto& block : stage) x = block->forward(x, masks);
    outs.push_back(x);
  }
  return outs;
}

void ResNetImpl::init_weights(at::Generator gen) {
  c10::NoGradGuard no_grad;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* c = m->as<ConvNormImpl>()) {
      init::kaiming_normal_relu(c->weight, init::FanMode::kFanOut, gen);
      if (c->frozen_norm) {
        c->frozen_norm->scale.fill_(1.0);
        c->frozen_norm->bias.zero_();
      } else {
        c->group_norm->weight.fill_(1.0);
        c->group_norm->bias.zero_();
      }
    }
  }
}

}  // namespace mrcnn::model
