#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "benchmark/train/loss_scaler.h"
#include "benchmark/train/lr_schedule.h"
#include "benchmark/train/sgd.h"

namespace mrcnn::train {
namespace {

TEST(LrSchedule, WarmupThenStepDecay) {
  LrSchedule s({.base_lr = 0.08, .warmup_steps = 800, .warmup_factor = 0.0001,
                .decay_steps = {18000, 24000}, .decay_factor = 0.1});
  EXPECT_DOUBLE_EQ(s.lr(0), 0.08 * 0.0001);
  EXPECT_DOUBLE_EQ(s.lr(400), 0.08 * (0.0001 * 0.5 + 0.5));
  EXPECT_DOUBLE_EQ(s.lr(800), 0.08);
  EXPECT_DOUBLE_EQ(s.lr(17999), 0.08);
  EXPECT_NEAR(s.lr(18000), 0.008, 1e-15);
  EXPECT_NEAR(s.lr(23999), 0.008, 1e-15);
  EXPECT_NEAR(s.lr(24000), 0.0008, 1e-16);
  EXPECT_NEAR(s.lr(1000000), 0.0008, 1e-16);
}

TEST(LrSchedule, RefusesImpossibleValues) {
  EXPECT_THROW(LrSchedule({.base_lr = 0}), std::invalid_argument);
  EXPECT_THROW(LrSchedule({.base_lr = 0.02, .warmup_steps = -1}), std::invalid_argument);
  EXPECT_THROW(LrSchedule({.base_lr = 0.02, .warmup_factor = 0}), std::invalid_argument);
  EXPECT_THROW(LrSchedule({.base_lr = 0.02, .decay_steps = {10, 5}}), std::invalid_argument);
  EXPECT_THROW(LrSchedule({.base_lr = 0.02, .decay_factor = 1.5}), std::invalid_argument);
  EXPECT_THROW(LrSchedule({.base_lr = NAN}), std::invalid_argument);
}

// Two small parameters ("w" and "bias") trained by our Sgd and by LibTorch's SGD configured the
// reference's way (one group for weights, one with doubled lr and no decay for biases).
TEST(Sgd, MatchesTorchSgdWithReferenceParamGroups) {
  torch::manual_seed(0);
  auto w0 = torch::randn({4, 3}, torch::kDouble), b0 = torch::randn({4}, torch::kDouble);
  auto w1 = w0.clone().requires_grad_(), b1 = b0.clone().requires_grad_();
  auto w2 = w0.clone().requires_grad_(), b2 = b0.clone().requires_grad_();
  Sgd ours({{"head.weight", w1}, {"head.bias", b1}}, SgdOptions{});
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{w2},
                      std::make_unique<torch::optim::SGDOptions>(
                          torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4)));
  groups.emplace_back(std::vector<at::Tensor>{b2},
                      std::make_unique<torch::optim::SGDOptions>(
                          torch::optim::SGDOptions(0.2).momentum(0.9).weight_decay(0)));
  torch::optim::SGD ref(groups, torch::optim::SGDOptions(0.1));
  auto x = torch::randn({8, 3}, torch::kDouble);
  for (int step = 0; step < 5; ++step) {
    const double lr = 0.1 * (step + 1) / 5.0;
    static_cast<torch::optim::SGDOptions&>(ref.param_groups()[0].options()).lr(lr);
    static_cast<torch::optim::SGDOptions&>(ref.param_groups()[1].options()).lr(2 * lr);
    ours.zero_grad();
    ref.zero_grad();
    (x.matmul(w1.t()) + b1).tanh().sum().backward();
    (x.matmul(w2.t()) + b2).tanh().sum().backward();
    ours.step(lr);
    ref.step();
    ASSERT_TRUE(torch::allclose(w1, w2, 0, 1e-14)) << "step " << step;
    ASSERT_TRUE(torch::allclose(b1, b2, 0, 1e-14)) << "step " << step;
  }
}

TEST(Sgd, FrozenParametersAreNotUpdatedAndStateRoundTrips) {
  auto frozen = torch::ones({3});
  auto w = torch::ones({2}).requires_grad_();
  Sgd sgd({{"frozen.weight", frozen}, {"w", w}}, SgdOptions{});
  EXPECT_EQ(sgd.parameters().size(), 1u);
  (w * 3).sum().backward();
  sgd.step(0.1);
  auto state = sgd.state();
  ASSERT_EQ(state.size(), 1u);
  Sgd other({{"w", w.detach().clone().requires_grad_()}}, SgdOptions{});
  other.load_state(state);
  EXPECT_TRUE(torch::equal(other.state().at("w"), state.at("w")));
  EXPECT_THROW(other.load_state({{"nope", torch::zeros({2})}}), std::runtime_error);
  EXPECT_THROW(other.load_state({{"w", torch::zeros({5})}}), std::runtime_error);
  EXPECT_TRUE(torch::equal(frozen, torch::ones({3})));
}

TEST(ClipGradNorm, MatchesTorchClipGradNorm) {
  auto a1 = torch::randn({10}, torch::kDouble).requires_grad_(), b1 = torch::randn({3, 3}, torch::kDouble).requires_grad_();
  auto a2 = a1.detach().clone().requires_grad_(), b2 = b1.detach().clone().requires_grad_();
  ((a1 * 5).sum() + (b1 * b1).sum() * 3).backward();
  ((a2 * 5).sum() + (b2 * b2).sum() * 3).backward();
  const double ours = clip_grad_norm({{"a", a1}, {"b", b1}}, 1.5);
  const double ref = torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{a2, b2}, 1.5);
  EXPECT_NEAR(ours, ref, 1e-12);
  EXPECT_TRUE(torch::allclose(a1.grad(), a2.grad(), 0, 1e-14));
  EXPECT_TRUE(torch::allclose(b1.grad(), b2.grad(), 0, 1e-14));
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterAnInterval) {
  LossScaler s({.enabled = true, .init_scale = 1024, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 3});
  auto p = torch::zeros({2}).requires_grad_();
  (p * 1024 * 4).sum().backward();
  EXPECT_TRUE(s.unscale_and_check({{"p", p}}));
  EXPECT_TRUE(torch::allclose(p.grad(), torch::full({2}, 4.0)));
  p.mutable_grad().fill_(INFINITY);
  EXPECT_FALSE(s.unscale_and_check({{"p", p}}));
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  for (int i = 0; i < 3; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 1024);
  LossScaler off;
  EXPECT_EQ(off.scale(), 1);
  EXPECT_TRUE(torch::equal(off.scale_loss(torch::ones({1})), torch::ones({1})));
}

}  // namespace
}  // namespace mrcnn::train
