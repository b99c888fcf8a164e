// The whole network on tiny configurations: losses, gradient flow, determinism, padding and
// batch invariance, inference in original coordinates, precision and layout switches, errors.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "model/mask_rcnn.h"
#include "model/ops/device_faults.h"
#include "model/targets.h"
#include "tests/model/tiny.h"

namespace mrcnn::model {
namespace {

using testing::make_batch;
using testing::synthetic_image;
using testing::tiny_options;

class MaskRCNNTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(2); }

  static TrainOutput train(MaskRCNN& m, const Batch& b, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    return m->forward_train(b, gen);
  }

  // One step from zeroed gradients: its output and a host copy of every parameter's gradient.
  static std::pair<TrainOutput, std::map<std::string, at::Tensor>> train_with_grads(MaskRCNN& m, const Batch& b,
                                                                                    uint64_t seed) {
    m->zero_grad();
    TrainOutput out = train(m, b, seed);
    total_loss(out.losses).backward();
    std::map<std::string, at::Tensor> grads;
    for (const auto& p : m->named_parameters())
      if (p.value().grad().defined()) grads[p.key()] = p.value().grad().clone().cpu();
    return {std::move(out), std::move(grads)};
  }
};

double value(const at::Tensor& t) { return t.item<double>(); }

void expect_same_detections(const Detections& a, const Detections& b, double box_tol = 1e-3) {
  ASSERT_EQ(a.size(), b.size());
  if (a.size() == 0) return;
  EXPECT_TRUE(at::equal(a.labels, b.labels));
  EXPECT_TRUE(at::allclose(a.boxes, b.boxes, 0, box_tol)) << (a.boxes - b.boxes).abs().max();
  EXPECT_TRUE(at::allclose(a.scores, b.scores, 1e-5, 1e-6));
  ASSERT_EQ(a.masks.sizes(), b.masks.sizes());
  // Pasted masks may differ where a probability sits within rounding of the threshold.
  EXPECT_LE((a.masks != b.masks).sum().item<int64_t>(), a.masks.numel() / 1000 + 1);
}

TEST_F(MaskRCNNTest, TrainingGivesTheFiveLossesFinite) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(1));
  const Batch b = make_batch({synthetic_image(96, 128, 3, 1), synthetic_image(80, 100, 2, 2)}, {11, 12});
  const TrainOutput out = train(m, b, 7);
  ASSERT_EQ(out.losses.size(), 5u);
  double sum = 0;
  for (const char* name : kLossNames) {
    ASSERT_TRUE(out.losses.count(name)) << name;
    const at::Tensor& l = out.losses.at(name);
    EXPECT_EQ(l.dim(), 0) << name;
    EXPECT_EQ(l.scalar_type(), at::kFloat) << name;
    EXPECT_TRUE(std::isfinite(value(l))) << name;
    EXPECT_GT(value(l), 0.0) << name;
    sum += value(l);
  }
  EXPECT_NEAR(value(total_loss(out.losses)), sum, 1e-5);
  // RPN: 64 anchors per image; RoI heads: 32 RoIs per image (enough candidates for both).
  EXPECT_EQ(out.counts().at("rpn_sampled").item<int64_t>(), 128);
  EXPECT_EQ(out.counts().at("roi_sampled").item<int64_t>(), 64);
  EXPECT_GT(out.counts().at("roi_positive").item<int64_t>(), 0);
}

