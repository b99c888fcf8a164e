// The portable NMS and proposal generation (model/ops/portable/nms.cpp, proposals.cpp) against the
// native CPU kernels on MLPerf-shaped inputs: NMS of 2000 boxes with tied scores, duplicates and
// degenerate boxes; batched NMS of 5000 boxes over 80 categories (the box head at inference);
// generate_proposals for a batch of 2 at 800x1344 (FPN P2..P6, 3 anchors per location) at the
// training shape (pre-NMS 2000 per level, post-NMS 1000 per batch) and the test shape (1000 and
// 1000 per image).
//
// Tolerance: none in float32. The kept indices are equal, and the proposals' boxes, scores and
// counts are bit-identical (compared as integers, so even the sign of a zero counts). In float64
// the portable exp is ATen's, not glibc's (see portable/proposals.cpp), so the counts are equal
// and boxes and scores agree to 1e-12 relative.
// The test also checks that ImplementationGuard(kPortable) routes the public entry points to the
// portable code: it accepts float16, which the native CPU kernels reject.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "model/ops/box/anchor_generator.h"
#include "model/ops/implementation.h"
#include "model/ops/nms.h"
#include "model/ops/portable/portable.h"
#include "model/ops/proposals.h"

namespace mrcnn::ops {
namespace {

constexpr int64_t kPadH = 800, kPadW = 1344;

// Equal values bit for bit (float32 and float64 compared as integers of their width).
bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.scalar_type() == at::kFloat) {
    return at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
  }
  if (a.scalar_type() == at::kDouble) {
    return at::equal(a.contiguous().view(at::kLong), b.contiguous().view(at::kLong));
  }
  return at::equal(a, b);
}

double max_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0.0;
  const at::Tensor d = (a.to(at::kDouble) - b.to(at::kDouble)).abs() /
                       b.to(at::kDouble).abs().clamp_min(1.0);
  return d.max().item<double>();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// n boxes in the padded image as a detector gives them: clusters of about 20 around n / 20
// objects (log-uniform sides from 2 to 400 px, each box jittered by up to 15% of the object's
// size), so that chains of overlaps are long; 5% exact duplicates of other boxes, 5% degenerate
// (zero width or height); scores from 100 levels, so many tie.
std::pair<at::Tensor, at::Tensor> detections(int64_t n, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t objects = std::max<int64_t>(1, n / 20);
  const at::Tensor obj_side = at::exp(at::rand({objects, 2}, gen) * std::log(200.0)) * 2.0;
  const at::Tensor obj_centre = at::rand({objects, 2}, gen) * at::tensor({1344.0f, 800.0f});
  const at::Tensor which = at::randint(0, objects, {n}, gen);
  const at::Tensor jitter = (at::rand({n, 4}, gen) - 0.5) * 0.3;
  const at::Tensor side = obj_side.index_select(0, which) * (1 + jitter.narrow(1, 0, 2));
  const at::Tensor centre = obj_centre.index_select(0, which) +
                            obj_side.index_select(0, which) * jitter.narrow(1, 2, 2);
  at::Tensor boxes = at::cat({centre - side / 2, centre + side / 2}, 1);
  const int64_t dup = n / 20;
  boxes.narrow(0, 0, dup).copy_(boxes.index_select(0, at::randint(dup, n, {dup}, gen)));
  boxes.narrow(0, dup, dup / 2).select(1, 2).copy_(boxes.narrow(0, dup, dup / 2).select(1, 0));
  boxes.narrow(0, dup + dup / 2, dup / 2)
      .select(1, 3)
      .copy_(boxes.narrow(0, dup + dup / 2, dup / 2).select(1, 1));
  const at::Tensor scores = at::randint(0, 100, {n}, gen).to(at::kFloat) / 100.0;
  return {boxes.contiguous(), scores};
}

