// The C++ API of mrcnn_ops as the network uses it: classes and structs that Python does not see
// (BoxCoder, AnchorGenerator, Matcher, the sampler with an at::Generator, ProposalOptions /
// Proposals, PolygonList), autograd through the C++ entry points, thread-count determinism and
// constructor validation. Numerical parity with torchvision lives in the test_*.py checks.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/ops/ops.h"

namespace mrcnn::ops {
namespace {

class OpsApi : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(2); }
};

TEST_F(OpsApi, BoxCoderRoundTripsAndValidates) {
  BoxCoder coder({10.0, 10.0, 5.0, 5.0});
  EXPECT_DOUBLE_EQ(coder.bbox_xform_clip(), std::log(1000.0 / 16));
  const at::Tensor proposals = torch::tensor({{10.0f, 20.0f, 50.0f, 80.0f}, {0.f, 0.f, 8.f, 8.f}});
  const at::Tensor gt = torch::tensor({{12.0f, 18.0f, 60.0f, 70.0f}, {1.f, 2.f, 7.f, 9.f}});
  const at::Tensor codes = coder.encode(gt, proposals);
  ASSERT_EQ(codes.sizes(), (at::IntArrayRef{2, 4}));
  EXPECT_TRUE(at::allclose(coder.decode(codes, proposals), gt, 1e-4, 1e-4));
  // Two classes decode side by side.
  const at::Tensor two = coder.decode(at::cat({codes, at::zeros_like(codes)}, 1), proposals);
  ASSERT_EQ(two.sizes(), (at::IntArrayRef{2, 8}));
  EXPECT_TRUE(at::allclose(two.slice(1, 4, 8), proposals, 1e-5, 1e-5));
  EXPECT_THROW(BoxCoder({1.0, 0.0, 1.0, 1.0}), std::invalid_argument);
  EXPECT_THROW(BoxCoder({1.0, 1.0, 1.0, 1.0}, NAN), std::invalid_argument);
}

TEST_F(OpsApi, AnchorGeneratorDefaultMatchesTheReferenceLayout) {
  const AnchorGenerator gen = AnchorGenerator::fpn_default();
  ASSERT_EQ(gen.num_levels(), 5);
  EXPECT_EQ(gen.num_anchors_per_location(), 3);
  // Cell anchors of P2 (size 32): ratios 0.5, 1, 2 -> 45x23, 32x32, 23x45 rounded.
  const at::Tensor cell = gen.cell_anchors(0);
  EXPECT_TRUE(at::equal(cell, torch::tensor({{-23.f, -11.f, 23.f, 11.f},
                                             {-16.f, -16.f, 16.f, 16.f},
                                             {-11.f, -23.f, 11.f, 23.f}})));
  const auto anchors =
      gen({{200, 336}, {100, 168}, {50, 84}, {25, 42}, {13, 21}}, {800, 1344});
  ASSERT_EQ(anchors.size(), 5u);
  EXPECT_EQ(anchors[0].size(0), 200 * 336 * 3);
  // Row-major locations, anchors innermost: anchor 3 is location (0, 1), shifted by stride 4.
  EXPECT_TRUE(at::equal(anchors[0][3], cell[0] + torch::tensor({4.f, 0.f, 4.f, 0.f})));
  // P6 of an 800-high image: stride 800 / 13 = 61 vertically (torchvision's integer stride).
  EXPECT_FLOAT_EQ(anchors[4][21 * 3][1].item<float>(), 61.f + gen.cell_anchors(4)[0][1].item<float>());
  EXPECT_THROW(gen({{10, 10}}, {40, 40}), std::invalid_argument);
  EXPECT_THROW(AnchorGenerator({{32}}, {0.5, -1.0}), std::invalid_argument);
  // From feature maps.
  std::vector<at::Tensor> feats;
  for (int64_t s : {4, 8, 16, 32, 64}) feats.push_back(at::zeros({1, 2, 128 / s, 192 / s}));
  EXPECT_EQ(gen(feats, {128, 192})[2].size(0), 8 * 12 * 3);
}

