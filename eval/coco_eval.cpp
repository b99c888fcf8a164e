#include "eval/coco_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "eval/coco_eval_detail.h"
#include "eval/parallel.h"

namespace mrcnn::eval {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr double kEps = 2.220446049250313e-16;  // np.spacing(1)
static_assert(kEps == std::numeric_limits<double>::epsilon());

}  // namespace

// ---- evaluation --------------------------------------------------------------------------------------

namespace {

// One (image, category) pair with ground truth or detections: evaluateImg's unit.
struct Cell {
  uint32_t image;  // image rank
  uint32_t cat;    // category rank
  uint32_t gt_begin, gt_end;  // range in GtCache::ann_order
  uint32_t dt_begin, dt_end;  // range in the detection order (sorted by score, at most 100)
};

// Per detection (in detection order) match flags for one IoU type and area range: bit t of
// `matched` is dtm[t] != 0, bit t of `ignored` is dtIg[t].
struct DtFlags {
  uint16_t matched = 0;
  uint16_t ignored = 0;
};
static_assert(sizeof(DtFlags::matched) * 8 >= 16, "one flag bit per IoU threshold");
constexpr size_t kMaxThresholds = 16;

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();  // no key / no category
constexpr double kMaxIou = 1 - 1e-10;  // evaluateImg: min([t, 1 - 1e-10])

// A counting sort: the positions i with keys[i] != kNone grouped by key (0 .. n_keys - 1),
// increasing within a key. `start` receives each key's range in the result (n_keys + 1 entries).
std::vector<uint32_t> group_by_key(std::span<const uint32_t> keys, size_t n_keys,
                                   std::vector<uint32_t>& start) {
  start.assign(n_keys + 1, 0);
  for (uint32_t key : keys) {
    if (key != kNone) ++start[key + 1];
  }
  for (size_t i = 1; i <= n_keys; ++i) start[i] += start[i - 1];
  std::vector<uint32_t> grouped(start.back());
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] != kNone) grouped[fill[keys[i]]++] = static_cast<uint32_t>(i);
  }
  return grouped;
}

// -- prepare: loadRes' checks ----------------------------------------------------------------------

std::string det_name(size_t i) { return "detections[" + std::to_string(i) + "]"; }

void check_detection(const Detection& d, size_t i) {
  if (!std::isfinite(d.score)) throw CocoError(det_name(i) + ": score is not a finite number");
  if (d.has_bbox) {
    for (double v : d.bbox) {
      if (!std::isfinite(v)) throw CocoError(det_name(i) + ": bbox holds a non-finite number");
    }
    if (d.bbox[2] < 0 || d.bbox[3] < 0) {
      throw CocoError(det_name(i) + ": bbox width and height must not be negative");
    }
  }
}

// A results set carries a bbox in every detection or in none (the first decides, `from_bbox`);
// without bboxes, every detection needs a segmentation.
void check_results_layout(const Detection& d, size_t i, bool from_bbox, bool need_segm) {
  if (from_bbox && !d.has_bbox) {
    throw CocoError(det_name(i) + ": has no bbox, but the first detection has one (all "
                    "detections of a results set must carry a bbox, or none)");
  }
  if (!from_bbox && d.segmentation.empty()) {
    throw CocoError(det_name(i) + ": has no segmentation, and the first detection has no bbox");
  }
  if (need_segm && !from_bbox && d.segmentation.empty()) {
    throw CocoError(det_name(i) + ": segm evaluation needs a segmentation");
  }
}

// Each detection's image and category rank; kNone for both where its category is not a
// ground-truth category (the detection is dropped).
struct DetectionRanks {
  std::vector<uint32_t> image, cat;
  size_t dropped = 0;
};

