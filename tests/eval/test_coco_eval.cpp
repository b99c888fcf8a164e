// COCOeval semantics on small hand-made cases, numpy-exact helpers, thread-count independence
// and input errors. Exact agreement with pycocotools on generated data: test_coco_eval_parity.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "eval/coco_eval.h"
#include "tests/eval/eval_fixtures.h"

namespace mrcnn::eval {
namespace {

using ::testing::HasSubstr;

TEST(NumpyExact, Linspace) {
  const auto t = numpy_linspace(.5, .95, 10);
  const double expect[] = {0x1.0000000000000p-1, 0x1.199999999999ap-1, 0x1.3333333333333p-1,
                           0x1.4cccccccccccdp-1, 0x1.6666666666666p-1, 0x1.8000000000000p-1,
                           0x1.999999999999ap-1, 0x1.b333333333333p-1, 0x1.cccccccccccccp-1,
                           0x1.e666666666666p-1};
  ASSERT_EQ(t.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(t[i], expect[i]) << i;
  const auto r = numpy_linspace(0, 1, 101);
  EXPECT_EQ(r[3], 0x1.eb851eb851eb8p-6);
  EXPECT_EQ(r[7], 0x1.1eb851eb851ecp-4);
  EXPECT_EQ(r[57], 0x1.23d70a3d70a3ep-1);
  EXPECT_EQ(r[100], 1.0);
}

TEST(NumpyExact, PairwiseSum) {
  std::vector<double> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0 / static_cast<double>(i + 1);
  EXPECT_EQ(numpy_pairwise_sum(a.data(), a.size()), 0x1.df11f45f4e61ap+2);  // np.sum
  const std::vector<double> b(7, 0.1);
  EXPECT_EQ(numpy_pairwise_sum(b.data(), b.size()), 0x1.6666666666666p-1);
}

std::shared_ptr<Dataset> two_box_dataset(uint64_t first_ann_id = 1) {
  auto ds = std::make_shared<Dataset>(parse_dataset(R"({
    "images": [{"id": 1, "width": 100, "height": 100}, {"id": 2, "width": 100, "height": 100}],
    "categories": [{"id": 1}, {"id": 2}, {"id": 3}],
    "annotations": [
      {"id": )" + std::to_string(first_ann_id) + R"(, "image_id": 1, "category_id": 1,
       "bbox": [10, 10, 20, 20], "area": 400, "segmentation": [[10,10,30,10,30,30,10,30]]},
      {"id": 9, "image_id": 2, "category_id": 2, "bbox": [0, 0, 50, 60], "area": 3000,
       "segmentation": [[0,0,50,0,50,60,0,60]]}]})",
                                                    "two_box.json"));
  return ds;
}

Detection box_det(uint64_t image, uint64_t cat, double score, std::array<double, 4> bb) {
  Detection d;
  d.image_id = image;
  d.category_id = cat;
  d.score = score;
  d.has_bbox = true;
  d.bbox = bb;
  return d;
}

TEST(CocoEval, PerfectDetectionsScoreOne) {
  CocoEvaluator ev(two_box_dataset(), EvalOptions{2});
  const std::vector<Detection> dets = {box_det(1, 1, 0.9, {10, 10, 20, 20}),
                                       box_det(2, 2, 0.8, {0, 0, 50, 60})};
  const IouType types[] = {IouType::kBbox, IouType::kSegm};
  const auto res = ev.evaluate(dets, types);
  ASSERT_EQ(res.size(), 2u);
  for (const EvalResult& r : res) {
    EXPECT_DOUBLE_EQ(r.stats[0], 1.0) << to_string(r.iou_type);
    EXPECT_DOUBLE_EQ(r.stats[1], 1.0);
    EXPECT_DOUBLE_EQ(r.stats[3], 1.0);   // small: the 400-pixel box
    EXPECT_DOUBLE_EQ(r.stats[4], 1.0);   // medium: the 3000-pixel box
    EXPECT_EQ(r.stats[5], -1.0);  // large: no ground truth
    EXPECT_DOUBLE_EQ(r.stats[8], 1.0);
    EXPECT_EQ(r.K, 3u);
    // Category 3 has no ground truth: -1 throughout.
    EXPECT_EQ(r.precision[(((0 * r.R + 0) * r.K + 2) * r.A + 0) * r.M + 2], -1.0);
  }
  EXPECT_THAT(res[0].summary(),
              HasSubstr(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n"));
  EXPECT_THAT(res[0].summary(),
              HasSubstr(" Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n"));
}

TEST(CocoEval, NoDetectionsScoreZero) {
  CocoEvaluator ev(two_box_dataset(), EvalOptions{1});
  const EvalResult r = ev.evaluate(std::span<const Detection>(), IouType::kBbox);
  EXPECT_EQ(r.stats[0], 0.0);
  EXPECT_EQ(r.stats[8], 0.0);
  EXPECT_EQ(r.stats[5], -1.0);
}

TEST(CocoEval, MatchToGroundTruthIdZeroCountsAsNoMatch) {
  // pycocotools keeps matches in a float array where 0 means "unmatched": a detection matched to
  // the annotation with id 0 is a false positive there, and so here.
  CocoEvaluator ev(two_box_dataset(/*first_ann_id=*/0), EvalOptions{1});
  const std::vector<Detection> dets = {box_det(1, 1, 0.9, {10, 10, 20, 20})};
  const EvalResult r = ev.evaluate(dets, IouType::kBbox);
  EXPECT_EQ(r.precision[(((0 * r.R + 0) * r.K + 0) * r.A + 0) * r.M + 2], 0.0);
  EXPECT_EQ(r.recall[((0 * r.K + 0) * r.A + 0) * r.M + 2], 0.0);
}

TEST(CocoEval, TiedScoresKeepResultsOrder) {
  // Two detections with one score on one ground truth: the first in results order takes the
  // match, the second is a false positive; swapping them changes which box is the duplicate but
  // not AP at IoU 0.5 (both overlap enough) -- and changes AP at 0.95 (only one is exact).
  CocoEvaluator ev(two_box_dataset(), EvalOptions{1});
  const std::vector<Detection> exact_first = {box_det(1, 1, 0.5, {10, 10, 20, 20}),
                                              box_det(1, 1, 0.5, {11, 11, 20, 20})};
  const std::vector<Detection> exact_second = {box_det(1, 1, 0.5, {11, 11, 20, 20}),
                                               box_det(1, 1, 0.5, {10, 10, 20, 20})};
  const EvalResult a = ev.evaluate(exact_first, IouType::kBbox);
  const EvalResult b = ev.evaluate(exact_second, IouType::kBbox);
  const size_t t95 = 9;
  auto p0 = [&](const EvalResult& r, size_t t) {
    return r.precision[(((t * r.R + 0) * r.K + 0) * r.A + 0) * r.M + 2];
  };
  EXPECT_EQ(p0(a, 0), p0(b, 0));
  EXPECT_DOUBLE_EQ(p0(a, t95), 1.0);  // 1 / (1 + np.spacing(1))
  EXPECT_DOUBLE_EQ(p0(b, t95), 0.5);
}

TEST(CocoEval, ResultsIndependentOfThreadCount) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(11, 60, &dets);
  ASSERT_GT(dets.size(), 100u);
  const IouType types[] = {IouType::kBbox, IouType::kSegm};
  CocoEvaluator one(ds, EvalOptions{1});
  CocoEvaluator three(ds, EvalOptions{3});
  const auto a = one.evaluate(dets, types);
  const auto b = three.evaluate(dets, types);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a[i].stats, b[i].stats);
    EXPECT_EQ(a[i].precision, b[i].precision);
    EXPECT_EQ(a[i].recall, b[i].recall);
    EXPECT_EQ(a[i].scores, b[i].scores);
    EXPECT_GT(a[i].stats[0], 0.0);
  }
  // Repeated evaluation with the cached ground-truth masks gives the same numbers.
  EXPECT_EQ(three.evaluate(dets, types)[1].precision, b[1].precision);
}