at::Tensor native_nms(const at::Tensor& boxes, const at::Tensor& scores, double thr) {
  ImplementationGuard native(Implementation::kNative);
  return nms(boxes, scores, thr);
}

at::Tensor native_batched_nms(const at::Tensor& boxes, const at::Tensor& scores,
                              const at::Tensor& idxs, double thr) {
  ImplementationGuard native(Implementation::kNative);
  return batched_nms(boxes, scores, idxs, thr);
}

class PortableNmsProposals : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(2); }
};

TEST_F(PortableNmsProposals, NmsOf2000BoxesKeepsTheNativeIndices) {
  auto [boxes, scores] = detections(2000, 1);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor b = boxes.to(dtype), s = scores.to(dtype);
    for (const double thr : {0.0, 0.3, 0.5, 0.7, 1.0}) {
      const at::Tensor want = native_nms(b, s, thr);
      const at::Tensor got = portable::nms(b, s, thr);
      EXPECT_TRUE(at::equal(got, want)) << dtype << " thr " << thr << ": kept " << got.size(0)
                                        << " vs " << want.size(0);
      if (dtype == at::kFloat) {
        std::printf("nms 2000 boxes, thr %.1f: kept %lld\n", thr,
                    static_cast<long long>(want.size(0)));
      }
    }
  }
  // A threshold between two floats: compared in double, as the kernel does.
  const at::Tensor b = at::tensor({0.f, 0.f, 10.f, 10.f, 0.f, 0.f, 10.f, 7.f}).view({2, 4});
  const at::Tensor s = at::tensor({0.9f, 0.8f});
  for (const double thr : {0.7, std::nextafter(0.7, 0.0), std::nextafter(0.7, 1.0)}) {
    EXPECT_TRUE(at::equal(portable::nms(b, s, thr), native_nms(b, s, thr))) << thr;
  }
  // Empty input.
  EXPECT_EQ(portable::nms(at::zeros({0, 4}), at::zeros({0}), 0.5).numel(), 0);
}

TEST_F(PortableNmsProposals, BatchedNmsOf5000BoxesOver80CategoriesKeepsTheNativeIndices) {
  auto [boxes, scores] = detections(5000, 2);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  // Skewed categories, as detections are: a few categories hold most boxes.
  const at::Tensor idxs =
      (at::rand({5000}, gen).pow(3) * 80).to(at::kLong).clamp_max(79);
  for (const double thr : {0.5, 0.7}) {
    const auto t0 = std::chrono::steady_clock::now();
    const at::Tensor want = native_batched_nms(boxes, scores, idxs, thr);
    const double t_native = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    const at::Tensor got = portable::batched_nms(boxes, scores, idxs, thr);
    const double t_portable = seconds_since(t1);
    EXPECT_TRUE(at::equal(got, want)) << "thr " << thr << ": kept " << got.size(0) << " vs "
                                      << want.size(0);
    std::printf("batched_nms 5000 boxes / 80 categories, thr %.1f: kept %lld; native %.1f ms, "
                "portable %.1f ms\n",
                thr, static_cast<long long>(want.size(0)), t_native * 1e3, t_portable * 1e3);
  }
  // int32 categories, and categories that never suppress each other.
  EXPECT_TRUE(at::equal(portable::batched_nms(boxes, scores, idxs.to(at::kInt), 0.5),
                        native_batched_nms(boxes, scores, idxs, 0.5)));
  const at::Tensor same = at::tensor({0.f, 0.f, 10.f, 10.f}).repeat({3, 1});
  EXPECT_TRUE(at::equal(portable::batched_nms(same, at::tensor({0.9f, 0.8f, 0.7f}),
                                              at::tensor({0, 1, 0}, at::kLong), 0.5),
                        at::tensor({0, 1}, at::kLong)));
}

struct Head {
  std::vector<at::Tensor> objectness, deltas, anchors;
  at::Tensor image_sizes;
};

