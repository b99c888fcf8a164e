// The RPN's losses evaluate its head at the sampled anchors in two ways: level by level (which
// reads each level's number of samples from the device) and in one product over every level's
// gathered patches (no read; the default on GPUs). They must give the same losses and the same
// gradients to the head's weights and to every pyramid level, up to the order of float sums.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/ops/box/matcher.h"
#include "model/rpn.h"

namespace mrcnn::model {
namespace {

struct Result {
  at::Tensor objectness, box_reg, num_sampled;
  std::vector<at::Tensor> feature_grads, weight_grads;
};

// Two images of 128x160 (P2..P6: 32x40 down to 2x3 cells) with `channels` random features, three
// boxes of 24 to 120 pixels each, one training step of the RPN's losses with `gather`.
Result step(RPN& rpn, RPNImpl::LossGather gather, bool channels_last) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  std::vector<at::Tensor> features;
  for (int64_t s : {4, 8, 16, 32, 64}) {
    at::Tensor f = at::randn({2, 4, (128 + s - 1) / s, (160 + s - 1) / s}, gen);
    if (channels_last) f = f.contiguous(at::MemoryFormat::ChannelsLast);
    features.push_back(f.requires_grad_());
  }
  std::vector<ImageTargets> targets(2);
  targets[0].boxes = at::tensor({10.f, 12.f, 34.f, 40.f, 40.f, 20.f, 150.f, 120.f, 70.f, 60.f, 130.f, 110.f}).view({3, 4});
  targets[1].boxes = at::tensor({0.f, 0.f, 60.f, 64.f, 90.f, 8.f, 158.f, 70.f, 20.f, 80.f, 44.f, 126.f}).view({3, 4});
  for (ImageTargets& t : targets) {
    t.labels = at::ones({3}, at::kLong);
    t.height = 128;
    t.width = 160;
  }
  at::Generator step_gen = at::make_generator<at::CPUGeneratorImpl>(11);
  SampleStreams streams(SamplingStreams::kShared, step_gen, {0, 1});
  rpn->zero_grad();
  rpn->set_loss_gather(gather);
  const StageLosses out = rpn->forward_train(features, targets, streams);
  Result r{out.losses.at("loss_objectness"), out.losses.at("loss_rpn_box_reg"), out.counts.sampled, {}, {}};
  (r.objectness + 3 * r.box_reg).backward();
  for (const at::Tensor& f : features) r.feature_grads.push_back(f.grad());
  for (const at::Tensor& p : rpn->parameters()) r.weight_grads.push_back(p.grad());
  return r;
}

// b undefined: a level without samples gets no gradient level by level; a must then be zeros.
void expect_close(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  if (!b.defined()) {
    EXPECT_EQ(a.abs().max().item<double>(), 0.0) << what << ": no samples, yet a gradient";
    return;
  }
  const double scale = std::max(1e-6, b.abs().max().item<double>());
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5 * scale) << what;
}