TEST_F(MaskRCNNTest, EveryTrainableParameterGetsAGradientAndNoFrozenOne) {
  for (NormKind norm : {NormKind::kFrozenBatchNorm, NormKind::kGroupNorm}) {
    SCOPED_TRACE(to_string(norm));
    ModelOptions o = tiny_options();
    o.backbone.norm = norm;
    o.backbone.group_norm_groups = 4;
    o.backbone.freeze_at = norm == NormKind::kGroupNorm ? 0 : 2;
    // Every anchor in the loss: in images this small, the anchors of P4-P6 all cross the border,
    // and no RoI is large enough for those levels: only the RPN loss reaches them.
    o.rpn.straddle_threshold = -1;
    MaskRCNN m(o, at::make_generator<at::CPUGeneratorImpl>(2));
    const Batch b = make_batch({synthetic_image(96, 128, 3, 3), synthetic_image(64, 96, 2, 4)}, {1, 2});
    total_loss(train(m, b, 3).losses).backward();
    int trainable = 0, frozen = 0;
    for (const auto& p : m->named_parameters()) {
      const at::Tensor& g = p.value().grad();
      if (p.value().requires_grad()) {
        ++trainable;
        ASSERT_TRUE(g.defined()) << p.key();
        EXPECT_TRUE(at::isfinite(g).all().item<bool>()) << p.key();
        EXPECT_TRUE(g.ne(0).any().item<bool>()) << p.key() << " has an all-zero gradient";
      } else {
        ++frozen;
        EXPECT_FALSE(g.defined()) << p.key();
        EXPECT_EQ(p.key().rfind("backbone.", 0), 0u) << p.key();
      }
    }
    EXPECT_GT(trainable, 0);
    if (norm == NormKind::kFrozenBatchNorm) {
      EXPECT_GT(frozen, 0);  // stem and res2
      for (const auto& b : m->named_buffers()) EXPECT_FALSE(b.value().requires_grad()) << b.key();
    } else {
      EXPECT_EQ(frozen, 0);
    }
  }
}

TEST_F(MaskRCNNTest, SameSeedSameBitsDifferentSeedDifferentSamples) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(4));
  const Batch b = make_batch({synthetic_image(96, 128, 3, 5), synthetic_image(96, 96, 2, 6)}, {5, 6});
  const TrainOutput a1 = train(m, b, 9), a2 = train(m, b, 9), c = train(m, b, 10);
  bool any_differs = false;
  for (const char* name : kLossNames) {
    EXPECT_TRUE(at::equal(a1.losses.at(name), a2.losses.at(name))) << name;
    any_differs |= !at::equal(a1.losses.at(name), c.losses.at(name));
  }
  EXPECT_TRUE(any_differs);
  // Gradients are bit-identical too.
  auto grads = [&](uint64_t seed) {
    m->zero_grad();
    total_loss(train(m, b, seed).losses).backward();
    std::vector<at::Tensor> g;
    for (const auto& p : m->parameters())
      if (p.grad().defined()) g.push_back(p.grad().clone());
    return g;
  };
  const auto g1 = grads(9), g2 = grads(9);
  ASSERT_EQ(g1.size(), g2.size());
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_TRUE(at::equal(g1[i], g2[i])) << i;
}

// An image alone (padded to the next multiple of 32) and the same image padded far more, with
// more padded ground-truth rows, give the same losses and detections. Exact in arithmetic with
// the network as built (zero biases, identity frozen norms: padding stays zero through every
// layer) for images whose padding margin exceeds the stride of every level RoIs are pooled from
// (see README.md); equal to float rounding here.
// A training step labels the RPN's anchors before the front and reads their counts without
// blocking, then the RoI head's after it (or, with MRCNN_RPN_LABELS_AFTER_FRONT=1, both in one
// copy; test_train_e2e runs both orders): the same samples, losses and counts, bit for bit, as
// each head with its own read after the front, the RPN first, from the same streams -- on one
// generator shared by the batch, where the order of the draws matters, and with a stream per image.
TEST_F(MaskRCNNTest, OneReadForBothHeadsDrawsWhatEachHeadsOwnReadDraws) {
  for (const SamplingStreams mode : {SamplingStreams::kShared, SamplingStreams::kPerImage}) {
    SCOPED_TRACE(mode == SamplingStreams::kShared ? "shared stream" : "a stream per image");
    ModelOptions o = tiny_options();
    o.mask_padding = false;  // the features below are the backbone's and FPN's without masks
    o.sampling_streams = mode;
    MaskRCNN m(o, at::make_generator<at::CPUGeneratorImpl>(21));
    const Batch b = make_batch({synthetic_image(96, 128, 3, 41), synthetic_image(80, 100, 2, 42)}, {1, 2});
    const TrainOutput joint = train(m, b, 9);

    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
    const std::vector<ImageTargets> targets = slice_targets(b, m->device(), m->dtype());
    SampleStreams streams(mode, gen, image_keys(b));
    const std::vector<at::Tensor> feats = m->fpn->forward(m->backbone->forward(b.images, nullptr));
    const ops::Proposals proposals =
        m->rpn->propose(feats, b.image_sizes, m->rpn->head_maps(feats), ProposalCounts::kTraining);
    const StageLosses rpn = m->rpn->forward_train(feats, targets, streams);
    const StageLosses heads = m->roi_heads->forward_train(feats, proposals, targets, streams);
    std::map<std::string, at::Tensor> separate = rpn.losses;
    separate.insert(heads.losses.begin(), heads.losses.end());
    ASSERT_EQ(joint.losses.size(), 5u);
    for (const char* name : kLossNames) EXPECT_TRUE(at::equal(joint.losses.at(name), separate.at(name))) << name;
    EXPECT_TRUE(at::equal(joint.rpn.sampled, rpn.counts.sampled));
    EXPECT_TRUE(at::equal(joint.rpn.positive, rpn.counts.positive));
    EXPECT_TRUE(at::equal(joint.roi.sampled, heads.counts.sampled));
    EXPECT_TRUE(at::equal(joint.roi.positive, heads.counts.positive));
  }
}

