#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "benchmark/train/loss_scaler.h"
#include "benchmark/train/lr_schedule.h"
#include "benchmark/train/sgd.h"
#include "benchmark/train/sync_counter.h"
#include "model/mask_rcnn.h"
#include "tests/model/tiny.h"

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
  const at::Tensor ours = clip_grad_norm({{"a", a1}, {"b", b1}}, 1.5);
  EXPECT_EQ(ours.dim(), 0);
  EXPECT_EQ(ours.scalar_type(), at::kDouble);
  const double ref = torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{a2, b2}, 1.5);
  EXPECT_NEAR(ours.item<double>(), ref, 1e-12);
  EXPECT_TRUE(torch::allclose(a1.grad(), a2.grad(), 0, 1e-14));
  EXPECT_TRUE(torch::allclose(b1.grad(), b2.grad(), 0, 1e-14));
}

// The device-side clip is bit-identical on the CPU to the host loop it replaced (per-tensor
// float32 norms read one by one, squares summed in float64 in order, std::sqrt, gradients scaled
// by the float64 coefficient only when it is below 1), so float32 training runs are unchanged.
// Many draws: a square root that is an ulp off for about 1% of values (the CPU's vectorized one)
// fails here.
TEST(ClipGradNorm, BitIdenticalToTheHostLoopOnFloat32) {
  torch::manual_seed(4);
  for (int trial = 0; trial < 400; ++trial) {
    SCOPED_TRACE(trial);
    const double max_norm = trial % 2 == 0 ? 0.5 : 1e6;  // clipped, and left alone
    std::vector<NamedParameter> ours, ref;
    for (int i = 0; i < 12; ++i) {
      auto p = torch::zeros({1 + (i * 37 + trial) % 200}).requires_grad_();
      p.mutable_grad() = torch::randn(p.sizes()) * torch::rand({1}).mul(5).exp();
      auto q = p.detach().clone().requires_grad_();
      q.mutable_grad() = p.grad().clone();
      ours.push_back({"p" + std::to_string(i), p});
      ref.push_back({"p" + std::to_string(i), q});
    }
    double sq = 0;
    for (const auto& p : ref) {
      const double n = p.tensor.grad().norm(2).item<double>();
      sq += n * n;
    }
    const double total = std::sqrt(sq), coef = max_norm / (total + 1e-6);
    if (coef < 1)
      for (const auto& p : ref) p.tensor.mutable_grad().mul_(coef);
    ASSERT_EQ(clip_grad_norm(ours, max_norm).item<double>(), total);
    for (size_t i = 0; i < ours.size(); ++i)
      ASSERT_TRUE(torch::equal(ours[i].tensor.grad(), ref[i].tensor.grad())) << ours[i].name;
  }
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradientsAndNoGradientsGiveZero) {
  auto a = torch::zeros({3}).requires_grad_(), b = torch::zeros({2}).requires_grad_();
  a.mutable_grad() = torch::tensor({1.f, INFINITY, 2.f});
  b.mutable_grad() = torch::tensor({3.f, 4.f});
  const at::Tensor n = clip_grad_norm({{"a", a}, {"b", b}}, 1.0);
  EXPECT_TRUE(std::isinf(n.item<double>()));
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({3.f, 4.f})));
  b.mutable_grad().fill_(NAN);
  EXPECT_TRUE(std::isnan(clip_grad_norm({{"b", b}}, 1.0).item<double>()));
  auto c = torch::zeros({2}).requires_grad_();
  EXPECT_EQ(clip_grad_norm({{"c", c}}, 1.0).item<double>(), 0.0);
}

// On a GPU: the norm stays there (no synchronization), equals the CPU's to rounding, and a model
// without gradients gives a zero on its own device (the trainer concatenates it with the losses).
TEST(ClipGradNorm, OnCudaReadsNothingAndMatchesTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the CUDA clipping test is skipped";
  torch::manual_seed(5);
  std::vector<NamedParameter> cpu, gpu;
  for (int i = 0; i < 20; ++i) {
    auto p = torch::zeros({1 + i * 51}).requires_grad_();
    p.mutable_grad() = torch::randn(p.sizes());
    auto q = p.detach().to(torch::kCUDA).requires_grad_();
    q.mutable_grad() = p.grad().to(torch::kCUDA);
    cpu.push_back({"p" + std::to_string(i), p});
    gpu.push_back({"p" + std::to_string(i), q});
  }
  SyncCounter counter;
  const at::Tensor n = clip_grad_norm(gpu, 1.0);
  const int64_t syncs = counter.count();
  EXPECT_EQ(n.device().type(), c10::kCUDA);
  if (counter.watching_cuda()) {
    EXPECT_EQ(syncs, 0);
  }
  const double expected = clip_grad_norm(cpu, 1.0).item<double>();
  EXPECT_NEAR(n.item<double>(), expected, 1e-6 * expected);
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_TRUE(torch::allclose(gpu[i].tensor.grad().cpu(), cpu[i].tensor.grad(), 1e-5, 1e-7)) << i;
  auto bare = torch::zeros({3}, torch::kCUDA).requires_grad_();
  EXPECT_EQ(clip_grad_norm({{"bare", bare}}, 1.0).device().type(), c10::kCUDA);
}