// loadRes: which area / bbox the detections get (`from_bbox`), and input checks.
DetectionRanks rank_detections(std::span<const Detection> dets,
                               const std::unordered_map<uint64_t, uint32_t>& image_rank,
                               const std::unordered_map<uint64_t, uint32_t>& category_rank,
                               bool from_bbox, bool need_segm, int threads) {
  DetectionRanks out;
  out.image.resize(dets.size());
  out.cat.resize(dets.size());
  // Fixed chunks, each checked in order: the error reported is the first detection's, whatever
  // the thread count (parallel_for rethrows the smallest failing chunk's).
  constexpr size_t kChunk = 16384;
  const size_t n_chunks = (dets.size() + kChunk - 1) / kChunk;
  std::vector<size_t> dropped(n_chunks, 0);
  detail::parallel_for(n_chunks, threads, [&](size_t ch) {
  const size_t end = std::min(dets.size(), (ch + 1) * kChunk);
  for (size_t i = ch * kChunk; i < end; ++i) {
    const Detection& d = dets[i];
    check_detection(d, i);
    auto ir = image_rank.find(d.image_id);
    if (ir == image_rank.end()) {
      throw CocoError(det_name(i) + ": image_id " + std::to_string(d.image_id) +
                      " is not an image of the ground truth");
    }
    check_results_layout(d, i, from_bbox, need_segm);
    auto cr = category_rank.find(d.category_id);
    if (cr == category_rank.end()) {
      out.image[i] = out.cat[i] = kNone;
      ++dropped[ch];
      continue;
    }
    out.image[i] = ir->second;
    out.cat[i] = cr->second;
  }
  });
  for (size_t c : dropped) out.dropped += c;
  return out;
}

// The checks to_rle() makes, for a detection whose mask is never decoded (no ground truth in its
// cell): the same input is refused however it is scored.
void check_segmentation(const Detection& d, uint32_t h, uint32_t w, size_t i) {
  const Segmentation& s = d.segmentation;
  if (s.kind == Segmentation::Kind::kPolygons) return;  // checked when read
  if (s.height != h || s.width != w) {
    throw CocoError(det_name(i) + ": RLE size [" + std::to_string(s.height) + ", " +
                    std::to_string(s.width) + "] differs from its image's [" + std::to_string(h) +
                    ", " + std::to_string(w) + "]");
  }
  try {
    if (s.kind == Segmentation::Kind::kCompressedRle) check_compressed(s.compressed, h, w);
    if (s.kind == Segmentation::Kind::kRle) {
      uint64_t total = 0;
      for (uint32_t c : s.counts) total += c;
      if (total != static_cast<uint64_t>(h) * w) {
        throw std::invalid_argument("RLE: counts add up to " + std::to_string(total) +
                                    " pixels, expected h*w = " + std::to_string(static_cast<uint64_t>(h) * w));
      }
    }
  } catch (const std::invalid_argument& e) {
    throw CocoError(det_name(i) + ": " + e.what());
  }
}

// -- evaluate: per image ---------------------------------------------------------------------------

// The detections of one image as evaluateImg reads them, by position from the image's first in
// the detection order.
struct ImageDetections {
  std::vector<Rle> masks;  // decoded where read: empty unless segm or results without a bbox
  std::vector<std::array<double, 4>> mask_boxes;  // the masks' tight boxes
  std::vector<std::array<double, 4>> boxes;       // loadRes' bbox
  std::vector<double> areas;                      // loadRes' area
};

// Decodes the masks of one image's detections, when needed: for segm IoUs (only in cells with
// ground truth) and, for results without a bbox, for every area and box; masks nobody reads are
// not decoded, but their input is checked all the same (all of them are decoded when !from_bbox).
ImageDetections image_detections(std::span<const Detection> dets, std::span<const uint32_t> dt_order,
                                 std::span<const Cell> image_cells, bool from_bbox, bool need_segm,
                                 uint32_t ih, uint32_t iw) {
  const uint32_t d0 = image_cells.front().dt_begin;
  const uint32_t nd_img = image_cells.back().dt_end - d0;
  ImageDetections out;
  out.boxes.resize(nd_img);
  out.areas.resize(nd_img);
  if (need_segm || !from_bbox) {
    out.masks.resize(nd_img);
    out.mask_boxes.resize(nd_img);
  }
  for (const Cell& cell : image_cells) {
    const bool cell_has_gt = cell.gt_end > cell.gt_begin;
    for (uint32_t k = cell.dt_begin - d0; k < cell.dt_end - d0; ++k) {
      const uint32_t di = dt_order[d0 + k];
      const Detection& d = dets[di];
      const bool decode = !from_bbox || (need_segm && cell_has_gt);
      if (decode) {
        if (d.segmentation.empty()) {
          out.masks[k] = from_box(d.bbox, ih, iw);  // loadRes: the box as a polygon
        } else {
          out.masks[k] = detail::to_rle_named(d.segmentation, ih, iw, [&]() { return det_name(di); });
        }
        out.mask_boxes[k] = to_bbox(out.masks[k]);
      } else if (need_segm && !d.segmentation.empty()) {
        check_segmentation(d, ih, iw, di);
      }
      if (from_bbox) {
        out.areas[k] = d.bbox[2] * d.bbox[3];
        out.boxes[k] = d.bbox;
      } else {
        out.areas[k] = static_cast<double>(area(out.masks[k]));
        out.boxes[k] = d.has_bbox ? d.bbox : out.mask_boxes[k];
      }
    }
  }
  return out;
}

