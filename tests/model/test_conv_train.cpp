// conv2d_train and ConvNorm's own weight gradient (ModelOptions::cpu_own_weight_grad: by kernel
// taps at stride 1, from NCHW copies at stride 2): the same gradients as at::conv2d's autograd to
// float tolerance (another summation order), in the layouts the parameters have, and counted as
// the same FLOPs; exactly at::conv2d where the rule does not apply.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "model/backbone/conv_norm.h"
#include "model/flop_count.h"
#include "model/mask_rcnn.h"

namespace mrcnn::model {
namespace {

struct Grads {
  at::Tensor y, x, w, b;
};

Grads run(bool train_path, bool channels_last, int64_t k, int64_t stride, bool own_weight_grad) {
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
  const at::Tensor y = train_path ? conv2d_train(x, w, b, stride, k / 2, own_weight_grad)
                                  : at::conv2d(x, w, b, {stride, stride}, {k / 2, k / 2});
  y.backward(channels_last ? gy.contiguous(at::MemoryFormat::ChannelsLast) : gy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

TEST(ConvTrain, OwnWeightGradientMatchesAutogradInTheParametersLayout) {
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

TEST(ConvTrain, FrozenNormConvolutionOwnWeightGradient) {
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
    conv->own_weight_grad = on == 1;
    const at::Tensor x = at::randn({2, 8, 9, 10}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    const at::Tensor loss = conv->forward(x).square().sum();
    FlopCounter counter;  // counts convolution_backward calls and weight gradients by taps
    counter.start();
    loss.backward();
    counter.stop();
    for (const auto& [key, cell] : counter.cells()) backward_calls[on] += cell.ops;
    grads[on] = conv->weight.grad();
  }
  EXPECT_TRUE(at::allclose(grads[1], grads[0], 1e-4, 1e-4)) << (grads[1] - grads[0]).abs().max();
  // Off: one call for both gradients; on: the input gradient and the weight gradient by taps
  // (counted once, its matrix products not) apart.
  EXPECT_EQ(backward_calls[0], 1);
  EXPECT_EQ(backward_calls[1], 2);
}

// How often the weight gradient by taps ran (its scope, seen by a global RecordFunction callback).
std::atomic<int> g_taps{0};

struct TapsWatch {
  at::CallbackHandle handle;
  TapsWatch() {
    g_taps = 0;
    handle = at::addGlobalCallback(at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                                                  -> std::unique_ptr<at::ObserverContext> {
                                     if (std::strcmp(fn.name(), kConvWeightGradScope) == 0) ++g_taps;
                                     return nullptr;
                                   }).scopes({at::RecordScope::FUNCTION}));
  }
  ~TapsWatch() { at::removeCallback(handle); }
};

// The taps' alignment across images, kernel sizes, odd sizes and a channel count unlike the
// output's, in float64 against LibTorch's own weight gradient: equal to rounding.
TEST(ConvTrain, WeightGradientByTapsIsExactInDoublePrecision) {
  for (auto [k, n, h, w] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 3, 7, 5}, {5, 2, 9, 12}, {3, 1, 4, 1},
                            {3, 4, 2, 17}}) {
    at::manual_seed(11);
    const at::Tensor x = at::randn({n, 5, h, w}, at::kDouble).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor wt = at::randn({7, 5, k, k}, at::kDouble).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor gy = at::randn({n, 7, h, w}, at::kDouble).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor ref = std::get<1>(at::convolution_backward(gy, x, wt, std::nullopt, {1, 1}, {k / 2, k / 2}, {1, 1},
                                                                false, {0, 0}, 1, {false, true, false}));
    const at::Tensor xv = x.detach().requires_grad_(false);
    const at::Tensor wv = wt.detach().requires_grad_(true);
    TapsWatch watch;
    conv2d_train(xv, wv, {}, 1, k / 2, true).backward(gy);
    EXPECT_EQ(g_taps.load(), 1) << "the weight gradient by taps ran";
    ASSERT_TRUE(wv.grad().defined());
    EXPECT_TRUE(at::allclose(wv.grad(), ref, 1e-10, 1e-10)) << "k " << k << " n " << n << " " << h << "x" << w << ": "
                                                            << (wv.grad() - ref).abs().max();
    EXPECT_TRUE(wv.grad().is_contiguous(at::MemoryFormat::ChannelsLast));
  }
}

TEST(ConvTrain, OwnWeightGradientCountsTheConvolutionsFlops) {
  double backward_flops[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    at::manual_seed(3);
    const at::Tensor x = at::randn({2, 8, 10, 9}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    const at::Tensor wt = at::randn({6, 8, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    const at::Tensor loss = conv2d_train(x, wt, {}, 1, 1, on == 1).square().sum();
    FlopCounter counter;
    counter.start();
    loss.backward();
    counter.stop();
    backward_flops[on] = counter.total_flops();
  }
  EXPECT_EQ(backward_flops[0], 2.0 * 2 * 2 * 6 * 8 * 9 * 10 * 9);  // input and weight gradients
  EXPECT_EQ(backward_flops[1], backward_flops[0]);
}

TEST(ConvTrain, TheModelSetsTheRuleFromItsOptions) {
  ModelOptions o;
  o.backbone.depth = 18;
  o.channels_last = true;
  MaskRCNN on(o);
  EXPECT_EQ(on->fpn->own_weight_grad, cpu_below_avx512());
  EXPECT_EQ(on->roi_heads->mask_head->own_weight_grad, cpu_below_avx512());
  o.cpu_own_weight_grad = false;
  MaskRCNN off(o);
  EXPECT_FALSE(off->fpn->own_weight_grad);
  o.cpu_own_weight_grad = true;
  o.channels_last = false;
  MaskRCNN nchw(o);
  EXPECT_FALSE(nchw->fpn->own_weight_grad);
}

}  // namespace
}  // namespace mrcnn::model
