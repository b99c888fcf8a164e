#include <gtest/gtest.h>

#include "eval/detection_bytes.h"

namespace mrcnn::eval {
namespace {

using Kind = Segmentation::Kind;

std::vector<Detection> every_kind() {
  std::vector<Detection> dets(4);
  dets[0] = {.image_id = (1ULL << 40) + 3, .category_id = 90, .score = 0.123456789012345, .has_bbox = true,
             .bbox = {1.5, 2.25, 30.125, 0.0}};
  dets[1].image_id = 7;
  dets[1].category_id = 1;
  dets[1].score = 1.0;
  dets[1].segmentation.kind = Kind::kRle;
  dets[1].segmentation.height = 5;
  dets[1].segmentation.width = 4;
  dets[1].segmentation.counts = {3, 2, 15};
  dets[2].image_id = 8;
  dets[2].segmentation.kind = Kind::kCompressedRle;
  dets[2].segmentation.height = 480;
  dets[2].segmentation.width = 640;
  dets[2].segmentation.compressed = "PPYo0\\0a3";
  dets[3].image_id = 9;
  dets[3].has_bbox = true;
  dets[3].bbox = {0, 0, 1e9, 1e-9};
  dets[3].segmentation.kind = Kind::kPolygons;
  dets[3].segmentation.polygons = {{0, 0, 10, 0, 10, 10}, {}, {1, 1, 2, 2, 3, 1, 4, 4}};
  return dets;
}

void expect_same(const Detection& a, const Detection& b) {
  EXPECT_EQ(a.image_id, b.image_id);
  EXPECT_EQ(a.category_id, b.category_id);
  EXPECT_EQ(a.score, b.score);  // bit for bit: the scores decide COCOeval's order
  EXPECT_EQ(a.has_bbox, b.has_bbox);
  EXPECT_EQ(a.bbox, b.bbox);
  EXPECT_EQ(a.segmentation.kind, b.segmentation.kind);
  EXPECT_EQ(a.segmentation.height, b.segmentation.height);
  EXPECT_EQ(a.segmentation.width, b.segmentation.width);
  EXPECT_EQ(a.segmentation.counts, b.segmentation.counts);
  EXPECT_EQ(a.segmentation.compressed.str(), b.segmentation.compressed.str());
  EXPECT_EQ(a.segmentation.polygons, b.segmentation.polygons);
}

TEST(GatherDetections, RoundTripsEveryField) {
  const auto dets = every_kind();
  std::vector<Detection> back;
  decode_detections(encode_detections(dets), back);
  ASSERT_EQ(back.size(), dets.size());
  for (size_t i = 0; i < dets.size(); ++i) expect_same(dets[i], back[i]);
}

TEST(GatherDetections, AppendsInRankOrder) {
  const auto dets = every_kind();
  const std::vector<Detection> rank0(dets.begin(), dets.begin() + 2), rank1(dets.begin() + 2, dets.end());
  std::vector<Detection> merged;
  for (const auto& bytes : {encode_detections(rank0), encode_detections({}), encode_detections(rank1)})
    decode_detections(bytes, merged);
  ASSERT_EQ(merged.size(), dets.size());
  for (size_t i = 0; i < dets.size(); ++i) expect_same(dets[i], merged[i]);
}

TEST(GatherDetections, RefusesTruncatedOrPaddedBuffers) {
  const std::string bytes = encode_detections(every_kind());
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<Detection> out;
    EXPECT_THROW(decode_detections(std::string_view(bytes).substr(0, cut), out), std::runtime_error) << cut;
  }
  std::vector<Detection> out;
  EXPECT_THROW(decode_detections(bytes + "x", out), std::runtime_error);
  // A count larger than what the buffer can hold is refused before anything is allocated.
  std::string huge = bytes;
  huge.replace(0, 8, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  EXPECT_THROW(decode_detections(huge, out), std::runtime_error);
}

}  // namespace
}  // namespace mrcnn::eval