// The RPN labels its anchors before the front runs, from stand-ins of the levels' sizes: they equal
// the pyramid's at every size, a multiple of 32 or not (the fallback that relabels from the real
// levels is then never taken), and allocate nothing.
TEST_F(MaskRCNNTest, LevelShapesAreThePyramidsSizes) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(5));
  c10::NoGradGuard no_grad;
  for (const auto& [h, w] : std::vector<std::pair<int64_t, int64_t>>{{96, 128}, {97, 131}, {64, 64}, {65, 33}, {200, 333}}) {
    SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w));
    Batch b;
    b.images = at::rand({2, 3, h, w});
    const std::vector<at::Tensor> shapes = m->level_shapes(b);
    const std::vector<at::Tensor> feats = m->fpn->forward(m->backbone->forward(b.images, nullptr));
    ASSERT_EQ(shapes.size(), feats.size());
    for (size_t l = 0; l < feats.size(); ++l) {
      EXPECT_EQ(shapes[l].sizes(), (std::vector<int64_t>{2, 0, feats[l].size(2), feats[l].size(3)})) << l;
      EXPECT_EQ(shapes[l].scalar_type(), feats[l].scalar_type());
    }
  }
}

// MaskHeadOptions::roi_bucket pads the mask head's RoIs by repeating them (here past twice their
// count, so the repetition wraps) and drops the padding's logits: the losses and detections are
// the unpadded head's (the other heads' bit for bit), the gradients too up to rounding.
TEST_F(MaskRCNNTest, MaskRoIBucketPadsTheMaskHeadAndChangesNoResult) {
  const Batch b = make_batch({synthetic_image(96, 128, 3, 51), synthetic_image(80, 100, 2, 52)}, {1, 2});
  MaskRCNN plain(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(31));
  const TrainOutput probe = train(plain, b, 7);
  const int64_t positives = probe.roi.positive.item<int64_t>();
  ASSERT_GT(positives, 0);
  ModelOptions o = tiny_options();
  o.mask_head.roi_bucket = static_cast<int>(2 * positives + 5);
  MaskRCNN bucketed(o, at::make_generator<at::CPUGeneratorImpl>(31));
  const auto [a, ga] = train_with_grads(plain, b, 7);
  const auto [p, gp] = train_with_grads(bucketed, b, 7);
  EXPECT_EQ(p.roi.positive.item<int64_t>(), positives);
  for (const char* name : kLossNames) {
    if (std::string(name) == "loss_mask") {
      EXPECT_NEAR(value(a.losses.at(name)), value(p.losses.at(name)), 1e-6 * value(a.losses.at(name)));
    } else {
      EXPECT_TRUE(at::equal(a.losses.at(name), p.losses.at(name))) << name;
    }
  }
  ASSERT_EQ(ga.size(), gp.size());
  for (const auto& [name, g] : ga) {
    const double scale = std::max(1e-6, g.abs().max().item<double>());
    EXPECT_LE((g - gp.at(name)).abs().max().item<double>(), 1e-4 * scale) << name;
  }
  const auto da = plain->inference(b), dp = bucketed->inference(b);
  ASSERT_EQ(da.size(), dp.size());
  EXPECT_GT(da[0].size() + da[1].size(), 0);
  for (size_t i = 0; i < da.size(); ++i) expect_same_detections(da[i], dp[i]);
}