// On a GPU the optimizer part of a float16 step reads nothing: unscale and check, the scale's
// update and the fused SGD. An overflowed step changes no parameter or buffer and halves the
// scale; a finite one updates as the CPU's kernel does, within float32 rounding.
TEST(Sgd, OnCudaTheScaledStepSkipsOnTheDeviceWithoutASyncAndMatchesTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the fused CUDA update is not tested";
  torch::manual_seed(6);
  std::vector<NamedParameter> cpu, gpu;
  const std::vector<std::string> names = {"conv.weight", "conv.bias", "fc.weight"};
  const std::vector<std::vector<int64_t>> shapes = {{16, 3, 3, 3}, {16}, {10, 33}};
  for (size_t i = 0; i < names.size(); ++i) {
    auto p = torch::randn(shapes[i]).requires_grad_();
    auto q = p.detach().to(torch::kCUDA).requires_grad_();
    cpu.push_back({names[i], p});
    gpu.push_back({names[i], q});
  }
  const SgdOptions o{};
  Sgd cpu_sgd(cpu, o), gpu_sgd(gpu, o);
  LossScaler cpu_scaler({.enabled = true, .init_scale = 1024}), gpu_scaler({.enabled = true, .init_scale = 1024});
  for (int step = 0; step < 3; ++step) {
    const bool overflow = step == 1;
    std::vector<at::Tensor> before;
    for (size_t i = 0; i < names.size(); ++i) {
      at::Tensor g = torch::randn(shapes[i]) * 1024;
      if (overflow && i == 2) g[0][0] = INFINITY;
      cpu[i].tensor.mutable_grad() = g;
      gpu[i].tensor.mutable_grad() = g.to(torch::kCUDA);
      before.push_back(gpu[i].tensor.detach().clone());
    }
    SyncCounter counter;
    const at::Tensor found_inf = gpu_scaler.unscale(gpu);
    gpu_scaler.update(found_inf);
    gpu_sgd.step(0.1, found_inf);
    const int64_t syncs = counter.count();
    if (counter.watching_cuda()) {
      EXPECT_EQ(syncs, 0) << "step " << step;
    }
    const at::Tensor cpu_flag = cpu_scaler.unscale(cpu);
    cpu_scaler.update(cpu_flag);
    cpu_sgd.step(0.1, cpu_flag);
    EXPECT_EQ(found_inf.item<float>(), overflow ? 1.f : 0.f);
    EXPECT_EQ(gpu_scaler.scale(), cpu_scaler.scale()) << "step " << step;
    for (size_t i = 0; i < names.size(); ++i) {
      const at::Tensor now = gpu[i].tensor.detach();
      if (overflow) {
        EXPECT_TRUE(torch::equal(now, before[i])) << names[i] << ": the overflowed step changed it";
      }
      EXPECT_TRUE(torch::allclose(now.cpu(), cpu[i].tensor.detach(), 1e-5, 1e-6)) << names[i] << " step " << step;
    }
  }
  EXPECT_EQ(gpu_scaler.scale(), 512);
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterAnInterval) {
  LossScaler s({.enabled = true, .init_scale = 1024, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 3});
  auto p = torch::zeros({2}).requires_grad_();
  (p * 1024 * 4).sum().backward();
  EXPECT_EQ(s.unscale({{"p", p}}).item<float>(), 0.f);
  EXPECT_TRUE(torch::allclose(p.grad(), torch::full({2}, 4.0)));
  p.mutable_grad().fill_(INFINITY);
  EXPECT_EQ(s.unscale({{"p", p}}).item<float>(), 1.f);
  s.update(torch::ones({1}));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.good_steps(), 0);
  for (int i = 0; i < 2; ++i) s.update(torch::zeros({1}));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.good_steps(), 2);
  s.update(torch::zeros({1}));
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.good_steps(), 0);
  s.restore(256, 2);
  EXPECT_EQ(s.scale(), 256);
  s.update(torch::zeros({1}));
  EXPECT_EQ(s.scale(), 512) << "the restored count goes on";
  s.restore(256, 7);  // a count saved under a longer interval: grows at the next finite step
  s.update(torch::zeros({1}));
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.good_steps(), 0);
  LossScaler off;
  EXPECT_EQ(off.scale(), 1);
  EXPECT_TRUE(torch::equal(off.scale_loss(torch::ones({1})), torch::ones({1})));
}