TEST_F(OpsApi, MatcherSentinelsAndEmptyGroundTruth) {
  const Matcher rpn(0.7, 0.3, true);
  // Prediction 0: best IoU 0.8 -> gt 0; 1: 0.5 -> between; 2: 0.1 -> below, but it is gt 1's
  // best match, so the low-quality rule gives it back.
  const at::Tensor q = torch::tensor({{0.8f, 0.5f, 0.0f}, {0.1f, 0.05f, 0.1f}});
  const at::Tensor m = rpn(q);
  EXPECT_EQ(m[0].item<int64_t>(), 0);
  EXPECT_EQ(m[1].item<int64_t>(), Matcher::kBetweenThresholds);
  EXPECT_EQ(m[2].item<int64_t>(), 1);
  const Matcher heads(0.5, 0.5, false);
  EXPECT_EQ(heads(q)[2].item<int64_t>(), Matcher::kBelowLowThreshold);
  const at::Tensor none = rpn(at::zeros({0, 4}));
  EXPECT_TRUE(at::equal(none, at::full({4}, Matcher::kBelowLowThreshold, at::kLong)));
  EXPECT_THROW(Matcher(0.3, 0.7, false), std::invalid_argument);
}

TEST_F(OpsApi, SamplerIsDeterministicForASeed) {
  const BalancedPositiveNegativeSampler sampler(64, 0.25);
  const at::Tensor labels = at::randint(-1, 3, {1000}, at::kLong);
  at::Generator g1 = at::make_generator<at::CPUGeneratorImpl>(7);
  at::Generator g2 = at::make_generator<at::CPUGeneratorImpl>(7);
  auto [pos1, neg1] = sampler(labels, g1);
  auto [pos2, neg2] = sampler(labels, g2);
  EXPECT_TRUE(at::equal(pos1, pos2));
  EXPECT_TRUE(at::equal(neg1, neg2));
  EXPECT_EQ(pos1.sum().item<int64_t>(), 16);
  EXPECT_EQ(neg1.sum().item<int64_t>(), 48);
  EXPECT_FALSE((pos1 & labels.lt(1)).any().item<bool>());
  EXPECT_FALSE((neg1 & labels.ne(0)).any().item<bool>());
  // The next draw from the same generator differs.
  auto [pos3, neg3] = sampler(labels, g1);
  EXPECT_FALSE(at::equal(pos1, pos3) && at::equal(neg1, neg3));
  EXPECT_THROW(BalancedPositiveNegativeSampler(10, 1.5), std::invalid_argument);
}

// indices() is the masks' nonzero(), drawn the same way: for scarce and plentiful positives and
// negatives, and for none at all.
TEST_F(OpsApi, SamplerIndicesAreTheMasksNonzero) {
  for (const int64_t size : {0, 5, 40, 1000}) {
    for (const int64_t batch : {8, 64, 512}) {
      SCOPED_TRACE(std::to_string(size) + " labels, " + std::to_string(batch) + " per image");
      const BalancedPositiveNegativeSampler sampler(batch, 0.25);
      const at::Tensor labels = at::randint(-1, 3, {size}, at::kLong);
      at::Generator g1 = at::make_generator<at::CPUGeneratorImpl>(9);
      at::Generator g2 = at::make_generator<at::CPUGeneratorImpl>(9);
      const auto [pos, neg] = sampler(labels, g1);
      const auto [pos_i, neg_i] = sampler.indices(labels, g2);
      EXPECT_TRUE(at::equal(pos_i, pos.nonzero().squeeze(1)));
      EXPECT_TRUE(at::equal(neg_i, neg.nonzero().squeeze(1)));
      EXPECT_EQ(pos_i.scalar_type(), at::kLong);
    }
  }
}