// evaluateImg for the cells of one image, one cell at a time: computeIoU, then for each area
// range (maxDet = maxDets[-1]: every detection of the cell) the greedy matching at each IoU
// threshold. Keeps the buffers every cell reuses.
class CellMatcher {
 public:
  CellMatcher(const std::vector<Annotation>& annotations, const std::vector<Rle>& gt_masks,
              const std::vector<std::array<double, 4>>& gt_mask_boxes, const ImageDetections& dt,
              const EvalParams& p)
      : anns_(annotations), gt_masks_(gt_masks), gt_mask_boxes_(gt_mask_boxes), dt_(dt), p_(p) {}

  // The cell: G ground truths (annotation positions `gt_ann`), and D detections from position
  // `dt_first` of the image's.
  void set_cell(const uint32_t* gt_ann, uint32_t G, uint32_t dt_first, uint32_t D) {
    gt_ann_ = gt_ann, G_ = G, dt_first_ = dt_first, D_ = D;
    crowd_.resize(G);
    for (uint32_t g = 0; g < G; ++g) crowd_[g] = anns_[gt_ann[g]].iscrowd ? 1 : 0;
  }

  // computeIoU: a D x G matrix, rows in score order, and each row's largest IoU.
  void compute_ious(IouType type) {
    ious_.assign(static_cast<size_t>(D_) * G_, 0.0);
    if (G_ > 0 && D_ > 0) {
      for (uint32_t d = 0; d < D_; ++d) {
        const uint32_t k = dt_first_ + d;
        for (uint32_t g = 0; g < G_; ++g) {
          ious_[static_cast<size_t>(d) * G_ + g] = type == IouType::kBbox ? box_iou_of(k, g) : mask_iou_of(k, g);
        }
      }
    }
    row_max_.assign(D_, -1.0);
    for (uint32_t d = 0; d < D_; ++d) {
      for (uint32_t g = 0; g < G_; ++g) row_max_[d] = std::max(row_max_[d], ious_[static_cast<size_t>(d) * G_ + g]);
    }
  }

  // evaluateImg for area range `ai` on the IoUs computed last: sets the flags of the cell's
  // detections at f[d * A + ai]; returns how many ground truths are not ignored.
  uint32_t match(size_t ai, DtFlags* f) {
    const size_t A = p_.area_ranges.size(), T = p_.iou_thresholds.size();
    const double lo = p_.area_ranges[ai][0], hi = p_.area_ranges[ai][1];
    const uint32_t not_ignored = order_ground_truth(lo, hi);
    for (uint32_t d = 0; d < D_; ++d) f[d * A + ai] = DtFlags{};
    if (G_ > 0 && D_ > 0) {
      gtm_.resize(G_);
      for (size_t t = 0; t < T; ++t) match_threshold(t, f + ai, A);
    }
    // Unmatched detections outside the area range are ignored.
    const uint16_t all = static_cast<uint16_t>((1u << T) - 1);
    for (uint32_t d = 0; d < D_; ++d) {
      const double ar = dt_.areas[dt_first_ + d];
      if (ar < lo || ar > hi) {
        DtFlags& fl = f[d * A + ai];
        fl.ignored |= static_cast<uint16_t>(all & ~fl.matched);
      }
    }
    return not_ignored;
  }

 private:
  double box_iou_of(uint32_t k, uint32_t g) const {
    return box_iou(dt_.boxes[k].data(), anns_[gt_ann_[g]].bbox.data(), crowd_[g]);
  }

  double mask_iou_of(uint32_t k, uint32_t g) const {
    const uint32_t a = gt_ann_[g];
    if (!(box_iou(dt_.mask_boxes[k].data(), gt_mask_boxes_[a].data(), crowd_[g]) > 0)) return 0;
    const Overlap o = overlap(dt_.masks[k], gt_masks_[a]);
    const uint32_t inter = static_cast<uint32_t>(o.intersection);
    uint32_t uni = static_cast<uint32_t>(o.union_);
    if (inter == 0) uni = 1;
    else if (crowd_[g]) uni = area(dt_.masks[k]);
    return static_cast<double>(inter) / static_cast<double>(uni);
  }