// The update against the per-parameter update it replaced (written out here as it was): float32,
// weights and biases, a parameter without a gradient for one step, a parameter whose momentum
// starts late, several steps with a changing learning rate. The CPU's kernel (kForeach) is bit
// for bit that update; the fused one (a GPU's) within float32 rounding. With either, a step
// flagged non-finite changes nothing, not even a momentum buffer it would have started (d.weight's
// first gradient comes on the skipped step 2: its momentum starts at step 3).
TEST(Sgd, EachKernelEqualsThePerParameterUpdateAndSkipsFlaggedSteps) {
  for (const Sgd::Kernel kernel : {Sgd::Kernel::kAuto, Sgd::Kernel::kFused}) {
    const bool exact = kernel != Sgd::Kernel::kFused;
    SCOPED_TRACE(exact ? "the CPU's kernel" : "the fused kernel");
    torch::manual_seed(4);
    const std::vector<std::string> names = {"a.weight", "a.bias", "b.weight", "c.bias", "d.weight"};
    const std::vector<std::vector<int64_t>> shapes = {{64, 3, 3, 3}, {64}, {1000, 17}, {7}, {5, 5}};
    std::vector<NamedParameter> ours_params;
    std::vector<at::Tensor> ref;
    for (size_t i = 0; i < names.size(); ++i) {
      const at::Tensor p0 = torch::randn(shapes[i]);
      ours_params.push_back({names[i], p0.clone().requires_grad_()});
      ref.push_back(p0.clone());
    }
    const SgdOptions o{.momentum = 0.9, .weight_decay = 1e-4, .bias_lr_factor = 2.0, .bias_weight_decay = 0.0};
    Sgd ours(ours_params, o);
    ours.set_kernel(kernel);
    const auto same = [&](const at::Tensor& a, const at::Tensor& b) {
      return exact ? torch::equal(a, b) : torch::allclose(a, b, 1e-6, 1e-7);
    };
    std::vector<at::Tensor> bufs(ref.size());
    for (int step = 0; step < 6; ++step) {
      const double lr = 0.02 * (step + 1);
      const bool skipped = step == 2;
      std::vector<at::Tensor> before;
      for (const auto& p : ours_params) before.push_back(p.tensor.detach().clone());
      ours.zero_grad();
      for (size_t i = 0; i < ref.size(); ++i) {
        // d.weight gets no gradient on steps 0-1; a.bias none on step 3.
        if ((i == 4 && step < 2) || (i == 1 && step == 3)) continue;
        const at::Tensor g = torch::randn(shapes[i]) * (i + 1);
        ours_params[i].tensor.mutable_grad() = g.clone();
        if (skipped) continue;
        const bool bias = names[i].ends_with("bias");
        const double wd = bias ? o.bias_weight_decay : o.weight_decay;
        const double lr_p = bias ? lr * o.bias_lr_factor : lr;
        const at::Tensor d = wd != 0 ? g.add(ref[i], wd) : g;
        if (!bufs[i].defined())
          bufs[i] = d.clone();
        else
          bufs[i].mul_(o.momentum).add_(d);
        ref[i].add_(bufs[i], -lr_p);
      }
      // Steps 0-1 without a flag, the others with one (set on step 2).
      if (step < 2) ours.step(lr);
      else ours.step(lr, torch::full({1}, skipped ? 1.f : 0.f));
      for (size_t i = 0; i < ref.size(); ++i) {
        const at::Tensor now = ours_params[i].tensor.detach();
        if (skipped) {
          ASSERT_TRUE(torch::equal(now, before[i])) << names[i] << ": the skipped step changed it";
        }
        ASSERT_TRUE(same(now, ref[i])) << names[i] << " step " << step;
      }
    }
    const auto state = ours.state();
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(same(state.at(names[i]), bufs[i])) << names[i];
  }
}

