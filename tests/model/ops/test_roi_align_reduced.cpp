// float16/bfloat16 features through both RoIAligns, read as they are: the values must be those of
// the float32 kernels on the widened features (the autocast float32 island the ops replaced), bit
// for bit: forward, backward (accumulated in float32, rounded once), each memory format, aligned or
// not, a fixed or an adaptive sampling grid; and through autocast. Float32 holds every float16 and
// bfloat16 value exactly and the kernels compute in float32 either way, so any difference is a
// defect, not rounding. The CUDA kernels get the same checks in test_ops_cuda.cpp.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/ops/multilevel_roi_align.h"
#include "model/ops/roi_align.h"

namespace {

using mrcnn::ops::infer_spatial_scales;
using mrcnn::ops::multilevel_roi_align;
using mrcnn::ops::roi_align;

at::Tensor random_rois(int64_t k, int64_t batch, double extent) {
  at::Tensor boxes = at::rand({k, 4}, at::kDouble) * extent;
  boxes.slice(1, 2, 4) += boxes.slice(1, 0, 2) + 1;
  return at::cat({at::randint(0, batch, {k, 1}).to(at::kDouble), boxes}, 1).to(at::kFloat);
}

struct Result {
  at::Tensor out;
  std::vector<at::Tensor> grads;
};

// The op on `feats` (leaves of their own), its output and the gradients of (out * weight).sum().
template <typename Op>
Result run(const std::vector<at::Tensor>& feats, const at::Tensor& weight, Op op) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& f : feats) leaves.push_back(f.detach().requires_grad_(true));
  Result r;
  r.out = op(leaves);
  (r.out * weight.to(r.out.scalar_type())).sum().backward();
  for (const at::Tensor& l : leaves) r.grads.push_back(l.grad());
  return r;
}

// The reduced-precision run against the float32 island: widen, pool, round.
template <typename Op>
void expect_island_values(const std::vector<at::Tensor>& reduced, const at::Tensor& weight, Op op,
                          const std::string& what) {
  const at::ScalarType dtype = reduced[0].scalar_type();
  const Result direct = run(reduced, weight, op);
  std::vector<at::Tensor> wide;
  for (const at::Tensor& f : reduced) wide.push_back(f.to(at::kFloat));
  // The island's backward: the incoming gradient (in the features' dtype) widened, the float32
  // backward, the level gradients rounded.
  const Result island = run(wide, weight.to(dtype).to(at::kFloat), op);
  ASSERT_EQ(direct.out.scalar_type(), dtype) << what;
  EXPECT_EQ(direct.out.suggest_memory_format(), reduced[0].suggest_memory_format()) << what;
  EXPECT_TRUE(at::equal(direct.out, island.out.to(dtype))) << what << ": forward";
  ASSERT_EQ(direct.grads.size(), island.grads.size());
  for (size_t l = 0; l < direct.grads.size(); ++l) {
    ASSERT_EQ(direct.grads[l].scalar_type(), dtype) << what << " level " << l;
    EXPECT_EQ(direct.grads[l].suggest_memory_format(), reduced[l].suggest_memory_format()) << what;
    EXPECT_TRUE(at::equal(direct.grads[l], island.grads[l].to(dtype)))
        << what << ": gradient of level " << l;
  }
  // Not vacuous: the gradient reaches the maps.
  EXPECT_GT(direct.grads[0].abs().sum().item<double>(), 0) << what;
}

class RoIAlignReduced : public ::testing::TestWithParam<at::ScalarType> {
 protected:
  void SetUp() override { at::manual_seed(5); }
};

TEST_P(RoIAlignReduced, SingleLevelIsTheFloat32IslandBitForBit) {
  const at::ScalarType dtype = GetParam();
  for (const bool channels_last : {false, true}) {
    for (const bool aligned : {false, true}) {
      for (const int64_t sampling : {int64_t{2}, int64_t{0}}) {
        const std::string what = std::string(c10::toString(dtype)) +
                                 (channels_last ? " channels-last" : " contiguous") +
                                 (aligned ? " aligned" : "") + " sampling " + std::to_string(sampling);
        at::Tensor x = at::randn({2, 24, 30, 44}).to(dtype);
        if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor rois = random_rois(40, 2, 160);
        const at::Tensor weight = at::randn({40, 24, 7, 7});
        expect_island_values({x}, weight, [&](const std::vector<at::Tensor>& f) {
          return roi_align(f[0], rois, 0.25, 7, 7, sampling, aligned);
        }, what);
      }
    }
  }
}