  // The ground truths in evaluateImg's order: those inside [lo, hi] and not crowds first, then
  // the ignored ones, each in cell order (order_, gt_ig_ by sorted position). Returns how many
  // are not ignored.
  uint32_t order_ground_truth(double lo, double hi) {
    order_.clear();
    gt_ig_.assign(G_, 0);
    uint32_t not_ignored = 0;
    for (uint32_t g = 0; g < G_; ++g) {
      const Annotation& ann = anns_[gt_ann_[g]];
      const bool ig = ann.iscrowd || ann.area < lo || ann.area > hi;
      if (!ig) {
        order_.push_back(g);
        ++not_ignored;
      }
    }
    for (uint32_t g = 0; g < G_; ++g) {
      const Annotation& ann = anns_[gt_ann_[g]];
      if (ann.iscrowd || ann.area < lo || ann.area > hi) order_.push_back(g);
    }
    for (uint32_t s = 0; s < G_; ++s) gt_ig_[s] = s >= not_ignored ? 1 : 0;
    return not_ignored;
  }

  // The greedy matching at threshold t, detections in score order; f[d * stride] is detection
  // d's flags.
  void match_threshold(size_t t, DtFlags* f, size_t stride) {
    std::fill(gtm_.begin(), gtm_.end(), 0);
    const uint16_t bit = static_cast<uint16_t>(1u << t);
    for (uint32_t d = 0; d < D_; ++d) {
      double best = std::min(p_.iou_thresholds[t], kMaxIou);
      if (row_max_[d] < best) continue;  // no ground truth reaches the threshold
      int m = -1;
      const double* row = ious_.data() + static_cast<size_t>(d) * G_;
      for (uint32_t s = 0; s < G_; ++s) {
        const uint32_t g = order_[s];
        if (gtm_[s] && !crowd_[g]) continue;  // taken, and not a crowd
        if (m > -1 && !gt_ig_[m] && gt_ig_[s]) break;  // on a real match, ignored gts follow
        if (row[g] < best) continue;
        best = row[g];
        m = static_cast<int>(s);
      }
      if (m == -1) continue;
      DtFlags& fl = f[d * stride];
      if (gt_ig_[m]) fl.ignored |= bit;
      if (anns_[gt_ann_[order_[m]]].id != 0) fl.matched |= bit;
      gtm_[m] = 1;
    }
  }

  const std::vector<Annotation>& anns_;
  const std::vector<Rle>& gt_masks_;                         // per annotation position
  const std::vector<std::array<double, 4>>& gt_mask_boxes_;  // per annotation position
  const ImageDetections& dt_;
  const EvalParams& p_;
  // The cell.
  const uint32_t* gt_ann_ = nullptr;
  uint32_t G_ = 0, D_ = 0, dt_first_ = 0;
  std::vector<uint8_t> crowd_;     // per ground truth
  std::vector<double> ious_;       // D x G
  std::vector<double> row_max_;    // per detection
  std::vector<uint32_t> order_;    // ground truths, not ignored first
  std::vector<uint8_t> gt_ig_;     // per sorted position: ignored
  std::vector<uint8_t> gtm_;       // per sorted position: matched at the current threshold
};

// -- accumulate: per category ----------------------------------------------------------------------

// The cells of each category rank, image order within a category.
struct CellsByCategory {
  std::vector<uint32_t> start;  // per category rank, +1: its range in `cells`
  std::vector<uint32_t> cells;  // cell indices
};

CellsByCategory cells_by_category(std::span<const Cell> cells, size_t K) {
  std::vector<uint32_t> cat(cells.size());
  for (size_t ci = 0; ci < cells.size(); ++ci) cat[ci] = cells[ci].cat;
  CellsByCategory out;
  out.cells = group_by_key(cat, K, out.start);
  return out;
}

// accumulate() for one category and IoU type: the category's detections of all images merged by
// score, then per maxDets and area range the recall and the interpolated precision and scores at
// every IoU threshold, written into the result's arrays.
class CategoryAccumulator {
 public:
  CategoryAccumulator(const EvalParams& p, size_t k, EvalResult& r) : p_(p), k_(k), r_(r) {}