TEST_F(MaskRCNNTest, PaddingChangesNoLossAndNoDetection) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(5));
  const auto img = synthetic_image(100, 110, 3, 7);
  const Batch tight = make_batch({img}, {42});
  const Batch padded = make_batch({img}, {42}, {192, 256}, 7);
  ASSERT_EQ(tight.images.size(2), 128);
  ASSERT_EQ(padded.images.size(3), 256);
  const TrainOutput a = train(m, tight, 11), b = train(m, padded, 11);
  for (const char* name : kLossNames)
    EXPECT_NEAR(value(a.losses.at(name)), value(b.losses.at(name)),
                1e-5 * std::max(1.0, std::abs(value(a.losses.at(name)))))
        << name;
  for (const auto& [name, c] : a.counts()) EXPECT_TRUE(at::equal(c, b.counts().at(name))) << name;

  const auto da = m->inference(tight), db = m->inference(padded);
  ASSERT_EQ(da.size(), 1u);
  EXPECT_GT(da[0].size(), 0);
  expect_same_detections(da[0], db[0]);
}

// A batch of two differently sized images gives each image's detections as if it were alone,
// and losses that are the count-weighted means of the images' own losses.
TEST_F(MaskRCNNTest, BatchingChangesNoImagesResult) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(6));
  const auto small = synthetic_image(70, 90, 2, 8);
  const auto large = synthetic_image(120, 150, 4, 9);
  const Batch both = make_batch({small, large}, {100, 200});
  const Batch only_small = make_batch({small}, {100});
  const Batch only_large = make_batch({large}, {200});
  const auto d_both = m->inference(both);
  expect_same_detections(d_both[0], m->inference(only_small)[0]);
  expect_same_detections(d_both[1], m->inference(only_large)[0]);

  const TrainOutput t = train(m, both, 13), s = train(m, only_small, 13), l = train(m, only_large, 13);
  auto n = [](const TrainOutput& o, const char* c) { return static_cast<double>(o.counts().at(c).item<int64_t>()); };
  const std::pair<const char*, const char*> weights[] = {
      {"loss_objectness", "rpn_sampled"}, {"loss_rpn_box_reg", "rpn_sampled"},
      {"loss_classifier", "roi_sampled"}, {"loss_box_reg", "roi_sampled"},
      {"loss_mask", "roi_positive"}};
  for (const auto& [loss, count] : weights) {
    const double expected = (n(s, count) * value(s.losses.at(loss)) + n(l, count) * value(l.losses.at(loss))) /
                            (n(s, count) + n(l, count));
    EXPECT_NEAR(value(t.losses.at(loss)), expected, 1e-5 * std::max(1.0, std::abs(expected))) << loss;
    EXPECT_EQ(n(t, count), n(s, count) + n(l, count)) << count;
  }
}