// The batch draw (one read of every image's counts) is the documented draw, image after image:
// where() for the candidates, then randperm of the positives and of the negatives on the image's
// generator. Per-image generators and one generator shared by the batch (drawn in image order);
// images with no labels, no positives, no negatives, and more of either than the batch takes.
TEST_F(OpsApi, SamplerBatchDrawIsEachImagesDrawInImageOrder) {
  const BalancedPositiveNegativeSampler sampler(64, 0.25);
  auto reference = [&](const at::Tensor& labels, at::Generator& g) {
    const at::Tensor positive = at::where(labels.ge(1))[0], negative = at::where(labels.eq(0))[0];
    const int64_t num_pos = std::min<int64_t>(positive.numel(), 16);
    const int64_t num_neg = std::min<int64_t>(negative.numel(), 64 - num_pos);
    const at::Tensor perm_pos = at::randperm(positive.numel(), g, at::kLong);
    const at::Tensor perm_neg = at::randperm(negative.numel(), g, at::kLong);
    return std::make_pair(std::get<0>(positive.index_select(0, perm_pos.slice(0, 0, num_pos)).sort()),
                          std::get<0>(negative.index_select(0, perm_neg.slice(0, 0, num_neg)).sort()));
  };
  at::manual_seed(17);
  std::vector<at::Tensor> labels = {
      at::randint(-1, 3, {2000}, at::kLong),    // plenty of both
      at::empty({0}, at::kLong),                // nothing to draw
      at::full({30}, 2, at::kLong),             // positives only, fewer than 16 + 48
      at::randint(-1, 1, {500}, at::kLong),     // no positives
      at::cat({at::ones({10}, at::kLong), at::zeros({30}, at::kLong)}).roll(7),  // fewer than taken
  };
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "one generator for the batch" : "a generator per image");
    std::vector<at::Generator> mine, theirs;
    for (size_t i = 0; i < labels.size(); ++i) {
      mine.push_back(at::make_generator<at::CPUGeneratorImpl>(shared ? 5 : 100 + i));
      theirs.push_back(at::make_generator<at::CPUGeneratorImpl>(shared ? 5 : 100 + i));
    }
    std::vector<at::Generator*> generators;
    for (size_t i = 0; i < labels.size(); ++i) generators.push_back(&mine[shared ? 0 : i]);
    const auto draws = sampler.indices(labels, generators);
    ASSERT_EQ(draws.size(), labels.size());
    std::vector<int64_t> drawn;
    for (size_t i = 0; i < labels.size(); ++i) {
      SCOPED_TRACE("image " + std::to_string(i));
      const auto [pos, neg] = reference(labels[i], theirs[shared ? 0 : i]);
      EXPECT_TRUE(at::equal(draws[i].first, pos));
      EXPECT_TRUE(at::equal(draws[i].second, neg));
      drawn.push_back(draws[i].first.numel() + draws[i].second.numel());
    }
    // Full batches where labels are plenty; the 16 positives' cap; all 40 of a short set.
    EXPECT_EQ(drawn, (std::vector<int64_t>{64, 0, 16, 64, 40}));
  }
  EXPECT_TRUE(sampler.indices(std::vector<at::Tensor>{}, std::vector<at::Generator*>{}).empty());
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_THROW(sampler.indices(labels, std::vector<at::Generator*>{&g}), c10::Error);
}

// Two samplers' pending draws (as the RPN's and the RoI head's) read in one copy, then drawn one
// after the other on one generator: each equals its own batch draw made in the same order. A
// pending draw with the wrong counts is refused with what was expected.
TEST_F(OpsApi, SamplerPendingDrawsReadInOneCopyDrawAsTheirOwnReads) {
  const BalancedPositiveNegativeSampler rpn(64, 0.5), roi(16, 0.25);
  at::manual_seed(23);
  const std::vector<at::Tensor> anchors = {at::randint(-1, 2, {700}, at::kLong), at::randint(-1, 2, {90}, at::kLong)};
  const std::vector<at::Tensor> rois = {at::randint(-1, 4, {40}, at::kLong), at::zeros({12}, at::kLong)};
  at::Generator mine = at::make_generator<at::CPUGeneratorImpl>(8);
  at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(8);
  const auto pending_rpn = rpn.prepare(anchors);
  const auto pending_roi = roi.prepare(rois);
  const auto counts = BalancedPositiveNegativeSampler::read_counts({&pending_rpn, &pending_roi});
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].numel(), 4);
  EXPECT_EQ(counts[1].numel(), 4);
  const auto got_rpn = rpn.draw(pending_rpn, counts[0], {&mine, &mine});
  const auto got_roi = roi.draw(pending_roi, counts[1], {&mine, &mine});
  const auto want_rpn = rpn.indices(anchors, {&theirs, &theirs});
  const auto want_roi = roi.indices(rois, {&theirs, &theirs});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(at::equal(got_rpn[i].first, want_rpn[i].first)) << "anchors of image " << i;
    EXPECT_TRUE(at::equal(got_rpn[i].second, want_rpn[i].second)) << "anchors of image " << i;
    EXPECT_TRUE(at::equal(got_roi[i].first, want_roi[i].first)) << "RoIs of image " << i;
    EXPECT_TRUE(at::equal(got_roi[i].second, want_roi[i].second)) << "RoIs of image " << i;
  }
  EXPECT_EQ(got_roi[1].first.numel() + got_roi[1].second.numel(), 12) << "all 12 negatives fit";
  // The read in two halves (queued, then waited for) gives the same counts; a CPU tensor is its
  // own read.
  BalancedPositiveNegativeSampler::CountsRead halves({&pending_rpn, &pending_roi});
  const auto waited = halves.wait();
  ASSERT_EQ(waited.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(at::equal(waited[i], counts[i])) << i;
  const at::Tensor values = at::arange(5);
  EXPECT_TRUE(HostRead(values).wait().is_same(values));
  EXPECT_FALSE(HostRead().wait().defined());
  // An empty pending draw reads nothing and draws nothing.
  const auto none = rpn.prepare({});
  EXPECT_EQ(BalancedPositiveNegativeSampler::read_counts({&none}).front().numel(), 0);
  EXPECT_TRUE(rpn.draw(none, BalancedPositiveNegativeSampler::read_counts({&none}).front(), {}).empty());
  try {
    rpn.draw(pending_rpn, counts[0].slice(0, 0, 2), {&mine, &mine});
    ADD_FAILURE() << "two counts for two images were accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("expected the 4 counts"), std::string::npos)
        << e.what_without_backtrace();
  }
}