  void run(std::span<const Cell> cells, std::span<const uint32_t> cat_cells, std::span<const double> dt_score,
           std::span<const DtFlags> flags, std::span<const uint32_t> npig) {
    const size_t A = r_.A, T = r_.T;
    merge_by_score(cells, cat_cells, dt_score, flags);
    for (size_t m = 0; m < r_.M; ++m) {
      sel_.clear();
      for (uint32_t i = 0; i < n_all_; ++i) {
        if (sorted_rank_[i] < p_.max_dets[m]) sel_.push_back(i);
      }
      for (size_t ai = 0; ai < A; ++ai) {
        uint64_t np_ = 0;
        for (uint32_t ci : cat_cells) np_ += npig[ci * A + ai];
        if (np_ == 0) continue;
        const double npig_d = static_cast<double>(np_);
        find_true_positives(sorted_flags_.data() + ai * n_all_);
        for (size_t t = 0; t < T; ++t) {
          const double tp = static_cast<double>(tp_t_[t]);
          r_.recall[((t * r_.K + k_) * A + ai) * r_.M + m] = sel_.size() ? tp / npig_d : 0;
          interpolate_precision(t, ai, m, npig_d);
        }
      }
    }
  }

 private:
  // A true positive at one threshold: where recall and the precision envelope can change.
  struct Tp {
    uint32_t index;  // position in sel_
    double tp, fp;
  };

  size_t precision_at(size_t t, size_t ri, size_t ai, size_t m) const {
    return (((t * r_.R + ri) * r_.K + k_) * r_.A + ai) * r_.M + m;
  }