TEST(RpnLosses, OneProductOverAllLevelsEqualsTheLevelByLevelProducts) {
  // 64 samples per image leave some levels without any; 100000 take every labelled anchor, so
  // each level has positives and negatives.
  for (const int64_t per_image : {64, 100000}) {
    for (const bool channels_last : {false, true}) {
      SCOPED_TRACE("batch_size_per_image " + std::to_string(per_image) +
                   (channels_last ? ", channels-last maps" : ", contiguous maps"));
      RPNOptions o;
      o.batch_size_per_image = per_image;
      o.straddle_threshold = -1;  // every anchor may be sampled, the largest ones too
      o.fg_iou_threshold = 0.5;
      RPN rpn(o, 4);
      rpn->head->init_weights(at::make_generator<at::CPUGeneratorImpl>(3));
      const Result per_level = step(rpn, RPNImpl::LossGather::kPerLevel, channels_last);
      const Result all_levels = step(rpn, RPNImpl::LossGather::kAllLevels, channels_last);
      EXPECT_GT(per_level.num_sampled.item<int64_t>(), 0);
      EXPECT_TRUE(at::equal(per_level.num_sampled, all_levels.num_sampled));
      expect_close(all_levels.objectness, per_level.objectness, "loss_objectness");
      expect_close(all_levels.box_reg, per_level.box_reg, "loss_rpn_box_reg");
      EXPECT_GT(per_level.box_reg.item<double>(), 0.0) << "the sample has positives";
      ASSERT_EQ(all_levels.feature_grads.size(), 5u);
      for (size_t l = 0; l < 5; ++l) {
        expect_close(all_levels.feature_grads[l], per_level.feature_grads[l], "level " + std::to_string(l));
        EXPECT_EQ(all_levels.feature_grads[l].is_contiguous(at::MemoryFormat::ChannelsLast), channels_last);
      }
      // Every level's map gets a gradient where its anchors were sampled.
      if (per_image == 100000) {
        for (size_t l = 0; l < 5; ++l)
          EXPECT_GT(per_level.feature_grads[l].abs().sum().item<double>(), 0.0) << "level " << l;
      }
      ASSERT_EQ(all_levels.weight_grads.size(), per_level.weight_grads.size());
      for (size_t k = 0; k < per_level.weight_grads.size(); ++k)
        expect_close(all_levels.weight_grads[k], per_level.weight_grads[k], "parameter " + std::to_string(k));
      // On the CPU the default is the level by level path, bit for bit.
      const Result automatic = step(rpn, RPNImpl::LossGather::kAuto, channels_last);
      EXPECT_TRUE(at::equal(automatic.objectness, per_level.objectness));
      EXPECT_TRUE(at::equal(automatic.box_reg, per_level.box_reg));
    }
  }
}

// label() matches several images' anchors at once (their IoUs as one padded tensor) within its
// element budget: the same matches, labels and counts, bit for bit, as image by image (budget 0),
// whether the whole batch fits or chunks of 3 and 2 images do; images with no box, one, and many, with boxes
// that tie (a duplicated box) and that straddle the image.
TEST(RpnLosses, LabelsOfImagesMatchedTogetherAreTheirOwnLabels) {
  const std::vector<int64_t> boxes_per_image = {3, 0, 1, 7, 2};
  const int64_t n = static_cast<int64_t>(boxes_per_image.size());
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(17);
  std::vector<at::Tensor> features;
  for (int64_t s : {4, 8, 16, 32, 64}) features.push_back(at::empty({n, 0, (128 + s - 1) / s, (160 + s - 1) / s}));
  std::vector<ImageTargets> targets(boxes_per_image.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const int64_t g = boxes_per_image[i];
    const at::Tensor xy = at::rand({g, 2}, gen) * at::tensor({150.f, 118.f});
    const at::Tensor wh = at::rand({g, 2}, gen) * 100 + 4;
    targets[i].boxes = at::cat({xy, xy + wh}, 1);
    if (g == 7) targets[i].boxes[6].copy_(targets[i].boxes[5]);  // a tie
    targets[i].labels = at::ones({g}, at::kLong);
    targets[i].height = 128;
    targets[i].width = 160;
  }
  RPNOptions o;
  o.straddle_threshold = 0;
  RPN rpn(o, 4);
  rpn->set_iou_batch_elements(0);
  const RPNLabels alone = rpn->label(features, targets);
  const int64_t anchors = alone.anchors.size(0);
  ASSERT_GT(anchors, 1000);
  for (const int64_t budget : {int64_t{2} * 7 * anchors, int64_t{1} << 40}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    rpn->set_iou_batch_elements(budget);
    const RPNLabels together = rpn->label(features, targets);
    EXPECT_TRUE(at::equal(together.matches, alone.matches));
    EXPECT_TRUE(at::equal(together.draw.counts, alone.draw.counts));
    EXPECT_TRUE(at::equal(together.draw.positive_batch, alone.draw.positive_batch));
    EXPECT_TRUE(at::equal(together.draw.negative_batch, alone.draw.negative_batch));
  }
  EXPECT_TRUE((alone.matches[1] == ops::Matcher::kBelowLowThreshold).all().item<bool>()) << "no box: background";
  EXPECT_GT((alone.matches >= 0).sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace mrcnn::model