TEST_F(OpsApi, GenerateProposalsThroughTheStructs) {
  const AnchorGenerator gen = AnchorGenerator::fpn_default();
  std::vector<at::Tensor> obj, deltas, feats;
  at::manual_seed(3);
  for (int64_t s : {4, 8, 16, 32, 64}) {
    const int64_t h = (128 + s - 1) / s, w = (160 + s - 1) / s;
    obj.push_back(at::randn({2, 3, h, w}));
    deltas.push_back(at::randn({2, 12, h, w}) * 0.2);
    feats.push_back(at::zeros({2, 1, h, w}));
  }
  const auto anchors = gen(feats, {128, 160});
  ProposalOptions opts;
  opts.pre_nms_top_n = 200;
  opts.post_nms_top_n = 100;
  opts.min_size = 1e-3;
  const at::Tensor sizes = torch::tensor({{128, 160}, {100, 120}}, at::kLong);
  const Proposals p = generate_proposals(obj, deltas, anchors, sizes, opts);
  ASSERT_EQ(p.boxes.sizes(), (at::IntArrayRef{2, 100, 4}));
  ASSERT_EQ(p.scores.sizes(), (at::IntArrayRef{2, 100}));
  EXPECT_EQ(p.counts[0].item<int64_t>(), 100);
  // Clipped to each image's true size; probabilities sorted.
  EXPECT_LE(p.boxes[1].select(1, 2).max().item<float>(), 120.f);
  EXPECT_LE(p.boxes[1].select(1, 3).max().item<float>(), 100.f);
  const at::Tensor s0 = p.scores[0];
  EXPECT_TRUE(at::equal(s0, std::get<0>(s0.sort(0, /*descending=*/true))));
  EXPECT_GE(s0.min().item<float>(), 0.f);
  EXPECT_LE(s0.max().item<float>(), 1.f);
  opts.per_batch_post_nms = true;
  const Proposals b = generate_proposals(obj, deltas, anchors, sizes, opts);
  EXPECT_EQ(b.counts.sum().item<int64_t>(), 100);
}

TEST_F(OpsApi, MultilevelRoIAlignThroughCppAutogradIsThreadCountIndependent) {
  at::manual_seed(5);
  std::vector<at::Tensor> feats;
  for (int64_t s : {4, 8, 16, 32}) feats.push_back(at::randn({2, 8, 256 / s, 320 / s}));
  const std::vector<double> scales = infer_spatial_scales(feats, 250, 320);
  ASSERT_EQ(scales, (std::vector<double>{0.25, 0.125, 0.0625, 0.03125}));
  at::Tensor boxes = at::rand({64, 4}) * 200;
  boxes.slice(1, 2, 4) += boxes.slice(1, 0, 2) + 4;
  const at::Tensor rois =
      at::cat({at::randint(0, 2, {64, 1}).to(at::kFloat), boxes}, 1);
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    std::vector<at::Tensor> leaves;
    for (const at::Tensor& f : feats) leaves.push_back(f.clone().requires_grad_(true));
    const at::Tensor out = multilevel_roi_align(leaves, rois, 7, 2, false, scales);
    EXPECT_EQ(out.sizes(), (at::IntArrayRef{64, 8, 7, 7}));
    out.mul(at::arange(out.numel()).view(out.sizes()).to(at::kFloat)).sum().backward();
    std::vector<at::Tensor> result = {out.detach()};
    for (const at::Tensor& l : leaves) result.push_back(l.grad());
    return result;
  };
  const auto one = run(1);
  const auto two = run(2);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(at::equal(one[i], two[i])) << i;
  // Single-level RoIAlign equals the multi-level one when every box is on P2.
  const at::Tensor small = torch::tensor({{0.f, 10.f, 10.f, 40.f, 30.f}, {1.f, 0.f, 0.f, 20.f, 60.f}});
  EXPECT_TRUE(at::equal(multilevel_roi_align(feats, small, 7, 2, false, scales),
                        roi_align(feats[0], small, 0.25, 7, 7, 2, false)));
  EXPECT_TRUE(at::equal(map_rois_to_levels(small, 2, 5), torch::tensor({0, 0}, at::kLong)));
}

