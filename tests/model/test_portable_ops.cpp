// The whole network with run.ops=portable (model/ops/implementation.h) against the native kernels
// on the CPU: a training step (losses, counts and every parameter's gradient), inference, and two
// portable steps bit for bit. The portable RoIAligns sum their taps in another order, so losses
// and gradients agree to float rounding (tolerances below); everything discrete (the sampled
// anchors and RoIs, NMS keeps, proposals, mask targets) is the same.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/mask_rcnn.h"
#include "model/ops/implementation.h"
#include "tests/model/tiny.h"

namespace mrcnn::model {
namespace {

using ops::Implementation;
using ops::ImplementationGuard;
using testing::make_batch;
using testing::synthetic_image;
using testing::tiny_options;

struct Step {
  std::map<std::string, double> losses;
  std::map<std::string, int64_t> counts;
  std::map<std::string, at::Tensor> grads;
};

Step train_step(Implementation impl, uint64_t init_seed, const Batch& batch, uint64_t seed,
                const ModelOptions& options = tiny_options()) {
  ImplementationGuard guard(impl);
  MaskRCNN m(options, at::make_generator<at::CPUGeneratorImpl>(init_seed));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const TrainOutput out = m->forward_train(batch, gen);
  total_loss(out.losses).backward();
  Step s;
  for (const auto& [k, v] : out.losses) s.losses[k] = v.item<double>();
  for (const auto& [k, v] : out.counts()) s.counts[k] = v.item<int64_t>();
  for (const auto& p : m->named_parameters())
    if (p.value().grad().defined()) s.grads[p.key()] = p.value().grad().clone();
  return s;
}

class PortableNetwork : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(2); }
  const Batch batch = make_batch({synthetic_image(128, 160, 4, 21), synthetic_image(96, 128, 3, 22)}, {1, 2});
};

TEST_F(PortableNetwork, TrainingStepEqualsNativeWithinFloatRounding) {
  const Step native = train_step(Implementation::kNative, 3, batch, 5);
  const Step portable = train_step(Implementation::kPortable, 3, batch, 5);
  EXPECT_EQ(native.counts, portable.counts);  // the same anchors, RoIs and positives drawn
  for (const char* name : kLossNames) {
    const double a = native.losses.at(name), b = portable.losses.at(name);
    EXPECT_NEAR(a, b, 1e-5 * std::max(1.0, std::abs(a))) << name;
  }
  ASSERT_EQ(native.grads.size(), portable.grads.size());
  double worst = 0;
  for (const auto& [name, g] : native.grads) {
    const at::Tensor& h = portable.grads.at(name);
    // Relative to the parameter's largest gradient: rounding in the pooled features spreads
    // through every layer above RoIAlign and back through the backbone.
    const double scale = std::max(g.abs().max().item<double>(), 1e-12);
    const double rel = (h - g).abs().max().item<double>() / scale;
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-5) << name;  // measured: 4.6e-7
  }
  std::printf("largest gradient difference, relative to each parameter's largest gradient: %.2e\n", worst);
}

// bfloat16 autocast (the Gaudi systems' precision): the RoIAligns get bfloat16 features with
// float32 RoIs, as under the native ops' autocast kernels; both implementations pool in float32.
TEST_F(PortableNetwork, BFloat16StepEqualsNativeWithinBFloat16Rounding) {
  ModelOptions o = tiny_options();
  o.precision = Precision::kBFloat16;
  o.channels_last = true;
  o.backbone.base_channels = 16;
  const Step native = train_step(Implementation::kNative, 9, batch, 1, o);
  const Step portable = train_step(Implementation::kPortable, 9, batch, 1, o);
  EXPECT_EQ(native.counts, portable.counts);
  for (const char* name : kLossNames) {
    const double a = native.losses.at(name), b = portable.losses.at(name);
    EXPECT_TRUE(std::isfinite(b)) << name;
    EXPECT_NEAR(a, b, 2e-2 * std::max(1.0, std::abs(a))) << name;
  }
  for (const auto& [name, g] : portable.grads) EXPECT_TRUE(at::isfinite(g).all().item<bool>()) << name;
}

TEST_F(PortableNetwork, TwoPortableStepsAreBitIdentical) {
  const Step a = train_step(Implementation::kPortable, 4, batch, 6);
  const Step b = train_step(Implementation::kPortable, 4, batch, 6);
  EXPECT_EQ(a.losses, b.losses);
  for (const auto& [name, g] : a.grads) EXPECT_TRUE(at::equal(g, b.grads.at(name))) << name;
}

TEST_F(PortableNetwork, InferenceEqualsNative) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(7));
  std::vector<Detections> native, portable;
  {
    ImplementationGuard g(Implementation::kNative);
    native = m->inference(batch);
  }
  {
    ImplementationGuard g(Implementation::kPortable);
    portable = m->inference(batch);
  }
  ASSERT_EQ(native.size(), portable.size());
  for (size_t i = 0; i < native.size(); ++i) {
    SCOPED_TRACE(i);
    const Detections& a = native[i];
    const Detections& b = portable[i];
    ASSERT_GT(a.size(), 0);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(at::equal(a.labels, b.labels));
    EXPECT_TRUE(at::allclose(a.boxes, b.boxes, 0, 1e-3)) << (a.boxes - b.boxes).abs().max();
    EXPECT_TRUE(at::allclose(a.scores, b.scores, 1e-5, 1e-6));
    ASSERT_EQ(a.masks.sizes(), b.masks.sizes());
    // A pasted pixel may flip where its probability is within rounding of the threshold.
    EXPECT_LE((a.masks != b.masks).sum().item<int64_t>(), a.masks.numel() / 1000 + 1);
  }
}

}  // namespace
}  // namespace mrcnn::model
