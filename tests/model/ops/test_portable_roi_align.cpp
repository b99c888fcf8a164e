// The portable RoIAligns (model/ops/portable/roi_align.cpp) against the native CPU kernels on
// MLPerf-shaped inputs: FPN P2..P5 of an 800x1344 padded batch of 2, the box head's 1024 RoIs at
// 7x7 and the mask head's 256 at 14x14, sampling ratio 2, both memory formats, forward and the
// gradient of every level. The taps (positions and bilinear weights) are the native ones bit for
// bit; only the order of the sums differs, so the values agree to rounding:
//   forward and gradients |d| <= 1e-5 * max(1, |native|) in float32 (measured: 5e-7 and 2e-6),
// and the share of elements not bit-identical is printed (the "mismatch rate").
// The test also checks the switch itself (implementation.h) and the level map.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "model/ops/implementation.h"
#include "model/ops/multilevel_roi_align.h"
#include "model/ops/portable/portable.h"
#include "model/ops/roi_align.h"

namespace mrcnn::ops {
namespace {

constexpr double kScales[] = {0.25, 0.125, 0.0625, 0.03125};

struct Pyramid {
  std::vector<at::Tensor> levels;  // requires grad
  at::Tensor rois;                 // [K, 5]
};

// Boxes of every size the detector pools: a log-uniform side from 4 to 800 px (every level gets
// RoIs), centres anywhere in the padded image, some partly outside it.
Pyramid make_pyramid(int64_t num_rois, int64_t channels, bool channels_last, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Pyramid p;
  for (double s : kScales) {
    at::Tensor f = at::randn({2, channels, static_cast<int64_t>(800 * s), static_cast<int64_t>(1344 * s)}, gen);
    if (channels_last) f = f.contiguous(at::MemoryFormat::ChannelsLast);
    p.levels.push_back(f.requires_grad_());
  }
  const at::Tensor side = at::exp(at::rand({num_rois, 2}, gen) * std::log(200.0)) * 4.0;
  const at::Tensor centre = at::rand({num_rois, 2}, gen) * at::tensor({1400.0f, 850.0f}) - 20.0f;
  const at::Tensor batch = at::randint(0, 2, {num_rois, 1}, gen).to(at::kFloat);
  p.rois = at::cat({batch, centre - side / 2, centre + side / 2}, 1).contiguous();
  return p;
}

struct Agreement {
  double max_rel = 0;     // max |a - b| / max(1, |b|)
  double mismatch = 0;    // share of elements not bit-identical
};

Agreement compare(const at::Tensor& got, const at::Tensor& want) {
  EXPECT_EQ(got.sizes(), want.sizes());
  Agreement a;
  const at::Tensor d = (got.to(at::kDouble) - want.to(at::kDouble)).abs() /
                       want.to(at::kDouble).abs().clamp_min(1.0);
  a.max_rel = d.numel() ? d.max().item<double>() : 0.0;
  a.mismatch = got.numel() ? (got != want).sum().item<double>() / static_cast<double>(got.numel()) : 0.0;
  return a;
}

// Forward and gradients of one implementation, with a fixed upstream gradient.
std::vector<at::Tensor> pool_and_grads(Pyramid& p, int64_t size, const at::Tensor& upstream) {
  for (auto& l : p.levels) l.mutable_grad() = at::Tensor();
  const at::Tensor out = multilevel_roi_align(p.levels, p.rois, size, 2, false, kScales);
  out.backward(upstream);
  std::vector<at::Tensor> r{out.detach()};
  for (auto& l : p.levels) r.push_back(l.grad().clone());
  return r;
}

class PortableRoIAlign : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { at::set_num_threads(2); }
};

TEST_P(PortableRoIAlign, MultilevelEqualsNativeAtMLPerfShapes) {
  const bool cl = GetParam();
  for (const auto& [num_rois, size] : {std::pair<int64_t, int64_t>{1024, 7}, {256, 14}}) {
    SCOPED_TRACE(testing::Message() << num_rois << " RoIs at " << size << "x" << size << (cl ? " NHWC" : " NCHW"));
    Pyramid p = make_pyramid(num_rois, 64, cl, 17 + num_rois);
    const at::Tensor upstream = at::randn({num_rois, 64, size, size});
    std::vector<at::Tensor> native, portable;
    {
      ImplementationGuard g(Implementation::kNative);
      native = pool_and_grads(p, size, upstream);
    }
    {
      ImplementationGuard g(Implementation::kPortable);
      portable = pool_and_grads(p, size, upstream);
    }
    EXPECT_EQ(portable[0].is_contiguous(cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous), true);
    const Agreement f = compare(portable[0], native[0]);
    EXPECT_LE(f.max_rel, 1e-5);
    std::printf("forward: max rel diff %.2e, not bit-identical %.1f%%\n", f.max_rel, 100 * f.mismatch);
    for (size_t l = 1; l < native.size(); ++l) {
      const Agreement g = compare(portable[l], native[l]);
      EXPECT_LE(g.max_rel, 1e-5) << "level " << l;
      EXPECT_GT(native[l].abs().sum().item<double>(), 0) << "level " << l << " got no RoI";
      std::printf("grad P%zu: max rel diff %.2e, not bit-identical %.1f%%\n", l + 1, g.max_rel, 100 * g.mismatch);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, PortableRoIAlign, ::testing::Values(false, true));

TEST(PortableRoIAlignSingle, AdaptiveAndAlignedSamplingEqualNative) {
  at::set_num_threads(2);
  Pyramid p = make_pyramid(300, 16, false, 5);
  const at::Tensor x = p.levels[0].detach().requires_grad_();
  const at::Tensor rois = p.rois;
  for (int64_t sampling : {0, 2}) {
    for (bool aligned : {false, true}) {
      SCOPED_TRACE(testing::Message() << "sampling " << sampling << " aligned " << aligned);
      x.mutable_grad() = at::Tensor();
      const at::Tensor a = roi_align(x, rois, 0.25, 7, 7, sampling, aligned);
      a.sum().backward();
      const at::Tensor ga = x.grad().clone();
      x.mutable_grad() = at::Tensor();
      const at::Tensor b = portable::roi_align(x, rois, 0.25, 7, 7, sampling, aligned);
      b.sum().backward();
      EXPECT_LE(compare(b.detach(), a.detach()).max_rel, 1e-5);
      EXPECT_LE(compare(x.grad(), ga).max_rel, 1e-4);
    }
  }
}

TEST(PortableRoIAlignSingle, TheSwitchChoosesTheImplementation) {
  EXPECT_EQ(implementation(), Implementation::kAuto);
  EXPECT_TRUE(has_native_kernels(c10::DeviceType::CPU));
  EXPECT_FALSE(has_native_kernels(c10::DeviceType::HPU));
  EXPECT_FALSE(has_native_kernels(c10::DeviceType::MPS));
  EXPECT_FALSE(use_portable(c10::DeviceType::CPU));   // auto: the CPU has native kernels
  EXPECT_TRUE(use_portable(c10::DeviceType::HPU));    // auto: portable elsewhere
  EXPECT_EQ(resolved_implementation(Implementation::kAuto, c10::DeviceType::XPU), "portable");
  {
    ImplementationGuard g(Implementation::kPortable);
    EXPECT_TRUE(use_portable(c10::DeviceType::CPU));
    // The public entry point runs the composition: its result is the portable function's, bit
    // for bit (and differs from the native kernel's in some ulp).
    Pyramid p = make_pyramid(64, 8, false, 9);
    const at::Tensor via_switch = roi_align(p.levels[0].detach(), p.rois, 0.25, 7, 7, 2, false);
    const at::Tensor direct = portable::roi_align(p.levels[0].detach(), p.rois, 0.25, 7, 7, 2, false);
    EXPECT_TRUE(at::equal(via_switch, direct));
  }
  {
    ImplementationGuard g(Implementation::kNative);
    EXPECT_FALSE(use_portable(c10::DeviceType::HPU));  // the dispatcher then names the device
  }
  EXPECT_EQ(implementation(), Implementation::kAuto);
  EXPECT_EQ(parse_implementation("portable"), Implementation::kPortable);
  EXPECT_THROW(parse_implementation("fast"), std::invalid_argument);
}

TEST(PortableRoIAlignSingle, LevelMapEqualsNativeIncludingEdgesOfLevels) {
  // Areas exactly at the level boundaries (224 * 2^k squared) and around them, degenerate and
  // inverted boxes.
  std::vector<float> sides;
  for (double s : {0.0, 1.0, 27.9, 28.0, 56.0, 111.99, 112.0, 224.0, 448.0, 895.0, 896.0, 2000.0}) sides.push_back(static_cast<float>(s));
  at::Tensor side = at::tensor(sides);
  at::Tensor boxes = at::stack({at::zeros_like(side), at::zeros_like(side), side, side}, 1);
  boxes = at::cat({boxes, at::tensor({10.0f, 10.0f, 5.0f, 20.0f}).view({1, 4})});
  const at::Tensor native = map_rois_to_levels(boxes, 2, 5);
  const at::Tensor portable_levels = portable::map_rois_to_levels(boxes, 2, 5, 224, 4);
  EXPECT_TRUE(at::equal(native, portable_levels)) << native << portable_levels;
}

}  // namespace
}  // namespace mrcnn::ops