  // np.argsort(-scores, kind='mergesort') over the images' lists concatenated in image order;
  // the flags in that order, contiguous per area range (the passes below read them in order).
  void merge_by_score(std::span<const Cell> cells, std::span<const uint32_t> cat_cells,
                      std::span<const double> dt_score, std::span<const DtFlags> flags) {
    const size_t A = r_.A;
    struct Entry {
      double score;
      uint32_t image;
      uint32_t rank;  // position within its cell (score order)
      uint32_t pos;   // position in the detection order
    };
    std::vector<Entry> entries;
    for (uint32_t ci : cat_cells) {
      const Cell& c = cells[ci];
      for (uint32_t d = c.dt_begin; d < c.dt_end; ++d) {
        entries.push_back({dt_score[d], c.image, d - c.dt_begin, d});
      }
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      if (a.score != b.score) return a.score > b.score;
      if (a.image != b.image) return a.image < b.image;
      return a.rank < b.rank;
    });
    n_all_ = entries.size();
    sorted_flags_.resize(n_all_ * A);
    sorted_scores_.resize(n_all_);
    sorted_rank_.resize(n_all_);
    for (size_t i = 0; i < n_all_; ++i) {
      for (size_t ai = 0; ai < A; ++ai) {
        sorted_flags_[ai * n_all_ + i] = flags[static_cast<size_t>(entries[i].pos) * A + ai];
      }
      sorted_scores_[i] = entries[i].score;
      sorted_rank_[i] = entries[i].rank;
    }
  }

  // pycocotools computes rc = tp/npig and pr = tp/(tp+fp+eps) at every detection, makes pr
  // non-increasing from the right and reads pr at searchsorted(rc, recThrs). Between two true
  // positives tp is constant and fp only grows, so pr is largest right at a true positive, and rc
  // only rises there: the envelope at any index is the larger of pr there and pr at the later
  // true positives, and every searchsorted hit for a threshold > 0 is a true positive. The same
  // divisions at those indices give the same numbers with a fraction of the work. One pass over
  // the selected detections (flags `f`, merged order) serves all thresholds: a detection that is
  // a false positive at every threshold (the common case) only bumps a shared counter.
  void find_true_positives(const DtFlags* f) {
    const size_t T = r_.T;
    const uint16_t all = static_cast<uint16_t>((1u << T) - 1);
    uint32_t fp_all = 0;
    uint32_t fp_t[kMaxThresholds] = {};
    std::fill_n(tp_t_, kMaxThresholds, 0u);
    for (size_t t = 0; t < T; ++t) tps_t_[t].clear();
    for (size_t i = 0; i < sel_.size(); ++i) {
      const DtFlags fi = f[sel_[i]];
      const uint16_t live = static_cast<uint16_t>(all & ~fi.ignored);
      const uint16_t tpm = static_cast<uint16_t>(live & fi.matched);
      const uint16_t fpm = static_cast<uint16_t>(live & ~fi.matched);
      if (tpm == 0) {
        if (fpm == all) {
          ++fp_all;
          continue;
        }
        for (uint32_t bits = fpm; bits; bits &= bits - 1) ++fp_t[__builtin_ctz(bits)];
        continue;
      }
      for (uint32_t bits = fpm; bits; bits &= bits - 1) ++fp_t[__builtin_ctz(bits)];
      for (uint32_t bits = tpm; bits; bits &= bits - 1) {
        const int t = __builtin_ctz(bits);
        ++tp_t_[t];
        tps_t_[t].push_back({static_cast<uint32_t>(i), static_cast<double>(tp_t_[t]),
                             static_cast<double>(fp_t[t] + fp_all)});
      }
    }
  }

  // The 101-point interpolated precision and its scores at threshold t, from the true positives.
  void interpolate_precision(size_t t, size_t ai, size_t m, double npig_d) {
    const std::vector<Tp>& tps = tps_t_[t];
    const size_t nd = sel_.size(), R = r_.R;
    // env_[j]: max precision over true positives j.. (the envelope at tps[j].index).
    env_.resize(tps.size());
    double best = 0;
    for (size_t j = tps.size(); j-- > 0;) {
      const double pr = tps[j].tp / (tps[j].fp + tps[j].tp + kEps);
      if (pr > best) best = pr;
      env_[j] = best;
    }
    size_t j = 0;  // first true positive with rc >= threshold
    for (size_t ri = 0; ri < R; ++ri) {
      const size_t at = precision_at(t, ri, ai, m);
      const double thr = p_.recall_thresholds[ri];
      size_t idx;
      double q;
      if (nd > 0 && 0.0 >= thr) {
        // rc[0] >= thr: index 0, whose envelope covers every true positive (pr is 0 at a
        // leading false positive or ignored detection).
        idx = 0;
        q = tps.empty() ? 0.0 : env_[0];
      } else {
        while (j < tps.size() && tps[j].tp / npig_d < thr) ++j;
        if (j >= tps.size()) {
          for (size_t rj = ri; rj < R; ++rj) {
            const size_t at2 = precision_at(t, rj, ai, m);
            r_.precision[at2] = 0;
            r_.scores[at2] = 0;
          }
          break;
        }
        idx = tps[j].index;
        q = env_[j];
      }
      r_.precision[at] = q;
      r_.scores[at] = sorted_scores_[sel_[idx]];
    }
  }

  const EvalParams& p_;
  const size_t k_;  // category rank
  EvalResult& r_;
  // The category's detections, merged by score.
  size_t n_all_ = 0;
  std::vector<DtFlags> sorted_flags_;  // [area range * n_all_ + i]
  std::vector<double> sorted_scores_;
  std::vector<uint32_t> sorted_rank_;  // position within its cell
  // Per maxDets and area range.
  std::vector<uint32_t> sel_;  // positions (in merged order) kept by maxDets
  uint32_t tp_t_[kMaxThresholds] = {};
  std::vector<Tp> tps_t_[kMaxThresholds];
  std::vector<double> env_;
};

// accumulate() for one IoU type: r's shape (T, R, K, A, M) is set; fills precision, recall and
// scores, each category on its own, over `threads` threads.
void accumulate(std::span<const Cell> cells, std::span<const double> dt_score, const CellsByCategory& by_cat,
                std::span<const DtFlags> flags, std::span<const uint32_t> npig, const EvalParams& p,
                int threads, EvalResult& r) {
  r.precision.assign(r.T * r.R * r.K * r.A * r.M, -1.0);
  r.scores.assign(r.T * r.R * r.K * r.A * r.M, -1.0);
  r.recall.assign(r.T * r.K * r.A * r.M, -1.0);
  detail::parallel_for(r.K, threads, [&](size_t k) {
    const uint32_t cb = by_cat.start[k], ce = by_cat.start[k + 1];
    if (cb == ce) return;  // no cell: E is empty for every setting
    CategoryAccumulator acc(p, k, r);
    acc.run(cells, std::span<const uint32_t>(by_cat.cells).subspan(cb, ce - cb), dt_score, flags, npig);
  });
}


}  // namespace

