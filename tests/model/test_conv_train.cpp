// conv2d_train and ConvNorm's weight gradient from NCHW copies (ModelOptions::cpu_nchw_weight_grad):
// the same gradients as at::conv2d's autograd to float tolerance (another summation order), in
// the layouts the parameters have; exactly at::conv2d where the rule does not apply.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/backbone/conv_norm.h"
#include "model/flop_count.h"
#include "model/mask_rcnn.h"

namespace mrcnn::model {
namespace {

struct Grads {
  at::Tensor y, x, w, b;
};

Grads run(bool train_path, bool channels_last, int64_t k, int64_t stride, bool nchw_weight_grad) {
  at::manual_seed(5);
  at::Tensor x = at::randn({2, 8, 13, 11}), w = at::randn({6, 8, k, k}), b = at::randn({6});
  const at::Tensor gy = at::randn({2, 6, (13 + 2 * (k / 2) - k) / stride + 1, (11 + 2 * (k / 2) - k) / stride + 1});
  if (channels_last) {
    x = x.contiguous(at::MemoryFormat::ChannelsLast);
    w = w.contiguous(at::MemoryFormat::ChannelsLast);
  }
  x.requires_grad_(true);
  w.requires_grad_(true);
  b.requires_grad_(true);
  const at::Tensor y = train_path ? conv2d_train(x, w, b, stride, k / 2, nchw_weight_grad)
                                  : at::conv2d(x, w, b, {stride, stride}, {k / 2, k / 2});
  y.backward(channels_last ? gy.contiguous(at::MemoryFormat::ChannelsLast) : gy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

TEST(ConvTrain, NchwWeightGradientMatchesAutogradInTheParametersLayout) {
  for (int64_t stride : {1, 2}) {
    const Grads ref = run(false, true, 3, stride, false);
    const Grads got = run(true, true, 3, stride, true);
    EXPECT_TRUE(at::equal(got.y, ref.y)) << "forward unchanged";
    EXPECT_TRUE(at::equal(got.x, ref.x)) << "input gradient: the same channels-last kernel";
    EXPECT_TRUE(at::allclose(got.w, ref.w, 1e-4, 1e-4)) << (got.w - ref.w).abs().max();
    EXPECT_TRUE(at::allclose(got.b, ref.b, 1e-5, 1e-5));
    EXPECT_TRUE(got.w.is_contiguous(at::MemoryFormat::ChannelsLast)) << "the weight's own layout";
  }
}

TEST(ConvTrain, ExactlyConv2dWhereTheRuleDoesNotApply) {
  // 1x1 kernels, NCHW inputs, the option off: the plain autograd path, bit for bit.
  for (auto [cl, k, on] : {std::tuple{true, int64_t{1}, true}, std::tuple{false, int64_t{3}, true},
                           std::tuple{true, int64_t{3}, false}}) {
    const Grads ref = run(false, cl, k, 1, false);
    const Grads got = run(true, cl, k, 1, on);
    EXPECT_TRUE(at::equal(got.y, ref.y));
    EXPECT_TRUE(at::equal(got.x, ref.x));
    EXPECT_TRUE(at::equal(got.w, ref.w)) << "cl " << cl << " k " << k << " on " << on;
    EXPECT_TRUE(at::equal(got.b, ref.b));
  }
}

TEST(ConvTrain, FrozenNormConvolutionWeightGradientFromNchw) {
  // ConvNorm with a frozen batch norm (the backbone's trainable 3x3 layers): the folded
  // convolution's weight gradient, with the rule on and off, agrees to float tolerance.
  at::Tensor grads[2];
  int64_t backward_calls[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    at::manual_seed(9);
    ConvNorm conv(8, 6, 3, 1, NormKind::kFrozenBatchNorm, 0);
    {
      c10::NoGradGuard no_grad;
      conv->weight.normal_();
      conv->frozen_norm->scale.uniform_(0.5, 1.5);
    }
    conv->weight.set_data(conv->weight.contiguous(at::MemoryFormat::ChannelsLast));
    conv->nchw_weight_grad = on == 1;
    const at::Tensor x = at::randn({2, 8, 9, 10}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    const at::Tensor loss = conv->forward(x).square().sum();
    FlopCounter counter;  // counts the aten::convolution_backward calls
    counter.start();
    loss.backward();
    counter.stop();
    for (const auto& [key, cell] : counter.cells()) backward_calls[on] += cell.ops;
    grads[on] = conv->weight.grad();
  }
  EXPECT_TRUE(at::allclose(grads[1], grads[0], 1e-4, 1e-4)) << (grads[1] - grads[0]).abs().max();
  // Off: one call for both gradients; on: the input gradient and the NCHW weight gradient apart.
  EXPECT_EQ(backward_calls[0], 1);
  EXPECT_EQ(backward_calls[1], 2);
}

TEST(ConvTrain, TheModelSetsTheRuleFromItsOptions) {
  ModelOptions o;
  o.backbone.depth = 18;
  o.channels_last = true;
  MaskRCNN on(o);
  EXPECT_EQ(on->fpn->nchw_weight_grad, cpu_below_avx512());
  EXPECT_EQ(on->roi_heads->mask_head->nchw_weight_grad, cpu_below_avx512());
  o.cpu_nchw_weight_grad = false;
  MaskRCNN off(o);
  EXPECT_FALSE(off->fpn->nchw_weight_grad);
  o.cpu_nchw_weight_grad = true;
  o.channels_last = false;
  MaskRCNN nchw(o);
  EXPECT_FALSE(nchw->fpn->nchw_weight_grad);
}

}  // namespace
}  // namespace mrcnn::model
