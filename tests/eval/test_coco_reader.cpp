// The COCO reader: fields, segmentation encodings, lookups, and one clear error for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "eval/coco.h"
#include "eval/results_reader.h"

namespace mrcnn::eval {
namespace {

using ::testing::HasSubstr;

constexpr const char* kDataset = R"({
  "info": {"year": 2017, "nested": [1, {"a": null}]},
  "images": [{"id": 7, "width": 4, "height": 3, "file_name": "a.jpg", "license": 1},
             {"id": 9000000000, "width": 10, "height": 10, "file_name": "b\u00e9.jpg"}],
  "categories": [{"id": 1, "name": "cat", "supercategory": "animal"}, {"id": 3, "name": "dog"}],
  "annotations": [
    {"id": 1, "image_id": 7, "category_id": 1, "bbox": [0, 0, 2, 2], "area": 4, "iscrowd": 0,
     "segmentation": [[0, 0, 2, 0, 2, 2, 0, 2], [3, 0, 4, 0, 4, 1]]},
    {"id": 2, "image_id": 7, "category_id": 3, "bbox": [1.5, 0.25, 1e0, 2], "area": 2.5, "iscrowd": 1,
     "segmentation": {"size": [3, 4], "counts": [3, 2, 7]}},
    {"id": 3, "image_id": 9000000000, "category_id": 1, "bbox": [0, 0, 1, 1], "area": 1,
     "segmentation": {"size": [10, 10], "counts": "0;m2"}}
  ]
})";

TEST(CocoReader, ReadsAllFieldsAndEncodings) {
  const Dataset ds = parse_dataset(kDataset, "mem.json");
  ASSERT_EQ(ds.images.size(), 2u);
  EXPECT_EQ(ds.images[1].id, 9000000000ull);
  EXPECT_EQ(ds.images[1].file_name, "b\xC3\xA9.jpg");
  EXPECT_EQ(ds.images[0].width, 4);
  EXPECT_EQ(ds.images[0].height, 3);
  ASSERT_EQ(ds.categories.size(), 2u);
  EXPECT_EQ(ds.categories[0].supercategory, "animal");
  ASSERT_EQ(ds.annotations.size(), 3u);
  const Annotation& a0 = ds.annotations[0];
  EXPECT_EQ(a0.segmentation.kind, Segmentation::Kind::kPolygons);
  ASSERT_EQ(a0.segmentation.polygons.size(), 2u);
  EXPECT_EQ(a0.segmentation.polygons[1].size(), 6u);
  EXPECT_FALSE(a0.iscrowd);
  const Annotation& a1 = ds.annotations[1];
  EXPECT_TRUE(a1.iscrowd);
  EXPECT_EQ(a1.segmentation.kind, Segmentation::Kind::kRle);
  EXPECT_EQ(a1.segmentation.counts, (std::vector<uint32_t>{3, 2, 7}));
  EXPECT_DOUBLE_EQ(a1.bbox[0], 1.5);
  EXPECT_DOUBLE_EQ(a1.area, 2.5);
  const Annotation& a2 = ds.annotations[2];
  EXPECT_FALSE(a2.iscrowd);  // absent means not a crowd
  EXPECT_EQ(a2.segmentation.kind, Segmentation::Kind::kCompressedRle);
  EXPECT_EQ(a2.segmentation.compressed.str(), "0;m2");
  EXPECT_EQ(a2.segmentation.height, 10u);
}

TEST(CocoReader, Lookups) {
  const Dataset ds = parse_dataset(kDataset, "mem.json");
  ASSERT_NE(ds.find_image(9000000000ull), nullptr);
  EXPECT_EQ(ds.find_image(9000000000ull)->width, 10);
  EXPECT_EQ(ds.find_image(8), nullptr);
  EXPECT_EQ(ds.find_category(3)->name, "dog");
  const auto of7 = ds.annotations_of_image(7);
  ASSERT_EQ(of7.size(), 2u);
  EXPECT_EQ(of7[0], 0u);
  EXPECT_EQ(of7[1], 1u);
  const auto cat1 = ds.annotations_of_category(1);
  ASSERT_EQ(cat1.size(), 2u);
  EXPECT_EQ(cat1[1], 2u);
  EXPECT_TRUE(ds.annotations_of_image(12345).empty());
  EXPECT_EQ(ds.category_index(3), 1);
}

TEST(CocoReader, SegmentationToRle) {
  const Dataset ds = parse_dataset(kDataset, "mem.json");
  const Rle r = to_rle(ds.annotations[1].segmentation, 3, 4, "ann 2");
  EXPECT_EQ(area(r), 2u);
  EXPECT_THROW(to_rle(ds.annotations[1].segmentation, 4, 4, "ann 2"), CocoError);
  try {
    to_rle(ds.annotations[1].segmentation, 4, 3, "annotations[1] (id 2)");
  } catch (const CocoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("annotations[1] (id 2): RLE size [3, 4] differs"));
  }
}