// loadRes and _prepare's output: the detections kept, grouped with the ground truth into cells.
struct CocoEvaluator::Prepared {
  bool from_bbox = false;  // loadRes: the first detection carries a bbox (so every one does)
  bool need_segm = false;  // a segm evaluation is asked for
  size_t kept = 0;         // detections whose category is a ground-truth category
  size_t dropped = 0;      // the others
  std::vector<uint32_t> dt_order;    // detection indices of all cells, cell after cell
  std::vector<double> dt_score;      // their scores, in the same order
  std::vector<Cell> cells;           // by image rank, then category rank
  std::vector<uint32_t> cell_start;  // per image rank, +1: its range in `cells`
};

// evaluateImg's output, per IoU type.
struct CocoEvaluator::Matches {
  std::vector<std::vector<DtFlags>> flags;  // [type][position in dt_order * A + area range]
  std::vector<std::vector<uint32_t>> npig;  // [type][cell * A + area range]: gts not ignored
};

CocoEvaluator::Prepared CocoEvaluator::prepare(std::span<const Detection> dets, bool need_segm,
                                               uint32_t max_det) const {
  const detail::GtCache& gc = gt_cache();
  const size_t I = gc.image_ids.size();
  Prepared out;
  out.need_segm = need_segm;
  out.from_bbox = !dets.empty() && dets[0].has_bbox;

  // loadRes: checks, and each detection's image and category rank.
  const DetectionRanks ranks =
      rank_detections(dets, gc.image_rank, gc.category_rank, out.from_bbox, need_segm, threads_);
  const std::vector<uint32_t>& det_cat = ranks.cat;
  out.dropped = ranks.dropped;
  std::vector<uint32_t> per_image;
  std::vector<uint32_t> by_image = group_by_key(ranks.image, I, per_image);
  out.kept = by_image.size();
  // Within an image: group by category, then by descending score, stably (results order kept
  // among ties, as numpy's mergesort of -score).
  detail::parallel_for(I, threads_, [&](size_t im) {
    std::stable_sort(by_image.begin() + per_image[im], by_image.begin() + per_image[im + 1],
                     [&](uint32_t a, uint32_t b) {
                       if (det_cat[a] != det_cat[b]) return det_cat[a] < det_cat[b];
                       return dets[a].score > dets[b].score;
                     });
  });

  // _prepare: the cells of each image, merging its ground-truth groups and detections by
  // category; at most maxDets[-1] detections a cell.
  out.dt_order.reserve(by_image.size());
  out.cell_start.assign(I + 1, 0);
  for (uint32_t im = 0; im < I; ++im) {
    uint32_t g = gc.group_start[im];
    const uint32_t ge = gc.group_start[im + 1];
    uint32_t j = per_image[im];
    const uint32_t je = per_image[im + 1];
    while (g < ge || j < je) {
      const uint32_t cg = g < ge ? gc.groups[g].cat : kNone;
      const uint32_t cd = j < je ? det_cat[by_image[j]] : kNone;
      const uint32_t cat = std::min(cg, cd);
      Cell c{im, cat, 0, 0, static_cast<uint32_t>(out.dt_order.size()), 0};
      if (cg == cat) {
        c.gt_begin = gc.groups[g].begin;
        c.gt_end = gc.groups[g].end;
        ++g;
      }
      uint32_t taken = 0;
      for (; j < je && det_cat[by_image[j]] == cat; ++j) {
        if (taken < max_det) {
          out.dt_order.push_back(by_image[j]);
          ++taken;
        }
      }
      c.dt_end = static_cast<uint32_t>(out.dt_order.size());
      out.cells.push_back(c);
    }
    out.cell_start[im + 1] = static_cast<uint32_t>(out.cells.size());
  }
  if (need_segm) check_gt_segmentations();
  out.dt_score.resize(out.dt_order.size());
  for (size_t i = 0; i < out.dt_order.size(); ++i) out.dt_score[i] = dets[out.dt_order[i]].score;
  return out;
}

CocoEvaluator::Matches CocoEvaluator::evaluate_images(const Prepared& prepared,
                                                      std::span<const Detection> dets,
                                                      std::span<const IouType> types,
                                                      const EvalParams& p) const {
  const size_t A = p.area_ranges.size();
  Matches out;
  out.flags.assign(types.size(), std::vector<DtFlags>(prepared.dt_order.size() * A));
  out.npig.assign(types.size(), std::vector<uint32_t>(prepared.cells.size() * A));
  detail::parallel_for(gt_cache().image_ids.size(), threads_, [&](size_t im) {
    evaluate_image(static_cast<uint32_t>(im), prepared, dets, types, p, out);
  });
  return out;
}