// The fused kernel walks parameter, gradient and momentum as flat arrays: a channels-last
// parameter with a contiguous gradient, and a momentum buffer restored from a (contiguous)
// checkpoint, must still update element by element (a mix-up moves values by O(1)).
TEST(Sgd, ParametersLaidOutOtherwiseThanTheirGradientsOrSavedBuffersUpdateByElement) {
  torch::manual_seed(9);
  const at::Tensor p0 = torch::randn({4, 3, 5, 5});
  const at::Tensor w = p0.contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
  ASSERT_FALSE(w.is_contiguous());
  for (const Sgd::Kernel kernel : {Sgd::Kernel::kForeach, Sgd::Kernel::kFused}) {
    {
      at::NoGradGuard no_grad;
      w.copy_(p0);
    }
    Sgd sgd({{"conv.weight", w}}, SgdOptions{.weight_decay = 0});
    sgd.set_kernel(kernel);
    const at::Tensor g = torch::randn({4, 3, 5, 5});    // contiguous
    const at::Tensor buf = torch::randn({4, 3, 5, 5});  // contiguous, as a checkpoint gives it
    sgd.load_state({{"conv.weight", buf}});
    w.mutable_grad() = g.clone();
    sgd.step(0.1);
    const at::Tensor expected_buf = buf.mul(0.9).add(g);
    EXPECT_TRUE(torch::allclose(sgd.state().at("conv.weight"), expected_buf, 1e-6, 1e-7));
    EXPECT_TRUE(torch::allclose(w.detach(), p0.add(expected_buf, -0.1), 1e-6, 1e-7));
  }
}

TEST(LossScaler, UnscaleFlagsOnTheGradientsDeviceWithoutReadingBack) {
  LossScaler s({.enabled = true, .init_scale = 8});
  auto a = torch::zeros({3}).requires_grad_(), b = torch::zeros({2, 2}).requires_grad_();
  a.mutable_grad() = torch::tensor({8.f, 16.f, -4.f});
  b.mutable_grad() = torch::full({2, 2}, 2.f);
  const at::Tensor ok = s.unscale({{"a", a}, {"b", b}, {"no_grad", torch::zeros({1})}});
  EXPECT_EQ(ok.scalar_type(), at::kFloat);
  EXPECT_EQ(ok.item<float>(), 0.f);
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({1.f, 2.f, -0.5f})));
  EXPECT_TRUE(torch::equal(b.grad(), torch::full({2, 2}, 0.25f)));
  b.mutable_grad()[1][0] = NAN;
  EXPECT_EQ(s.unscale({{"a", a}, {"b", b}}).item<float>(), 1.f);
  // Disabled (float32, bfloat16): values untouched, non-finite still found.
  LossScaler off;
  a.mutable_grad() = torch::tensor({8.f, INFINITY, 1.f});
  EXPECT_EQ(off.unscale({{"a", a}}).item<float>(), 1.f);
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({8.f, INFINITY, 1.f})));
  EXPECT_EQ(off.unscale({}).item<float>(), 0.f) << "no gradients: nothing is non-finite";
}

// Collects the warnings the counter passes on.
struct Collect : c10::WarningHandler {
  std::vector<std::string> seen;
  void process(const c10::Warning& w) override { seen.push_back(w.msg()); }
};

TEST(SyncCounter, CountsSyncWarningsPassesOthersOnAndRestoresTheHandler) {
  Collect outer;
  c10::WarningUtils::WarningHandlerGuard guard(&outer);
  {
    SyncCounter counter;
    EXPECT_EQ(counter.count(), 0);
    TORCH_WARN("called a synchronizing CUDA operation");
    TORCH_WARN("something else");
    TORCH_WARN("called a synchronizing CUDA operation");
    EXPECT_EQ(counter.count(), 2);
    counter.reset();
    EXPECT_EQ(counter.count(), 0);
#ifndef MRCNN_HAVE_CUDA
    EXPECT_FALSE(counter.watching_cuda()) << "a build without CUDA has no sync debug mode";
#else
    if (!torch::cuda::is_available()) {
      EXPECT_FALSE(counter.watching_cuda());
    } else {
      ASSERT_TRUE(counter.watching_cuda());
      const at::Tensor x = torch::ones({4}, torch::kCUDA);
      const at::Tensor y = x * 2;  // no synchronization
      EXPECT_EQ(counter.count(), 0);
      EXPECT_EQ(y.sum().item<float>(), 8.f);  // one
      EXPECT_EQ(counter.count(), 1);
    }
#endif
  }
  EXPECT_EQ(c10::WarningUtils::get_warning_handler(), &outer);
  ASSERT_EQ(outer.seen.size(), 1u);
  EXPECT_EQ(outer.seen[0], "something else");
}