TEST_P(RoIAlignReduced, MultilevelIsTheFloat32IslandBitForBit) {
  const at::ScalarType dtype = GetParam();
  for (const bool channels_last : {false, true}) {
    for (const int64_t sampling : {int64_t{2}, int64_t{0}}) {
      const std::string what = std::string(c10::toString(dtype)) +
                               (channels_last ? " channels-last" : " contiguous") + " sampling " +
                               std::to_string(sampling);
      std::vector<at::Tensor> feats;
      for (const int64_t s : {4, 8, 16, 32}) {
        at::Tensor f = at::randn({2, 16, 256 / s, 320 / s}).to(dtype);
        feats.push_back(channels_last ? f.contiguous(at::MemoryFormat::ChannelsLast) : f);
      }
      const std::vector<double> scales = infer_spatial_scales(feats, 256, 320);
      // Boxes of every size, so that every level gets RoIs.
      const at::Tensor rois = random_rois(120, 2, 300);
      const at::Tensor weight = at::randn({120, 16, 14, 14});
      expect_island_values(feats, weight, [&](const std::vector<at::Tensor>& f) {
        return multilevel_roi_align(f, rois, 14, sampling, false, scales);
      }, what);
    }
  }
}

// Under autocast (the CPU's bfloat16, the Gaudi systems' precision) the features reach the kernel
// as they are and the RoIs in float32, whatever dtype the caller gave them: the same values as
// pooling the widened maps with float32 RoIs.
TEST_P(RoIAlignReduced, AutocastHandsTheFeaturesOverAsTheyAre) {
  const at::ScalarType dtype = GetParam();
  std::vector<at::Tensor> feats;
  for (const int64_t s : {4, 8, 16, 32}) {
    feats.push_back(at::randn({2, 8, 256 / s, 256 / s}).to(dtype).contiguous(at::MemoryFormat::ChannelsLast));
  }
  const std::vector<double> scales = infer_spatial_scales(feats, 256, 256);
  const at::Tensor rois = random_rois(50, 2, 250);
  std::vector<at::Tensor> wide;
  for (const at::Tensor& f : feats) wide.push_back(f.to(at::kFloat));
  const at::Tensor want_ml = multilevel_roi_align(wide, rois, 7, 2, false, scales).to(dtype);
  const at::Tensor want_one = roi_align(wide[0], rois, 0.25, 7, 7, 2, false).to(dtype);
  at::Tensor got_ml, got_one;
  {
    const bool was = at::autocast::is_autocast_enabled(at::kCPU);
    const at::ScalarType was_dtype = at::autocast::get_autocast_dtype(at::kCPU);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    // RoIs in the features' dtype, as a caller might hand them: autocast widens them.
    const at::Tensor rois_f64 = rois.to(at::kDouble);
    got_ml = multilevel_roi_align(feats, rois_f64, 7, 2, false, scales);
    got_one = roi_align(feats[0], rois_f64, 0.25, 7, 7, 2, false);
    at::autocast::set_autocast_enabled(at::kCPU, was);
    at::autocast::set_autocast_dtype(at::kCPU, was_dtype);
    at::autocast::clear_cache();
  }
  ASSERT_EQ(got_ml.scalar_type(), dtype);
  EXPECT_TRUE(at::equal(got_ml, want_ml));
  EXPECT_TRUE(at::equal(got_one, want_one));
}

// Outside autocast, reduced-precision features want float32 RoIs: RoIs in float16 would place a
// box edge at x = 1333 only to half a pixel. One error naming both dtypes.
TEST_P(RoIAlignReduced, RoIsInTheFeaturesReducedDtypeAreRefused) {
  const at::ScalarType dtype = GetParam();
  const at::Tensor x = at::randn({1, 4, 16, 16}).to(dtype);
  const at::Tensor rois = random_rois(3, 1, 60).to(dtype);
  try {
    roi_align(x, rois, 0.25, 7, 7, 2, false);
    FAIL() << "rois in " << dtype << " were accepted";
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("rois must have dtype Float for " + std::string(c10::toString(dtype)) + " features"),
              std::string::npos) << msg;
  }
  EXPECT_THROW(multilevel_roi_align({x}, rois, 7, 2, false, {0.25}), c10::Error);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RoIAlignReduced, ::testing::Values(at::kHalf, at::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

}  // namespace