void CocoEvaluator::evaluate_image(uint32_t im, const Prepared& prepared, std::span<const Detection> dets,
                                   std::span<const IouType> types, const EvalParams& p,
                                   Matches& out) const {
  const uint32_t cb = prepared.cell_start[im], ce = prepared.cell_start[im + 1];
  if (ce == cb) return;  // no ground truth, no detections
  const detail::GtCache& gc = gt_cache();
  const std::span<const Cell> cells = std::span<const Cell>(prepared.cells).subspan(cb, ce - cb);
  const Image& image = gt_->images[gc.image_pos[im]];
  const ImageDetections dt =
      image_detections(dets, prepared.dt_order, cells, prepared.from_bbox, prepared.need_segm,
                       static_cast<uint32_t>(image.height), static_cast<uint32_t>(image.width));
  if (prepared.need_segm && std::any_of(cells.begin(), cells.end(), [](const Cell& c) {
        return c.gt_end > c.gt_begin && c.dt_end > c.dt_begin;
      })) {
    ensure_image_masks(im);
  }
  CellMatcher matcher(gt_->annotations, gt_masks_, gt_mask_boxes_, dt, p);
  const uint32_t d0 = cells.front().dt_begin;
  const size_t A = p.area_ranges.size();
  for (uint32_t ci = cb; ci < ce; ++ci) {
    const Cell& c = prepared.cells[ci];
    matcher.set_cell(gc.ann_order.data() + c.gt_begin, c.gt_end - c.gt_begin, c.dt_begin - d0,
                     c.dt_end - c.dt_begin);
    for (size_t ty = 0; ty < types.size(); ++ty) {
      matcher.compute_ious(types[ty]);
      DtFlags* f = out.flags[ty].data() + static_cast<size_t>(c.dt_begin) * A;
      for (size_t ai = 0; ai < A; ++ai) out.npig[ty][ci * A + ai] = matcher.match(ai, f);
    }
  }
}

EvalResult CocoEvaluator::evaluate(std::span<const Detection> detections, IouType iou_type) const {
  const IouType types[1] = {iou_type};
  return std::move(evaluate(detections, types)[0]);
}

std::vector<EvalResult> CocoEvaluator::evaluate(std::span<const Detection> dets,
                                                std::span<const IouType> types) const {
  const auto t_prepare = Clock::now();
  const detail::GtCache& gc = gt_cache();
  const EvalParams p = EvalParams::coco_default();
  if (p.iou_thresholds.size() > kMaxThresholds) {
    throw std::logic_error("CocoEvaluator: at most 16 IoU thresholds");
  }
  bool need_segm = false;
  for (IouType t : types) need_segm |= t == IouType::kSegm;
  const Prepared prepared = prepare(dets, need_segm, p.max_dets.back());
  const double prepare_seconds = seconds_since(t_prepare);

  const auto t_eval = Clock::now();
  const Matches matches = evaluate_images(prepared, dets, types, p);
  const double evaluate_seconds = seconds_since(t_eval);

  const CellsByCategory by_cat = cells_by_category(prepared.cells, gc.category_ids.size());
  std::vector<EvalResult> results(types.size());
  for (size_t ty = 0; ty < types.size(); ++ty) {
    const auto t_acc = Clock::now();
    EvalResult& r = results[ty];
    r.iou_type = types[ty];
    r.T = p.iou_thresholds.size(), r.R = p.recall_thresholds.size(), r.K = gc.category_ids.size();
    r.A = p.area_ranges.size(), r.M = p.max_dets.size();
    r.image_ids = gc.image_ids;
    r.category_ids = gc.category_ids;
    r.num_detections = prepared.kept;
    r.dropped_detections = prepared.dropped;
    accumulate(prepared.cells, prepared.dt_score, by_cat, matches.flags[ty], matches.npig[ty], p,
               threads_, r);
    summarize_stats(r, p);
    r.prepare_seconds = prepare_seconds;
    r.evaluate_seconds = evaluate_seconds;
    r.accumulate_seconds = seconds_since(t_acc);
  }
  return results;
}

}  // namespace mrcnn::eval