// The RPN head's outputs for a batch of 2 padded to 800x1344 (true sizes 800x1333 and
// 800x1200): logits with ties (multiples of 1/32), deltas N(0, 0.5) with 1% wild ones (x 6) that
// leave the image and get clipped.
Head mlperf_head(at::ScalarType dtype, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const std::vector<std::array<int64_t, 2>> grids = {
      {200, 336}, {100, 168}, {50, 84}, {25, 42}, {13, 21}};
  Head h;
  h.anchors = AnchorGenerator::fpn_default()(grids, {kPadH, kPadW});
  for (auto& a : h.anchors) a = a.to(dtype);
  for (const auto& g : grids) {
    h.objectness.push_back((at::round(at::randn({2, 3, g[0], g[1]}, gen) * 32) / 32).to(dtype));
    const at::Tensor wild = (at::rand({2, 12, g[0], g[1]}, gen) < 0.01).to(at::kFloat) * 5 + 1;
    h.deltas.push_back((at::randn({2, 12, g[0], g[1]}, gen) * 0.5 * wild).to(dtype));
  }
  h.image_sizes = at::tensor({800, 1333, 800, 1200}, at::kLong).view({2, 2});
  return h;
}

Proposals run_native(const Head& h, const ProposalOptions& o) {
  ImplementationGuard native(Implementation::kNative);
  return generate_proposals(h.objectness, h.deltas, h.anchors, h.image_sizes, o);
}

void expect_same_proposals(const Head& h, const ProposalOptions& o, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  const Proposals want = run_native(h, o);
  const double t_native = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  const Proposals got =
      portable::generate_proposals(h.objectness, h.deltas, h.anchors, h.image_sizes, o);
  const double t_portable = seconds_since(t1);
  EXPECT_TRUE(at::equal(got.counts, want.counts))
      << what << ": counts " << got.counts << " vs " << want.counts;
  if (h.objectness[0].scalar_type() == at::kFloat) {
    EXPECT_TRUE(bit_equal(got.boxes, want.boxes))
        << what << ": boxes max rel diff " << max_rel_diff(got.boxes, want.boxes);
    EXPECT_TRUE(bit_equal(got.scores, want.scores))
        << what << ": scores max rel diff " << max_rel_diff(got.scores, want.scores);
  } else {
    EXPECT_LE(max_rel_diff(got.boxes, want.boxes), 1e-12) << what;
    EXPECT_LE(max_rel_diff(got.scores, want.scores), 1e-12) << what;
  }
  std::printf("%s: counts %lld, %lld; boxes max rel diff %.3g, bit-identical %s; native %.1f ms, "
              "portable %.1f ms\n",
              what, static_cast<long long>(want.counts[0].item<int64_t>()),
              static_cast<long long>(want.counts[1].item<int64_t>()),
              max_rel_diff(got.boxes, want.boxes),
              bit_equal(got.boxes, want.boxes) && bit_equal(got.scores, want.scores) ? "yes" : "no",
              t_native * 1e3, t_portable * 1e3);
}

TEST_F(PortableNmsProposals, ProposalsAtTheTrainingShapeAreBitIdentical) {
  const Head h = mlperf_head(at::kFloat, 4);
  ProposalOptions o;
  o.pre_nms_top_n = 2000;
  o.post_nms_top_n = 1000;
  o.per_batch_post_nms = true;
  expect_same_proposals(h, o, "training (2000 / 1000 per batch)");
  o.min_size = 1e-3;
  o.score_threshold = 0.3;
  o.nms_threshold = 0.5;
  expect_same_proposals(h, o, "training, min_size 1e-3, score 0.3, nms 0.5");
}

TEST_F(PortableNmsProposals, ProposalsAtTheTestShapeAreBitIdentical) {
  const Head h = mlperf_head(at::kFloat, 5);
  ProposalOptions o;
  o.pre_nms_top_n = 1000;
  o.post_nms_top_n = 1000;
  expect_same_proposals(h, o, "test (1000 / 1000 per image)");
  o.post_nms_top_n = 300;
  o.min_size = 8.0;
  expect_same_proposals(h, o, "test, post 300, min_size 8");
}

