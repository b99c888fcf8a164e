// COCO evaluation (bbox and segm) with pycocotools' exact semantics and numbers.
//
// What is reproduced from pycocotools 2.0.11 (COCO.loadRes, COCOeval.evaluate / accumulate /
// summarize, the mask API):
//   * images and categories are those of the ground truth, sorted by id; detections keep their
//     results order within an (image, category) cell and are sorted by score with a stable sort
//     (ties keep that order), at most maxDets[-1] = 100 per cell;
//   * loadRes: if the first detection carries a bbox, every detection's area is bbox w*h (also
//     for segm, where a detection without a segmentation becomes its box polygon); otherwise the
//     area is the mask's pixel count and the bbox is the mask's tight box;
//   * ground truth: area from the file, crowd regions ignored and matched with
//     intersection-over-detection, area ranges inclusive at both ends, a matched ground truth
//     with id 0 counts as no match (pycocotools stores ids in a float array and tests != 0);
//   * thresholds from numpy.linspace, precision with the np.spacing(1) term, the 101-point
//     interpolated precision, -1 where a category has no ground truth, and the summary means
//     computed with numpy's pairwise summation.
// Detections whose category is not a ground-truth category are dropped (pycocotools drops them
// too); their number is reported. Detections on images not in the ground truth, RLE sizes that
// differ from their image's, and inconsistent results (the first carries a bbox, a later one
// does not) are errors (CocoError).
//
// Threads: the per-image work and the per-category accumulation run on `threads` threads; every
// number is independent of the thread count. A CocoEvaluator is safe to use from several threads
// at once (the ground truth's masks are built once, on first use, under a once_flag).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "eval/coco.h"
#include "eval/rle.h"

namespace mrcnn::eval {

enum class IouType { kBbox, kSegm };
const char* to_string(IouType t);          // "bbox", "segm"
IouType parse_iou_type(std::string_view s);  // throws std::invalid_argument

// pycocotools' Params for bbox/segm (the only settings summarize() is defined for).
struct EvalParams {
  std::vector<double> iou_thresholds;     // np.linspace(.5, .95, 10)
  std::vector<double> recall_thresholds;  // np.linspace(0, 1, 101)
  std::vector<uint32_t> max_dets{1, 10, 100};
  std::vector<std::array<double, 2>> area_ranges{
      {0.0, 1e10}, {0.0, 1024.0}, {1024.0, 9216.0}, {9216.0, 1e10}};
  std::vector<std::string> area_labels{"all", "small", "medium", "large"};

  static EvalParams coco_default();
};

// numpy.linspace(start, stop, num) bit for bit (endpoint included).
std::vector<double> numpy_linspace(double start, double stop, size_t num);
// numpy's float64 sum of a contiguous array (pairwise summation, 8 accumulators, block 128).
double numpy_pairwise_sum(const double* a, size_t n);

// The result of one evaluation of one IoU type.
struct EvalResult {
  IouType iou_type = IouType::kBbox;
  // The 12 numbers summarize() prints: AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl.
  std::array<double, 12> stats{};
  // accumulate()'s arrays in C order, as pycocotools' eval['precision'] [T,R,K,A,M],
  // eval['recall'] [T,K,A,M] and eval['scores'] [T,R,K,A,M]; -1 where undefined.
  std::vector<double> precision, recall, scores;
  size_t T = 0, R = 0, K = 0, A = 0, M = 0;
  std::vector<uint64_t> image_ids;     // evaluated images, sorted (params.imgIds)
  std::vector<uint64_t> category_ids;  // evaluated categories, sorted (params.catIds)
  // Where the time went, seconds.
  double prepare_seconds = 0;     // results checks, cell grouping, detection areas / boxes
  double evaluate_seconds = 0;    // IoUs and per-image matching
  double accumulate_seconds = 0;  // precision / recall tables and the 12 stats
  size_t num_detections = 0;      // detections evaluated (after dropping unknown categories)
  size_t dropped_detections = 0;  // detections whose category is not in the ground truth

  // pycocotools' 12-line summary block, each line ending in '\n'.
  std::string summary() const;
};

struct EvalOptions {
  // Worker threads for the per-image and per-category work; 0 means all hardware threads.
  int threads = 0;
};

// pycocotools' summarize(): the 12 stats of `r`'s arrays, in its order (evaluate() fills
// EvalResult::stats with them).
void summarize_stats(EvalResult& r, const EvalParams& p);

namespace detail {
struct GtCache;  // the ground truth's cells (coco_eval_detail.h)
}  // namespace detail

class CocoEvaluator {
 public:
  // Keeps `ground_truth` (shared, read-only) for its lifetime.
  explicit CocoEvaluator(std::shared_ptr<const Dataset> ground_truth, EvalOptions options = {});
  ~CocoEvaluator();

  CocoEvaluator(const CocoEvaluator&) = delete;
  CocoEvaluator& operator=(const CocoEvaluator&) = delete;

  // Evaluates `detections` for each requested IoU type (in that order); the preparation of the
  // detections is shared between types. An empty `detections` is valid here (every category
  // with ground truth scores 0). Throws CocoError on bad input.
  std::vector<EvalResult> evaluate(std::span<const Detection> detections,
                                   std::span<const IouType> iou_types) const;
  EvalResult evaluate(std::span<const Detection> detections, IouType iou_type) const;

  const Dataset& ground_truth() const { return *gt_; }
  int threads() const { return threads_; }

 private:
  const detail::GtCache& gt_cache() const;  // sorted ids and cells, built in the constructor

  // The phases of evaluate(), pycocotools' own (accumulate and summarize need no evaluator state
  // and are file-local in coco_eval.cpp). What they hand on is defined there too.
  struct Prepared;  // prepare(): checked detections, grouped with the ground truth into cells
  struct Matches;   // evaluate_images(): per IoU type, every detection's match flags
  // loadRes + _prepare: checks the detections, drops unknown categories, groups the rest per
  // (image, category) cell sorted by score (at most `max_det` a cell). Throws CocoError.
  Prepared prepare(std::span<const Detection> detections, bool need_segm, uint32_t max_det) const;
  // evaluateImg for every cell, area range and IoU threshold, per image on threads_ threads.
  Matches evaluate_images(const Prepared& prepared, std::span<const Detection> detections,
                          std::span<const IouType> iou_types, const EvalParams& params) const;
  void evaluate_image(uint32_t image_rank, const Prepared& prepared,
                      std::span<const Detection> detections, std::span<const IouType> iou_types,
                      const EvalParams& params, Matches& out) const;

  // Ground-truth masks are built per image, on the first segm evaluation that needs them, and
  // kept: a later epoch reuses them. check_gt_segmentations() refuses a ground truth that segm
  // cannot use (no segmentation, wrong RLE size or counts) up front, whatever is evaluated.
  void check_gt_segmentations() const;
  void ensure_image_masks(uint32_t image_rank) const;

  std::shared_ptr<const Dataset> gt_;
  int threads_;
  std::unique_ptr<detail::GtCache> cache_;
  mutable std::once_flag checked_once_;
  std::unique_ptr<std::once_flag[]> image_masks_once_;  // per image rank
  mutable std::vector<Rle> gt_masks_;                    // per annotation position
  mutable std::vector<std::array<double, 4>> gt_mask_boxes_;
};

}  // namespace mrcnn::eval