TEST_F(MaskRCNNTest, DetectionsAreInOriginalCoordinatesWithPastedMasks) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(7));
  Batch b = make_batch({synthetic_image(96, 128, 3, 10)}, {3});
  const auto same = m->inference(b);
  b.original_sizes = at::tensor({192, 320}, at::kLong).view({1, 2});  // x2 high, x2.5 wide
  const auto scaled = m->inference(b);
  ASSERT_EQ(same.size(), 1u);
  ASSERT_GT(same[0].size(), 0);
  const Detections& d = scaled[0];
  EXPECT_EQ(d.image_id, 3);
  ASSERT_EQ(d.size(), same[0].size());
  EXPECT_TRUE(at::allclose(d.boxes, same[0].boxes * at::tensor({2.5f, 2.0f, 2.5f, 2.0f}), 1e-5, 1e-4));
  EXPECT_EQ(d.masks.scalar_type(), at::kByte);
  EXPECT_EQ(d.masks.sizes(), (std::vector<int64_t>{d.size(), 192, 320}));
  EXPECT_TRUE(d.masks.le(1).all().item<bool>());
  EXPECT_EQ(same[0].masks.sizes(), (std::vector<int64_t>{d.size(), 96, 128}));
  // Sorted by decreasing score, at most detections_per_image, scores above the threshold.
  EXPECT_LE(d.size(), tiny_options().box_head.detections_per_image);
  EXPECT_TRUE(d.scores.gt(0.05).all().item<bool>());
  EXPECT_TRUE(d.labels.ge(1).all().item<bool>());
  EXPECT_TRUE(d.labels.lt(tiny_options().num_classes).all().item<bool>());
  // Boxes inside the original image.
  EXPECT_TRUE(d.boxes.select(1, 2).le(320).all().item<bool>());
  EXPECT_TRUE(d.boxes.select(1, 3).le(192).all().item<bool>());
  EXPECT_TRUE(d.boxes.ge(0).all().item<bool>());

  // Nothing above a threshold of 1: no detections, empty masks of the right shape.
  ModelOptions strict = tiny_options();
  strict.box_head.score_threshold = 1.0;
  MaskRCNN none(strict, at::make_generator<at::CPUGeneratorImpl>(7));
  const auto empty = none->inference(b);
  EXPECT_EQ(empty[0].size(), 0);
  EXPECT_EQ(empty[0].masks.sizes(), (std::vector<int64_t>{0, 192, 320}));
}

TEST_F(MaskRCNNTest, ChannelsLastComputesTheSameNetwork) {
  ModelOptions cl = tiny_options();
  cl.channels_last = true;
  MaskRCNN a(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(8));
  MaskRCNN b(cl, at::make_generator<at::CPUGeneratorImpl>(8));
  const Batch batch = make_batch({synthetic_image(96, 128, 3, 11), synthetic_image(64, 64, 1, 12)}, {1, 2});
  const TrainOutput la = train(a, batch, 5), lb = train(b, batch, 5);
  for (const char* name : kLossNames)
    EXPECT_NEAR(value(la.losses.at(name)), value(lb.losses.at(name)),
                1e-4 * std::max(1.0, std::abs(value(la.losses.at(name)))))
        << name;
  const auto da = a->inference(batch), db = b->inference(batch);
  for (size_t i = 0; i < da.size(); ++i) expect_same_detections(da[i], db[i]);
}

TEST_F(MaskRCNNTest, MixedPrecisionKeepsFloat32LossesAndTrains) {
  ModelOptions o = tiny_options();
  o.precision = Precision::kBFloat16;
  o.channels_last = true;
  EXPECT_THROW(o.validate(), std::invalid_argument);  // 8 channels: see ModelOptions::validate
  o.backbone.base_channels = 16;
  MaskRCNN m(o, at::make_generator<at::CPUGeneratorImpl>(9));
  const Batch b = make_batch({synthetic_image(96, 128, 3, 13)}, {1});
  const TrainOutput out = train(m, b, 1);
  for (const char* name : kLossNames) {
    EXPECT_EQ(out.losses.at(name).scalar_type(), at::kFloat) << name;
    EXPECT_TRUE(std::isfinite(value(out.losses.at(name)))) << name;
  }
  total_loss(out.losses).backward();
  for (const auto& p : m->named_parameters())
    if (p.value().requires_grad()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_EQ(p.value().grad().scalar_type(), at::kFloat) << p.key();
    }
  const auto d = m->inference(b);
  EXPECT_EQ(d[0].boxes.scalar_type(), at::kFloat);
  EXPECT_EQ(d[0].scores.scalar_type(), at::kFloat);
}

TEST_F(MaskRCNNTest, ImagesWithoutGroundTruthTrain) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(10));
  const Batch b = make_batch({synthetic_image(96, 96, 0, 14), synthetic_image(96, 96, 2, 15)}, {1, 2});
  const TrainOutput out = train(m, b, 2);
  for (const char* name : kLossNames) EXPECT_TRUE(std::isfinite(value(out.losses.at(name)))) << name;
  const Batch none = make_batch({synthetic_image(64, 64, 0, 16)}, {3});
  const TrainOutput out2 = train(m, none, 2);
  EXPECT_EQ(out2.counts().at("roi_positive").item<int64_t>(), 0);
  EXPECT_EQ(value(out2.losses.at("loss_mask")), 0.0);
  EXPECT_EQ(value(out2.losses.at("loss_rpn_box_reg")), 0.0);
  total_loss(out2.losses).backward();  // a graph with zero gradients, not an error
}