TEST(CocoEval, ConcurrentEvaluationsOnOneEvaluatorAgree) {
  std::vector<Detection> dets;
  auto ds = testing::random_dataset(12, 40, &dets);
  const CocoEvaluator ev(ds, EvalOptions{2});
  const IouType types[] = {IouType::kSegm, IouType::kBbox};
  std::vector<EvalResult> a, b;
  // Both start before the ground-truth masks exist: they are built once, under once_flags.
  std::thread t1([&] { a = ev.evaluate(dets, types); });
  std::thread t2([&] { b = ev.evaluate(dets, types); });
  t1.join();
  t2.join();
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a[i].precision, b[i].precision);
    EXPECT_EQ(a[i].stats, b[i].stats);
  }
}

std::string eval_error(const std::vector<Detection>& dets, IouType type) {
  CocoEvaluator ev(two_box_dataset(), EvalOptions{2});
  try {
    ev.evaluate(dets, type);
  } catch (const CocoError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CocoEval, BadDetectionsAreClearErrors) {
  EXPECT_THAT(eval_error({box_det(1, 1, 0.5, {0, 0, 1, 1}), box_det(5, 1, 0.5, {0, 0, 1, 1})},
                         IouType::kBbox),
              HasSubstr("detections[1]: image_id 5 is not an image of the ground truth"));
  Detection no_box;
  no_box.image_id = 1;
  no_box.category_id = 1;
  no_box.segmentation = Segmentation::from_rle(from_box({0, 0, 3, 3}, 100, 100));
  EXPECT_THAT(eval_error({box_det(1, 1, 0.5, {0, 0, 1, 1}), no_box}, IouType::kBbox),
              HasSubstr("detections[1]: has no bbox, but the first detection has one"));
  Detection wrong_size = box_det(2, 2, 0.5, {0, 0, 3, 3});
  wrong_size.segmentation = Segmentation::from_rle(from_box({0, 0, 3, 3}, 90, 100));
  EXPECT_THAT(eval_error({wrong_size}, IouType::kSegm),
              HasSubstr("detections[0]: RLE size [90, 100] differs from its image's [100, 100]"));
  EXPECT_THAT(eval_error({box_det(1, 1, std::nan(""), {0, 0, 1, 1})}, IouType::kBbox),
              HasSubstr("detections[0]: score is not a finite number"));
  EXPECT_THAT(eval_error({box_det(1, 1, 0.5, {0, 0, -1, 1})}, IouType::kBbox),
              HasSubstr("must not be negative"));
  Detection bad_counts = box_det(2, 2, 0.5, {0, 0, 3, 3});
  bad_counts.segmentation.kind = Segmentation::Kind::kCompressedRle;
  bad_counts.segmentation.height = 100;
  bad_counts.segmentation.width = 100;
  bad_counts.segmentation.compressed = "0;4";
  EXPECT_THAT(eval_error({bad_counts}, IouType::kSegm),
              HasSubstr("detections[0]: RLE: compressed counts add up to"));
}

TEST(CocoEval, RefusesAnUnindexedDataset) {
  auto ds = std::make_shared<Dataset>(*two_box_dataset());
  ds->images.push_back({77, 10, 10, ""});  // changed after build_index()
  EXPECT_THAT([&] { CocoEvaluator ev(ds); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("build_index()")));
  ds->build_index();
  EXPECT_NO_THROW(CocoEvaluator ev(ds));
}

TEST(CocoEval, UnknownCategoriesAreDroppedLikePycocotools) {
  CocoEvaluator ev(two_box_dataset(), EvalOptions{1});
  const std::vector<Detection> dets = {box_det(1, 1, 0.9, {10, 10, 20, 20}),
                                       box_det(1, 42, 0.95, {10, 10, 20, 20})};
  const EvalResult r = ev.evaluate(dets, IouType::kBbox);
  EXPECT_EQ(r.dropped_detections, 1u);
  EXPECT_EQ(r.num_detections, 1u);
  // Category 1 is found (AP50 1), category 2 has ground truth and no detection (0).
  EXPECT_DOUBLE_EQ(r.stats[1], 0.5);
}

}  // namespace
}  // namespace mrcnn::eval