std::string error_of(const std::string& json) {
  try {
    parse_dataset(json, "bad.json");
  } catch (const CocoError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CocoReader, ErrorsNameFileOffsetElementAndExpectation) {
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}], "annotations": [
      {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, "x", 1], "area": 1}]})"),
              HasSubstr("bad.json: byte 130 (line 2, column 65) at annotations[0].bbox[2]: "
                        "expected a number, found '\"'"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2)"),
              HasSubstr("found the end of the file (truncated?)"));
  EXPECT_THAT(error_of(R"({"images": [{"id": -1, "width": 2, "height": 2}]})"),
              HasSubstr("images[0].id: expected a non-negative integer"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1.5, "width": 2, "height": 2}]})"),
              HasSubstr("expected an integer"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2}]})"),
              HasSubstr("image is missing its \"height\""));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}], "categories": [],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,NaN,1], "area": 1}]})"),
              HasSubstr("expected a finite number (NaN and Infinity are not valid here)"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}], "categories": [{"id": 1}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,-1,1], "area": 1}]})"),
              HasSubstr("width or height must not be negative"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}], "categories": [{"id": 1}],
      "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [0,0,1,1], "area": 1}]})"),
              HasSubstr("annotations[0] (id 1): image_id 2 is not in \"images\""));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}, {"id": 1, "width": 2, "height": 2}]})"),
              HasSubstr("duplicate image id 1"));
  EXPECT_THAT(error_of(R"({"images": []} x)"), HasSubstr("expected the end of the file"));
  EXPECT_THAT(error_of(R"([1, 2])"), HasSubstr("expected a COCO dataset object"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}], "categories": [{"id": 1}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1], "area": 1,
      "segmentation": [[1, 2, 3]]}]})"),
              HasSubstr("even number of coordinates"));
  EXPECT_THAT(error_of(R"({"images": [{"id": 1, "width": 2, "height": 2}], "categories": [{"id": 1}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1], "area": 1,
      "segmentation": {"counts": "abc"}}]})"),
              HasSubstr("\"size\" is missing"));
}

TEST(CocoReader, MissingFileNamesThePath) {
  try {
    load_dataset("/nonexistent/instances.json");
    FAIL() << "expected an error";
  } catch (const CocoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/instances.json: cannot open"));
  }
}

TEST(ResultsReader, ReadsDetections) {
  const auto dets = parse_results(R"([
    {"image_id": 7, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5},
    {"image_id": 7, "category_id": 3, "score": 0.25, "segmentation": {"size": [3, 4], "counts": "0;4"}},
    {"image_id": 7, "category_id": 3, "bbox": [], "score": 1e-3, "segmentation": [[0,0,1,0,1,1]],
     "area": 99, "id": 5}
  ])", "res.json");
  ASSERT_EQ(dets.size(), 3u);
  EXPECT_TRUE(dets[0].has_bbox);
  EXPECT_DOUBLE_EQ(dets[0].bbox[3], 4);
  EXPECT_TRUE(dets[0].segmentation.empty());
  EXPECT_FALSE(dets[1].has_bbox);
  EXPECT_EQ(dets[1].segmentation.kind, Segmentation::Kind::kCompressedRle);
  EXPECT_FALSE(dets[2].has_bbox);  // "bbox": [] counts as absent, as in pycocotools
  EXPECT_DOUBLE_EQ(dets[2].score, 1e-3);
}

std::string results_error_of(const std::string& json) {
  try {
    parse_results(json, "res.json");
  } catch (const CocoError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ResultsReader, Errors) {
  EXPECT_THAT(results_error_of("[]"), HasSubstr("res.json: the results array is empty"));
  EXPECT_THAT(results_error_of(R"([{"image_id": 1, "category_id": 1, "score": 0.5}])"),
              HasSubstr("neither a \"bbox\" nor a \"segmentation\""));
  EXPECT_THAT(results_error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0,0,1,1]}])"),
              HasSubstr("[0]: detection is missing its \"score\""));
  EXPECT_THAT(results_error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0,0,1,1], "score": NaN}])"),
              HasSubstr("[0].score: expected a finite number"));
  EXPECT_THAT(results_error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0,0,1], "score": 1}])"),
              HasSubstr("[0].bbox: expected a bbox of 4 numbers"));
  EXPECT_THAT(results_error_of(R"([{"image_id": 1, "category_id": 1, "bbox": [0,0,1,1], "score": 1},)"),
              HasSubstr("found the end of the file"));
  EXPECT_THAT(results_error_of(R"({"image_id": 1})"), HasSubstr("expected a results array"));
  EXPECT_THAT(results_error_of(R"([{"image_id": "1", "category_id": 1, "bbox": [0,0,1,1], "score": 1}])"),
              HasSubstr("[0].image_id: expected an integer, found '\"'"));
}

TEST(InMemoryResults, MakeDetection) {
  const uint8_t mask[6] = {0, 1, 0, 1, 1, 0};  // 2x3 row-major
  const Detection d = make_detection(7, 1, 0.9, {0, 0, 2, 2}, encode_row_major(mask, 2, 3));
  EXPECT_EQ(d.segmentation.kind, Segmentation::Kind::kRle);
  EXPECT_EQ(d.segmentation.height, 2u);
  EXPECT_EQ(d.segmentation.width, 3u);
  EXPECT_EQ(area(to_rle(d.segmentation, 2, 3, "d")), 3u);
}

}  // namespace
}  // namespace mrcnn::eval