// The R50-FPN in channels-last: autograd gives each 1x1 convolution's weight a contiguous
// gradient in either layout (its layout contract ignores size-1 dimensions), whose strides may
// differ from the parameter's, only there. The fused step walks both in the same flat order, so it
// copies no gradient at all, where an exact stride comparison copied each such one every step.
TEST(Sgd, TheChannelsLastR50FpnStepCopiesNoGradient) {
  model::ModelOptions o;  // the reference network
  o.channels_last = true;
  model::MaskRCNN m(o, at::make_generator<at::CPUGeneratorImpl>(3));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const model::Batch b = model::testing::make_batch(
      {model::testing::synthetic_image(64, 96, 2, 5, o.num_classes)}, {1});
  model::total_loss(m->forward_train(b, gen).losses).backward();
  std::vector<NamedParameter> params;
  int64_t strides_differ = 0, one_by_one = 0;
  for (const auto& p : m->named_parameters(/*recurse=*/true)) {
    if (!p.value().requires_grad()) continue;
    params.push_back({p.key(), p.value()});
    const at::Tensor& g = p.value().grad();
    ASSERT_TRUE(g.defined()) << p.key();
    if (g.strides() != p.value().strides()) ++strides_differ;
    if (p.value().dim() == 4 && p.value().size(2) == 1 && p.value().size(3) == 1) ++one_by_one;
  }
  // On a 2-core EPYC's CPU kernels 17 of the 1x1 weights (the FPN's inner ones, the bottlenecks'
  // first and shortcut ones) get gradients whose size-1 strides differ from their parameter's;
  // an H200's trace showed 33 copies a step. Which ones depends on the kernels: some must.
  EXPECT_GT(strides_differ, 0) << "no gradient's strides differ: the test no longer tests the rule";
  EXPECT_GE(one_by_one, 33);
  std::cout << "[ sgd ] " << strides_differ << " of " << params.size()
            << " gradients have other strides than their parameter (size-1 dimensions only); copies: ";
  Sgd sgd(params, SgdOptions{});
  sgd.set_kernel(Sgd::Kernel::kFused);
  sgd.step(0.01);
  std::cout << sgd.layout_copies() << "\n";
  EXPECT_EQ(sgd.layout_copies(), 0);
}

// Same flat order: equal strides where a dimension has more than one element; a gradient really
// laid out otherwise (a 3x3 weight's contiguous gradient against its channels-last parameter) is
// still copied, and counted.
TEST(Sgd, OnlyGradientsInAnotherFlatOrderAreCopied) {
  const at::Tensor w1 = torch::randn({8, 4, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(Sgd::same_flat_layout(w1, torch::randn({8, 4, 1, 1})));
  const at::Tensor w3 = torch::randn({8, 4, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_FALSE(Sgd::same_flat_layout(w3, torch::randn({8, 4, 3, 3})));
  EXPECT_FALSE(Sgd::same_flat_layout(torch::randn({8, 4}).t(), torch::randn({4, 8})));
  EXPECT_FALSE(Sgd::same_flat_layout(torch::randn({8, 8}).slice(1, 0, 4), torch::randn({8, 4})));
  const at::Tensor p1 = w1.clone().requires_grad_(), p3 = w3.clone().requires_grad_();
  p1.mutable_grad() = torch::randn({8, 4, 1, 1});
  p3.mutable_grad() = torch::randn({8, 4, 3, 3});
  Sgd sgd({{"a.weight", p1}, {"b.weight", p3}}, SgdOptions{.weight_decay = 0});
  sgd.set_kernel(Sgd::Kernel::kFused);
  sgd.step(0.5);
  EXPECT_EQ(sgd.layout_copies(), 1);
  EXPECT_TRUE(torch::allclose(p1.detach(), w1 - 0.5 * p1.grad(), 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(p3.detach(), w3 - 0.5 * p3.grad(), 1e-6, 1e-7));
}

}  // namespace
}  // namespace mrcnn::train