TEST_F(MaskRCNNTest, MalformedBatchesAreClearErrors) {
  MaskRCNN m(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(11));
  const Batch good = make_batch({synthetic_image(64, 64, 2, 17)}, {1});
  auto error_of = [&](const Batch& b) -> std::string {
    try {
      train(m, b, 1);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  Batch b = good;
  b.images = at::zeros({1, 3, 60, 64});
  EXPECT_NE(error_of(b).find("Batch.images: expected a padded size that is a multiple of 32"), std::string::npos) << error_of(b);
  b = good;
  b.gt_labels = good.gt_labels.clone();
  b.gt_labels[0][0] = 4;
  EXPECT_NE(error_of(b).find("Batch.gt_labels[0][0]: expected a label in 1..3, got 4"), std::string::npos) << error_of(b);
  b = good;
  b.gt_counts = at::tensor({3}, at::kLong);
  EXPECT_NE(error_of(b).find("Batch.gt_counts[0]"), std::string::npos) << error_of(b);
  b = good;
  b.gt_boxes = good.gt_boxes.clone();
  b.gt_boxes[0][1][2] = b.gt_boxes[0][1][0];
  EXPECT_NE(error_of(b).find("Batch.gt_boxes[0][1]: expected a finite box"), std::string::npos) << error_of(b);
  b = good;
  b.image_sizes = at::tensor({65, 64}, at::kLong).view({1, 2});
  EXPECT_NE(error_of(b).find("Batch.image_sizes[0]"), std::string::npos) << error_of(b);
  b = good;
  b.gt_polygons.clear();
  EXPECT_NE(error_of(b).find("Batch.gt_polygons"), std::string::npos) << error_of(b);
  b = good;
  b.gt_polygons[0] = PolygonList::empty();
  EXPECT_NE(error_of(b).find("Batch.gt_polygons[0]: expected gt_counts[0] = 2 instances, got 0"),
            std::string::npos)
      << error_of(b);
  EXPECT_EQ(error_of(good), "no error");
}

// The network on a GPU against the same network on the CPU: one training step's losses and
// gradients, then inference. The sampled anchors and RoIs come from host generators, so both
// devices train on the same samples; the values differ by the kernels' rounding only.
TEST_F(MaskRCNNTest, CudaTrainingStepAndInferenceMatchTheCpu) {
#ifndef MRCNN_HAVE_CUDA
  GTEST_SKIP() << "built without the project's CUDA kernels";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here: the model's CUDA test is skipped";
  const at::Device gpu(at::kCUDA, 0);
  // float32 as float32, as the harness runs it: TF32 convolutions (LibTorch's default on Ampere and
  // newer) put the gradients 0.1-1 % of their range from the CPU's (seen on an H200).
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  MaskRCNN cpu(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(21));
  MaskRCNN dev(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(21));
  dev->to(gpu);
  const Batch b = make_batch({synthetic_image(96, 128, 3, 31), synthetic_image(80, 100, 2, 32)}, {1, 2});
  Batch bg = b;
  bg.images = b.images.to(gpu);
  bg.image_sizes = b.image_sizes.to(gpu);
  bg.gt_boxes = b.gt_boxes.to(gpu);
  bg.gt_labels = b.gt_labels.to(gpu);
  bg.gt_counts = b.gt_counts.to(gpu);
  bg.original_sizes = b.original_sizes.to(gpu);
  const TrainOutput lc = train(cpu, b, 9), lg = train(dev, bg, 9);
  for (const char* name : kLossNames) {
    const double c = value(lc.losses.at(name)), g = value(lg.losses.at(name));
    EXPECT_NEAR(g, c, 1e-3 * std::max(1.0, std::abs(c))) << name;
  }
  total_loss(lc.losses).backward();
  total_loss(lg.losses).backward();
  const auto pc = cpu->named_parameters(), pg = dev->named_parameters();
  for (const auto& item : pc) {
    const at::Tensor& gc = item.value().grad();
    if (!gc.defined()) continue;
    const at::Tensor gg = pg[item.key()].grad().cpu();
    const double scale = std::max(1e-3, gc.abs().max().item<double>());
    EXPECT_LE((gg - gc).abs().max().item<double>(), 1e-2 * scale) << item.key();
  }
  cpu->eval();
  dev->eval();
  const auto dc = cpu->inference(b), dg = dev->inference(bg);
  ASSERT_EQ(dc.size(), dg.size());
  for (size_t i = 0; i < dc.size(); ++i) {
    Detections host = dg[i];
    host.boxes = host.boxes.cpu();
    host.scores = host.scores.cpu();
    host.labels = host.labels.cpu();
    if (host.masks.defined()) host.masks = host.masks.cpu();
    expect_same_detections(host, dc[i], 1e-2);
  }
  // Ground truth on the GPU is checked there: an inverted box is reported in the fault word
  // (read by the trainer with the step's losses), not by a read of the boxes.
  ops::take_device_faults(gpu);
  bg.gt_boxes[0][0][2] = -1.f;
  dev->train();
  train(dev, bg, 9);
  EXPECT_NE(ops::take_device_faults(gpu) & ops::kFaultBatchTargets, 0);
  EXPECT_THROW(train(cpu, [&] {
                 Batch bad = b;
                 bad.gt_boxes = b.gt_boxes.clone();
                 bad.gt_boxes[0][0][2] = -1.f;
                 return bad;
               }(), 9),
               std::invalid_argument);  // the CPU names the row
#endif
}

// The loss heads on streams of their own (ModelOptions::head_streams, head_streams.h) run the same
// kernels on the same samples: the step's losses and counts are the one-stream step's bit for bit,
// and its gradients too where the one-stream step repeats itself bit for bit (deterministic
// kernels). On a CPU the option changes nothing; on a GPU the streams are real.
TEST_F(MaskRCNNTest, HeadStreamsOnCudaGiveTheOneStreamStep) {
  const bool cuda = torch::cuda::is_available();
  const at::Device device = cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  if (cuda) {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setBenchmarkCuDNN(false);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  }
  ModelOptions with = tiny_options();
  with.head_streams = true;
  MaskRCNN one(tiny_options(), at::make_generator<at::CPUGeneratorImpl>(23));
  MaskRCNN three(with, at::make_generator<at::CPUGeneratorImpl>(23));
  one->to(device);
  three->to(device);
  Batch b = make_batch({synthetic_image(96, 128, 3, 41), synthetic_image(80, 100, 2, 42)}, {1, 2});
  for (at::Tensor* t : {&b.images, &b.image_sizes, &b.gt_boxes, &b.gt_labels, &b.gt_counts, &b.original_sizes})
    *t = t->to(device);
  const auto [a, ga] = train_with_grads(one, b, 9);
  const auto [a2, ga2] = train_with_grads(one, b, 9);
  const auto [h, gh] = train_with_grads(three, b, 9);
  for (const char* name : kLossNames)
    EXPECT_TRUE(at::equal(a.losses.at(name).cpu(), h.losses.at(name).cpu())) << name;
  for (const auto& [x, y] : {std::pair{a.rpn, h.rpn}, std::pair{a.roi, h.roi}}) {
    EXPECT_TRUE(at::equal(x.sampled.cpu(), y.sampled.cpu()));
    EXPECT_TRUE(at::equal(x.positive.cpu(), y.positive.cpu()));
  }
  ASSERT_EQ(ga.size(), gh.size());
  bool repeatable = true;
  for (const auto& [name, g] : ga) repeatable = repeatable && at::equal(g, ga2.at(name));
  for (const auto& [name, g] : ga) {
    if (repeatable) {
      EXPECT_TRUE(at::equal(g, gh.at(name))) << name;
    } else {  // kernels with atomics: within what the one-stream step varies by itself
      const double spread = (g - ga2.at(name)).abs().max().item<double>();
      const double scale = std::max(1e-6, g.abs().max().item<double>());
      EXPECT_LE((g - gh.at(name)).abs().max().item<double>(), std::max(4 * spread, 1e-5 * scale)) << name;
    }
  }
  if (cuda) at::globalContext().setDeterministicAlgorithms(false, false);
}

}  // namespace
}  // namespace mrcnn::model
