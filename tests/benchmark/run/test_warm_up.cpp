// The warm-up before run_start (run/warm_up.h): its plan, and that it trains nothing: a network
// warmed up trains bit for bit as one that was not, with the graphs of the warmed shapes captured
// before the first step (on the CPU through the graphs' rehearsal, FeatureGraphs::Replay::kRerun).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <vector>

#include "benchmark/run/warm_up.h"
#include "model/mask_rcnn.h"
#include "model/stage_losses.h"
#include "tests/model/tiny.h"

namespace mrcnn::run {
namespace {

TEST(WarmUp, ThePlanCoversEveryMaskHeadBucketAStepCanMeet) {
  model::ModelOptions o;  // the reference: 512 RoIs an image, a quarter of them positive at most
  o.mask_head.roi_bucket = 64;
  const WarmUpPlan plan = warm_up_plan({{800, 1344}, {1344, 800}}, 12, o);
  EXPECT_EQ(plan.images, 12);
  EXPECT_EQ(plan.shapes.size(), 2u);
  ASSERT_EQ(plan.mask_head_rois.size(), 24u);  // 64, 128, ... 1536 = 12 * 512 / 4
  EXPECT_EQ(plan.mask_head_rois.front(), 64);
  EXPECT_EQ(plan.mask_head_rois.back(), 1536);
  o.mask_head.roi_bucket = 100;  // 1536 is not a multiple: the bucket that holds it, 1600, is the last
  EXPECT_EQ(warm_up_plan({{800, 1344}}, 12, o).mask_head_rois.back(), 1600);
  o.mask_head.roi_bucket = 0;  // no bucket: every count from 1 would be too many to warm
  EXPECT_TRUE(warm_up_plan({{800, 1344}}, 12, o).mask_head_rois.empty());
  EXPECT_THROW(warm_up_plan({{800, 1344}}, 0, o), std::invalid_argument);
}

TEST(WarmUp, TheSyntheticBatchFillsItsShapeWithGroundTruthInside) {
  const model::Batch b = warm_up_batch({96, 160}, 3, 4, 1);
  EXPECT_EQ(b.images.sizes(), (at::IntArrayRef{3, 3, 96, 160}));
  EXPECT_TRUE(at::equal(b.image_sizes, at::tensor({96, 160}, at::kLong).repeat({3, 1})));
  EXPECT_TRUE(at::equal(b.gt_counts, at::full({3}, 3, at::kLong)));
  EXPECT_LE(b.gt_boxes.select(2, 2).max().item<float>(), 160);
  EXPECT_LE(b.gt_boxes.select(2, 3).max().item<float>(), 96);
  EXPECT_GE(b.gt_labels.min().item<int64_t>(), 1);
  EXPECT_LE(b.gt_labels.max().item<int64_t>(), 3);
  ASSERT_EQ(b.gt_polygons.size(), 3u);
  EXPECT_TRUE(at::equal(warm_up_batch({96, 160}, 3, 4, 1).images, b.images));  // from its seed alone
}

model::MaskRCNN tiny_network() {
  model::ModelOptions o = model::testing::tiny_options();
  o.mask_head.roi_bucket = 8;
  return model::MaskRCNN(o, at::make_generator<at::CPUGeneratorImpl>(7));
}

// Two training steps with a plain SGD update, as the trainer's optimizer makes them; the losses.
std::vector<at::Tensor> train_two_steps(model::MaskRCNN& net) {
  std::vector<at::Tensor> losses;
  const model::Batch a = model::testing::make_batch(
      {model::testing::synthetic_image(96, 128, 3, 1), model::testing::synthetic_image(64, 128, 2, 2)}, {1, 2});
  const model::Batch b = model::testing::make_batch(
      {model::testing::synthetic_image(128, 96, 2, 3), model::testing::synthetic_image(128, 64, 2, 4)}, {3, 4});
  uint64_t seed = 30;
  for (const model::Batch* batch : {&a, &b}) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed++);
    const at::Tensor loss = model::total_loss(net->forward_train(*batch, gen).losses);
    loss.backward();
    losses.push_back(loss.detach());
    const c10::NoGradGuard no_grad;
    for (at::Tensor& p : net->parameters())
      if (p.grad().defined()) {
        p.add_(p.grad(), -0.05);
        p.mutable_grad() = at::Tensor();
      }
  }
  return losses;
}

TEST(WarmUp, AWarmedNetworkTrainsBitForBitAsAColdOne) {
  model::MaskRCNN cold = tiny_network(), warm = tiny_network();
  cold->use_feature_graphs(3, model::FeatureGraphs::Replay::kRerun);
  warm->use_feature_graphs(3, model::FeatureGraphs::Replay::kRerun);
  std::vector<at::Tensor> before;
  for (const at::Tensor& p : warm->parameters()) before.push_back(p.detach().clone());

  // The two shapes the training batches pad to (96x128, 128x96).
  const WarmUpPlan plan = warm_up_plan({{96, 128}, {128, 96}}, 2, warm->options());
  ASSERT_FALSE(plan.mask_head_rois.empty());
  const WarmUpReport r = warm_up(warm, plan, at::Device(at::kCPU));
  EXPECT_EQ(r.batches, 4);
  EXPECT_EQ(r.mask_head_sizes, static_cast<int64_t>(plan.mask_head_rois.size()));
  EXPECT_EQ(r.graphs_captured, 2);
  EXPECT_GT(r.seconds, 0);
  size_t i = 0;
  for (const at::Tensor& p : warm->parameters()) {
    EXPECT_FALSE(p.grad().defined());
    EXPECT_TRUE(at::equal(p, before[i++]));
  }

  const std::vector<at::Tensor> lc = train_two_steps(cold), lw = train_two_steps(warm);
  for (size_t k = 0; k < lc.size(); ++k) EXPECT_TRUE(at::equal(lc[k], lw[k])) << "step " << k;
  const auto pc = cold->named_parameters(), pw = warm->named_parameters();
  for (const auto& item : pc) EXPECT_TRUE(at::equal(item.value(), pw[item.key()])) << item.key();
  // The warmed network met both shapes' graphs ready: nothing captured on the clock, where the
  // cold one captured both.
  EXPECT_EQ(warm->feature_graphs()->stats().captured, 2);
  EXPECT_EQ(cold->feature_graphs()->stats().captured, 2);
  EXPECT_EQ(warm->feature_graphs()->stats().replayed, 4 + 2);
  EXPECT_EQ(warm->feature_graphs()->stats().invalidated, 0);
}

}  // namespace
}  // namespace mrcnn::run