TEST_F(OpsApi, MaskTargetsAndPasteFromCpp) {
  // One instance: the square (2, 2)-(6, 6), one polygon.
  ops::PolygonList polys{torch::tensor({2.0, 2.0, 6.0, 2.0, 6.0, 6.0, 2.0, 6.0}, at::kDouble),
                           torch::tensor({0, 8}, at::kLong), torch::tensor({0, 1}, at::kLong)};
  const at::Tensor proposals = torch::tensor({{2.f, 2.f, 6.f, 6.f}, {0.f, 0.f, 8.f, 8.f}});
  const at::Tensor t = mask_targets(polys, torch::tensor({0, 0}, at::kLong), proposals, 8);
  ASSERT_EQ(t.sizes(), (at::IntArrayRef{2, 8, 8}));
  EXPECT_EQ(t[0].sum().item<float>(), 64.f);  // the proposal is the square: all ones
  EXPECT_GT(t[1].sum().item<float>(), 10.f);
  EXPECT_LT(t[1].sum().item<float>(), 30.f);  // the square covers a quarter of the bigger box
  EXPECT_THROW(mask_targets(polys, torch::tensor({1}, at::kLong), proposals.slice(0, 0, 1), 8),
               c10::Error);
  // Offsets the kernels index through are checked: a start past 0, decreasing instance offsets.
  const ops::PolygonList shifted{polys.coords, torch::tensor({2, 8}, at::kLong), polys.instance_offsets};
  EXPECT_THROW(shifted.check(), std::invalid_argument);
  const ops::PolygonList two{torch::tensor({2.0, 2.0, 6.0, 2.0, 6.0, 6.0, 2.0, 6.0}, at::kDouble),
                             torch::tensor({0, 4, 8}, at::kLong), torch::tensor({0, 2, 1, 2}, at::kLong)};
  EXPECT_THROW(two.check(), std::invalid_argument);
  EXPECT_THROW(mask_targets(two, torch::tensor({0}, at::kLong), proposals.slice(0, 0, 1), 8), std::exception);
  const at::Tensor masks = at::rand({3, 28, 28});
  const at::Tensor boxes = torch::tensor({{1.f, 2.f, 30.f, 40.f}, {-5.f, -5.f, 10.f, 10.f},
                                          {20.f, 20.f, 63.f, 47.f}});
  const at::Tensor f = paste_masks_in_image(masks, boxes, 48, 64);
  const at::Tensor u8 = paste_masks_in_image_binary(masks, boxes, 48, 64);
  ASSERT_EQ(f.sizes(), (at::IntArrayRef{3, 48, 64}));
  EXPECT_EQ(u8.scalar_type(), at::kByte);
  EXPECT_TRUE(at::equal(u8.to(at::kBool), f.gt(0.5)));
}

TEST_F(OpsApi, NmsFromCpp) {
  const at::Tensor b = torch::tensor({{0.f, 0.f, 10.f, 10.f}, {1.f, 1.f, 10.f, 10.f},
                                      {20.f, 20.f, 30.f, 30.f}});
  const at::Tensor s = torch::tensor({0.5f, 0.9f, 0.1f});
  EXPECT_TRUE(at::equal(nms(b, s, 0.5), torch::tensor({1, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(batched_nms(b, s, torch::tensor({0, 1, 0}, at::kLong), 0.5),
                        torch::tensor({1, 0, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(remove_small_boxes(b, 9.5), torch::tensor({0, 2}, at::kLong)));
  EXPECT_TRUE(at::equal(clip_boxes_to_image(b, 25, 25).select(0, 2),
                        torch::tensor({20.f, 20.f, 25.f, 25.f})));
  EXPECT_NEAR(box_iou(b, b)[0][1].item<float>(), 81.f / 100.f, 1e-6);
}

}  // namespace
}  // namespace mrcnn::ops
