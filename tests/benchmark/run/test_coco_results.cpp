// Detections -> COCO results: category ids through the label map, xywh boxes, RLE masks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "eval/rle.h"
#include "benchmark/run/coco_results.h"

namespace mrcnn::run {
using model::Detections;
namespace {

Detections two_detections() {
  Detections d;
  d.boxes = at::tensor({10.f, 20.f, 30.f, 60.f, 0.f, 0.f, 5.f, 5.f}).view({2, 4});
  d.scores = at::tensor({0.9f, 0.25f});
  d.labels = at::tensor({1, 3}, at::kLong);
  d.masks = at::zeros({2, 8, 6}, at::kByte);
  d.masks[0].slice(0, 2, 5).slice(1, 1, 3).fill_(1);
  d.image_id = 139;
  return d;
}

TEST(CocoResults, MapsLabelsBoxesAndMasks) {
  const std::vector<uint64_t> map = {0, 1, 2, 5};  // background, then categories 1, 2, 5
  const auto out = to_coco_detections(two_detections(), map);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].image_id, 139u);
  EXPECT_EQ(out[0].category_id, 1u);
  EXPECT_EQ(out[1].category_id, 5u);
  EXPECT_NEAR(out[0].score, 0.9, 1e-6);
  ASSERT_TRUE(out[0].has_bbox);
  EXPECT_EQ(out[0].bbox, (std::array<double, 4>{10, 20, 20, 40}));
  ASSERT_EQ(out[0].segmentation.kind, eval::Segmentation::Kind::kRle);
  const eval::Rle rle = eval::from_counts(out[0].segmentation.counts, 8, 6);
  EXPECT_EQ(eval::area(rle), 6u);
  std::vector<uint8_t> decoded(48);
  eval::decode_row_major(rle, decoded.data());
  EXPECT_EQ(decoded[2 * 6 + 1], 1);
  EXPECT_EQ(decoded[0], 0);
  EXPECT_EQ(eval::area(eval::from_counts(out[1].segmentation.counts, 8, 6)), 0u);
}

TEST(CocoResults, WithoutMasksOrDetections) {
  Detections d = two_detections();
  d.masks = at::Tensor();
  const auto out = to_coco_detections(d, {0, 1, 2, 5});
  EXPECT_EQ(out[1].segmentation.kind, eval::Segmentation::Kind::kNone);
  Detections none;
  none.boxes = at::zeros({0, 4});
  EXPECT_TRUE(to_coco_detections(none, {0, 1}).empty());
}

TEST(CocoResults, LabelsOutsideTheMapAreErrors) {
  try {
    to_coco_detections(two_detections(), {0, 1, 2});
    FAIL() << "label 3 accepted by a map of 3 entries";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("detection 1 has label 3, expected 1..2"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(at::equal(to_category_ids(at::tensor({2, 1}, at::kLong), {0, 7, 9}),
                        at::tensor({9, 7}, at::kLong)));
  Detections d = two_detections();
  d.image_id = -1;
  EXPECT_THROW(to_coco_detections(d, {0, 1, 2, 5}), std::invalid_argument);
}

TEST(CocoResults, OneLabelMapForEveryCommand) {
  EXPECT_EQ(label_map({90, 1, 18}), (std::vector<uint64_t>{0, 1, 18, 90}));  // ascending ids, background first
  EXPECT_EQ(identity_label_map(4), (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST(CocoResults, LegacyBoxesAreInclusivePixelWidths) {
  std::vector<eval::Detection> plain, legacy;
  to_coco_results(two_detections(), {0, 1, 2, 5}, /*legacy_plus_one=*/false, plain);
  to_coco_results(two_detections(), {0, 1, 2, 5}, /*legacy_plus_one=*/true, legacy);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(legacy.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(legacy[i].bbox[0], plain[i].bbox[0]);
    EXPECT_EQ(legacy[i].bbox[1], plain[i].bbox[1]);
    EXPECT_EQ(legacy[i].bbox[2], plain[i].bbox[2] + 1);  // x2 - x1 + 1
    EXPECT_EQ(legacy[i].bbox[3], plain[i].bbox[3] + 1);
  }
}

}  // namespace
}  // namespace mrcnn::run