TEST_F(PortableNmsProposals, Float64ProposalsAgreeToAnUlp) {
  const Head h = mlperf_head(at::kDouble, 6);
  ProposalOptions o;
  o.pre_nms_top_n = 1000;
  o.post_nms_top_n = 1000;
  expect_same_proposals(h, o, "float64 test shape");
}

TEST_F(PortableNmsProposals, ValueChecksThrowTheNativeMessages) {
  Head h = mlperf_head(at::kFloat, 7);
  ProposalOptions o;
  o.pre_nms_top_n = 100;
  o.post_nms_top_n = 50;
  auto message = [&](bool portable_impl) {
    try {
      if (portable_impl) {
        portable::generate_proposals(h.objectness, h.deltas, h.anchors, h.image_sizes, o);
      } else {
        run_native(h, o);
      }
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  h.objectness[2][1][0][3][4] = NAN;
  EXPECT_EQ(message(true), message(false));
  EXPECT_NE(message(true).find("objectness[2] of image 1 contains NaN"), std::string::npos);
  h.objectness[2][1][0][3][4] = 0.0f;
  // One (image, level) with the fault: the native kernel checks images x levels in parallel,
  // so with several the one it names depends on thread timing.
  h.deltas[1][0].fill_(NAN);
  EXPECT_EQ(message(true), message(false));
  EXPECT_NE(message(true).find("box_deltas[1] of image 0 decode to NaN at anchor"),
            std::string::npos);
  h.deltas[1][0].fill_(0.0f);
  h.image_sizes[1][0] = -1;
  EXPECT_EQ(message(true), message(false));
  EXPECT_NE(message(true).find("image_sizes[1] = (-1, 1200)"), std::string::npos);
}

TEST_F(PortableNmsProposals, ImplementationGuardRoutesThePublicOpsToThePortableCode) {
  auto [boxes, scores] = detections(500, 8);
  const at::Tensor half_boxes = boxes.to(at::kHalf), half_scores = scores.to(at::kHalf);
  const at::Tensor idxs = at::arange(500, at::kLong).remainder(7);
  {
    ImplementationGuard native(Implementation::kNative);
    EXPECT_THROW(nms(half_boxes, half_scores, 0.5), c10::Error);  // no float16 CPU kernel
  }
  const at::Tensor want = native_nms(half_boxes.to(at::kFloat), half_scores.to(at::kFloat), 0.5);
  const at::Tensor want_b =
      native_batched_nms(half_boxes.to(at::kFloat), half_scores.to(at::kFloat), idxs, 0.5);
  ImplementationGuard portable_impl(Implementation::kPortable);
  EXPECT_TRUE(at::equal(nms(half_boxes, half_scores, 0.5), want));  // float32 island
  EXPECT_TRUE(at::equal(batched_nms(half_boxes, half_scores, idxs, 0.5), want_b));
  EXPECT_TRUE(at::equal(nms(boxes, scores, 0.5), native_nms(boxes, scores, 0.5)));
  // generate_proposals: float16 in, float32 inside, float16 out.
  Head h = mlperf_head(at::kFloat, 9);
  ProposalOptions o;
  o.pre_nms_top_n = 200;
  o.post_nms_top_n = 100;
  for (auto* list : {&h.objectness, &h.deltas, &h.anchors}) {
    for (auto& t : *list) t = t.to(at::kHalf);
  }
  const Proposals p = generate_proposals(h.objectness, h.deltas, h.anchors, h.image_sizes, o);
  EXPECT_EQ(p.boxes.scalar_type(), at::kHalf);
  EXPECT_GT(p.counts[0].item<int64_t>(), 0);
}

}  // namespace
}  // namespace mrcnn::ops
