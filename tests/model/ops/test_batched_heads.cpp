// The batch-wide forms the heads use (box_iou_batched, Matcher::batched, the sampler's
// prepare_batch and draw_batch) against the per-image ops they replace: equal bit for bit, image by
// image, with the batch's padding in between (images without ground truth, ties, short label sets).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/ops/box/boxes.h"
#include "model/ops/box/matcher.h"
#include "model/ops/box/sampler.h"

namespace {

using mrcnn::ops::BalancedPositiveNegativeSampler;
using mrcnn::ops::Matcher;

// k boxes inside 200x200, duplicates among them (ties for the matcher).
at::Tensor random_boxes(int64_t k) {
  const at::Tensor xy = at::rand({k, 2}) * 150;
  const at::Tensor wh = at::rand({k, 2}) * 60 + 1;
  at::Tensor b = at::cat({xy, xy + wh}, 1);
  if (k > 2) b[k - 1].copy_(b[0]);
  return b;
}

// Image i's ground truth padded to g rows of zeros (the batch's padding).
at::Tensor padded(const std::vector<at::Tensor>& per_image, int64_t g) {
  std::vector<at::Tensor> rows;
  for (const at::Tensor& t : per_image)
    rows.push_back(at::cat({t, at::zeros({g - t.size(0), 4}, t.options())}).unsqueeze(0));
  return at::cat(rows);
}

TEST(BatchedHeads, BoxIouAndMatcherEqualThePerImageOps) {
  at::manual_seed(3);
  const std::vector<int64_t> gt_counts = {4, 0, 7, 1};
  const int64_t g = 7, p = 60;
  std::vector<at::Tensor> gt, candidates;
  for (const int64_t c : gt_counts) {
    gt.push_back(random_boxes(c));
    // Candidates near the ground truth (and copies of it: IoU 1, ties between duplicates).
    candidates.push_back(at::cat({random_boxes(p - c), gt.back()}));
  }
  const at::Tensor gt_batch = padded(gt, g), cand_batch = at::stack(candidates);
  const at::Tensor counts = at::tensor(gt_counts, at::kLong);
  const at::Tensor iou = mrcnn::ops::box_iou_batched(gt_batch, cand_batch);
  ASSERT_EQ(iou.sizes(), (at::IntArrayRef{4, g, p}));
  for (const bool low_quality : {false, true}) {
    const Matcher matcher(0.5, 0.3, low_quality);
    const at::Tensor batched = matcher.batched(iou, counts);
    for (size_t i = 0; i < gt_counts.size(); ++i) {
      SCOPED_TRACE("image " + std::to_string(i) + (low_quality ? ", low-quality matches" : ""));
      const at::Tensor own = mrcnn::ops::box_iou(gt[i], candidates[i]);
      EXPECT_TRUE(at::equal(iou[static_cast<int64_t>(i)].slice(0, 0, gt_counts[i]), own));
      EXPECT_TRUE(at::equal(batched[static_cast<int64_t>(i)], matcher(own)));
    }
    // The image without ground truth is background, as the per-image matcher says.
    EXPECT_TRUE(batched[1].eq(Matcher::kBelowLowThreshold).all().item<bool>());
  }
  // A batch without any ground truth, and a count that does not fit the batch.
  const Matcher matcher(0.7, 0.3, true);
  const at::Tensor none = matcher.batched(at::empty({2, 0, 5}), at::zeros({2}, at::kLong));
  EXPECT_TRUE(at::equal(none, at::full({2, 5}, Matcher::kBelowLowThreshold, at::kLong)));
  EXPECT_THROW(matcher.batched(iou, at::zeros({3}, at::kLong)), c10::Error);
  EXPECT_THROW(mrcnn::ops::box_iou_batched(gt_batch, cand_batch.slice(0, 0, 2)), c10::Error);
}

// Labels of a batch with padding (-1) where an image's set is shorter than the batch's width.
at::Tensor batch_labels() {
  at::manual_seed(17);
  at::Tensor labels = at::randint(-1, 3, {5, 3000}, at::kLong);
  labels[1].fill_(-1);                    // nothing to draw
  labels[2].slice(0, 40).fill_(-1);       // a short set: fewer than the draw takes
  labels[3].clamp_max_(0);                // no positives
  labels[4].slice(0, 0, 2900).fill_(-1);  // padding before the candidates
  return labels;
}

TEST(BatchedHeads, PrepareAndDrawOfABatchAreEachImagesDrawWithItsOffset) {
  const BalancedPositiveNegativeSampler sampler(64, 0.25);
  const at::Tensor labels = batch_labels();
  const int64_t width = labels.size(1);
  const auto pending = sampler.prepare_batch(labels);
  const auto per_image = sampler.prepare(labels.unbind(0));
  EXPECT_TRUE(at::equal(pending.counts, per_image.counts));
  const at::Tensor counts = BalancedPositiveNegativeSampler::read_counts({&pending}).front();
  for (const bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "one generator for the batch" : "a generator per image");
    std::vector<at::Generator> mine, theirs;
    for (int i = 0; i < 5; ++i) {
      mine.push_back(at::make_generator<at::CPUGeneratorImpl>(shared ? 5 : 100 + i));
      theirs.push_back(at::make_generator<at::CPUGeneratorImpl>(shared ? 5 : 100 + i));
    }
    std::vector<at::Generator*> g_mine, g_theirs;
    for (size_t i = 0; i < 5; ++i) {
      g_mine.push_back(&mine[shared ? 0 : i]);
      g_theirs.push_back(&theirs[shared ? 0 : i]);
    }
    const auto batch = sampler.draw_batch(pending, counts, g_mine);
    const auto draws = sampler.draw(per_image, counts, g_theirs);
    std::vector<at::Tensor> pos, neg;
    std::vector<int64_t> num_pos, num_neg;
    for (int64_t i = 0; i < 5; ++i) {
      pos.push_back(draws[static_cast<size_t>(i)].first + i * width);
      neg.push_back(draws[static_cast<size_t>(i)].second + i * width);
      num_pos.push_back(draws[static_cast<size_t>(i)].first.size(0));
      num_neg.push_back(draws[static_cast<size_t>(i)].second.size(0));
    }
    EXPECT_TRUE(at::equal(batch.positive, at::cat(pos)));
    EXPECT_TRUE(at::equal(batch.negative, at::cat(neg)));
    EXPECT_EQ(batch.num_positive, num_pos);
    EXPECT_EQ(batch.num_negative, num_neg);
    // Both leave the generators in the same state.
    EXPECT_EQ(at::check_generator<at::CPUGeneratorImpl>(*g_mine[4])->random(),
              at::check_generator<at::CPUGeneratorImpl>(*g_theirs[4])->random());
  }
  // A per-image pending draw goes image by image, at the offsets of the label sets' lengths.
  std::vector<at::Tensor> sets = {labels[0].slice(0, 0, 100), labels[2].slice(0, 0, 50)};
  const auto ragged = sampler.prepare(sets);
  const at::Tensor ragged_counts = BalancedPositiveNegativeSampler::read_counts({&ragged}).front();
  at::Generator g1 = at::make_generator<at::CPUGeneratorImpl>(9), g2 = at::make_generator<at::CPUGeneratorImpl>(9);
  const auto batch = sampler.draw_batch(ragged, ragged_counts, {&g1, &g1});
  const auto draws = sampler.draw(ragged, ragged_counts, {&g2, &g2});
  EXPECT_TRUE(at::equal(batch.positive, at::cat({draws[0].first, draws[1].first + 100})));
  EXPECT_TRUE(at::equal(batch.negative, at::cat({draws[0].second, draws[1].second + 100})));
}

}  // namespace
