#include "eval/coco_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

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

const char* to_string(IouType t) { return t == IouType::kBbox ? "bbox" : "segm"; }

IouType parse_iou_type(std::string_view s) {
  if (s == "bbox") return IouType::kBbox;
  if (s == "segm") return IouType::kSegm;
  throw std::invalid_argument("unknown IoU type '" + std::string(s) + "': expected bbox or segm");
}

std::vector<double> numpy_linspace(double start, double stop, size_t num) {
  std::vector<double> y(num);
  if (num == 0) return y;
  if (num == 1) {
    y[0] = start;
    return y;
  }
  const double div = static_cast<double>(num - 1);
  const double delta = stop - start;
  const double step = delta / div;
  for (size_t i = 0; i < num; ++i) {
    // numpy: arange * step + start (two separate roundings), or arange / div * delta if step == 0
    y[i] = step == 0 ? static_cast<double>(i) / div * delta + start : static_cast<double>(i) * step + start;
  }
  y[num - 1] = stop;
  return y;
}

double numpy_pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_pairwise_sum(a, n2) + numpy_pairwise_sum(a + n2, n - n2);
}

EvalParams EvalParams::coco_default() {
  EvalParams p;
  // int(np.round((0.95 - .5) / .05)) + 1 == 10 and int(np.round((1.00 - .0) / .01)) + 1 == 101
  p.iou_thresholds = numpy_linspace(.5, 0.95, 10);
  p.recall_thresholds = numpy_linspace(.0, 1.00, 101);
  return p;
}

// ---- summary --------------------------------------------------------------------------------------

namespace {

struct SummarySpec {
  bool ap;
  double iou;  // < 0: all thresholds
  const char* area;
  int max_dets_index;
};
constexpr SummarySpec kSummary[12] = {
    {true, -1, "all", 2},    {true, .5, "all", 2},    {true, .75, "all", 2},
    {true, -1, "small", 2},  {true, -1, "medium", 2}, {true, -1, "large", 2},
    {false, -1, "all", 0},   {false, -1, "all", 1},   {false, -1, "all", 2},
    {false, -1, "small", 2}, {false, -1, "medium", 2}, {false, -1, "large", 2},
};

// _summarize(): the mean of the selected entries > -1 (numpy's pairwise mean), -1 if none.
double summarize_one(const EvalResult& r, const EvalParams& p, const SummarySpec& s) {
  const uint32_t max_det = p.max_dets[static_cast<size_t>(s.max_dets_index)];
  std::vector<size_t> ts, as, ms;
  for (size_t t = 0; t < p.iou_thresholds.size(); ++t) {
    if (s.iou < 0 || p.iou_thresholds[t] == s.iou) ts.push_back(t);
  }
  for (size_t a = 0; a < p.area_labels.size(); ++a) {
    if (p.area_labels[a] == s.area) as.push_back(a);
  }
  for (size_t m = 0; m < p.max_dets.size(); ++m) {
    if (p.max_dets[m] == max_det) ms.push_back(m);
  }
  // numpy's s[:, :, :, aind, mind] pairs aind and mind elementwise (both of length 1 here).
  const size_t pairs = std::min(as.size(), ms.size());
  std::vector<double> vals;
  if (s.ap) {
    for (size_t t : ts)
      for (size_t ri = 0; ri < r.R; ++ri)
        for (size_t k = 0; k < r.K; ++k)
          for (size_t j = 0; j < pairs; ++j) {
            const double v = r.precision[(((t * r.R + ri) * r.K + k) * r.A + as[j]) * r.M + ms[j]];
            if (v > -1) vals.push_back(v);
          }
  } else {
    for (size_t t : ts)
      for (size_t k = 0; k < r.K; ++k)
        for (size_t j = 0; j < pairs; ++j) {
          const double v = r.recall[((t * r.K + k) * r.A + as[j]) * r.M + ms[j]];
          if (v > -1) vals.push_back(v);
        }
  }
  if (vals.empty()) return -1;
  return numpy_pairwise_sum(vals.data(), vals.size()) / static_cast<double>(vals.size());
}

}  // namespace

std::string EvalResult::summary() const {
  const EvalParams p = EvalParams::coco_default();
  std::string out;
  char line[160];
  for (const SummarySpec& s : kSummary) {
    char iou[32];
    if (s.iou < 0) {
      std::snprintf(iou, sizeof iou, "%0.2f:%0.2f", p.iou_thresholds.front(), p.iou_thresholds.back());
    } else {
      std::snprintf(iou, sizeof iou, "%0.2f", s.iou);
    }
    const size_t i = static_cast<size_t>(&s - kSummary);
    std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3u ] = %0.3f\n",
                  s.ap ? "Average Precision" : "Average Recall", s.ap ? "(AP)" : "(AR)", iou,
                  s.area, p.max_dets[static_cast<size_t>(s.max_dets_index)], stats[i]);
    out += line;
  }
  return out;
}

// ---- ground truth, prepared once -------------------------------------------------------------------

// Cells of the ground truth: per image (sorted by id), the annotations grouped by category (sorted
// by id), file order within a group.
struct CocoEvaluator::GtCache {
  std::vector<uint64_t> image_ids, category_ids;  // sorted
  std::unordered_map<uint64_t, uint32_t> image_rank, category_rank;
  std::vector<uint32_t> image_pos;                 // rank -> position in Dataset::images
  std::vector<uint32_t> ann_order;                 // annotation positions, by (image, category)
  struct Group {
    uint32_t cat;    // category rank
    uint32_t begin;  // range in ann_order
    uint32_t end;
  };
  std::vector<Group> groups;
  std::vector<uint32_t> group_start;  // per image rank, +1
};

CocoEvaluator::CocoEvaluator(std::shared_ptr<const Dataset> gt, EvalOptions options)
    : gt_(std::move(gt)), threads_(detail::resolve_threads(options.threads)) {
  if (!gt_) throw std::invalid_argument("CocoEvaluator: no ground truth dataset");
  if (!gt_->indexed()) {
    throw std::invalid_argument(
        "CocoEvaluator: the ground truth dataset is not indexed (call Dataset::build_index() "
        "after filling or changing its vectors)");
  }
  auto c = std::make_unique<GtCache>();
  const Dataset& ds = *gt_;
  std::vector<uint32_t> img(ds.images.size()), cat(ds.categories.size());
  std::iota(img.begin(), img.end(), 0u);
  std::iota(cat.begin(), cat.end(), 0u);
  std::sort(img.begin(), img.end(), [&](uint32_t a, uint32_t b) { return ds.images[a].id < ds.images[b].id; });
  std::sort(cat.begin(), cat.end(),
            [&](uint32_t a, uint32_t b) { return ds.categories[a].id < ds.categories[b].id; });
  for (uint32_t r = 0; r < img.size(); ++r) {
    c->image_ids.push_back(ds.images[img[r]].id);
    c->image_rank.emplace(ds.images[img[r]].id, r);
  }
  for (uint32_t r = 0; r < cat.size(); ++r) {
    c->category_ids.push_back(ds.categories[cat[r]].id);
    c->category_rank.emplace(ds.categories[cat[r]].id, r);
  }
  c->image_pos = img;
  c->group_start.push_back(0);
  std::vector<std::pair<uint32_t, uint32_t>> tmp;  // (category rank, annotation position)
  for (uint32_t r = 0; r < img.size(); ++r) {
    tmp.clear();
    for (uint32_t a : ds.annotations_of_image(ds.images[img[r]].id)) {
      auto it = c->category_rank.find(ds.annotations[a].category_id);
      if (it == c->category_rank.end()) continue;  // cannot happen after build_index()
      tmp.emplace_back(it->second, a);
    }
    std::stable_sort(tmp.begin(), tmp.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t i = 0; i < tmp.size(); ++i) {
      if (i == 0 || tmp[i].first != tmp[i - 1].first) {
        c->groups.push_back({tmp[i].first, static_cast<uint32_t>(c->ann_order.size()), 0});
      }
      c->ann_order.push_back(tmp[i].second);
      c->groups.back().end = static_cast<uint32_t>(c->ann_order.size());
    }
    c->group_start.push_back(static_cast<uint32_t>(c->groups.size()));
  }
  cache_ = std::move(c);
  image_masks_once_ = std::make_unique<std::once_flag[]>(img.size());
  gt_masks_.resize(ds.annotations.size());
  gt_mask_boxes_.resize(ds.annotations.size());
}

CocoEvaluator::~CocoEvaluator() = default;

const CocoEvaluator::GtCache& CocoEvaluator::gt_cache() const { return *cache_; }

void CocoEvaluator::check_gt_segmentations() const {
  std::call_once(checked_once_, [this]() {
    const Dataset& ds = *gt_;
    for (size_t i = 0; i < ds.annotations.size(); ++i) {
      const Annotation& a = ds.annotations[i];
      const Segmentation& s = a.segmentation;
      const Image* im = ds.find_image(a.image_id);
      const std::string what = "ground truth annotations[" + std::to_string(i) + "] (id " +
                               std::to_string(a.id) + ")";
      if (s.kind == Segmentation::Kind::kNone) throw CocoError(what + ": has no segmentation");
      if (s.kind == Segmentation::Kind::kPolygons) continue;  // checked when read
      const uint32_t h = static_cast<uint32_t>(im->height), w = static_cast<uint32_t>(im->width);
      if (s.height != h || s.width != w) {
        throw CocoError(what + ": RLE size [" + std::to_string(s.height) + ", " +
                        std::to_string(s.width) + "] differs from its image's [" +
                        std::to_string(h) + ", " + std::to_string(w) + "]");
      }
      try {
        if (s.kind == Segmentation::Kind::kCompressedRle) check_string(s.compressed, h, w);
        if (s.kind == Segmentation::Kind::kRle) from_counts(s.counts, h, w);
      } catch (const std::invalid_argument& e) {
        throw CocoError(what + ": " + e.what());
      }
    }
  });
}

void CocoEvaluator::ensure_image_masks(uint32_t r) const {
  std::call_once(image_masks_once_[r], [this, r]() {
    const Dataset& ds = *gt_;
    const GtCache& gc = *cache_;
    const Image& im = ds.images[gc.image_pos[r]];
    for (uint32_t g = gc.group_start[r]; g < gc.group_start[r + 1]; ++g) {
      for (uint32_t x = gc.groups[g].begin; x < gc.groups[g].end; ++x) {
        const uint32_t i = gc.ann_order[x];
        const Annotation& a = ds.annotations[i];
        gt_masks_[i] = to_rle(a.segmentation, static_cast<uint32_t>(im.height),
                              static_cast<uint32_t>(im.width),
                              "ground truth annotations[" + std::to_string(i) + "] (id " +
                                  std::to_string(a.id) + ")");
        gt_mask_boxes_[i] = to_bbox(gt_masks_[i]);
      }
    }
  });
}

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
    if (s.kind == Segmentation::Kind::kCompressedRle) check_string(s.compressed, h, w);
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

}  // namespace

EvalResult CocoEvaluator::evaluate(std::span<const Detection> detections, IouType iou_type) const {
  const IouType types[1] = {iou_type};
  return std::move(evaluate(detections, types)[0]);
}

std::vector<EvalResult> CocoEvaluator::evaluate(std::span<const Detection> dets,
                                                std::span<const IouType> types) const {
  const auto t_prepare = Clock::now();
  const GtCache& gc = gt_cache();
  const Dataset& ds = *gt_;
  const EvalParams p = EvalParams::coco_default();
  const size_t T = p.iou_thresholds.size(), R = p.recall_thresholds.size();
  const size_t K = gc.category_ids.size(), A = p.area_ranges.size(), M = p.max_dets.size();
  const size_t I = gc.image_ids.size();
  const uint32_t max_det = p.max_dets.back();
  static_assert(sizeof(DtFlags::matched) * 8 >= 16, "one flag bit per IoU threshold");
  if (T > 16) throw std::logic_error("CocoEvaluator: at most 16 IoU thresholds");
  bool need_segm = false;
  for (IouType t : types) need_segm |= t == IouType::kSegm;

  // -- loadRes: which area / bbox the detections get, and input checks.
  const bool from_bbox = !dets.empty() && dets[0].has_bbox;
  std::vector<uint32_t> det_image(dets.size()), det_cat(dets.size());
  std::vector<uint32_t> per_image(I + 1, 0);
  size_t dropped = 0;
  constexpr uint32_t kDropped = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < dets.size(); ++i) {
    const Detection& d = dets[i];
    check_detection(d, i);
    auto ir = gc.image_rank.find(d.image_id);
    if (ir == gc.image_rank.end()) {
      throw CocoError(det_name(i) + ": image_id " + std::to_string(d.image_id) +
                      " is not an image of the ground truth");
    }
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
    det_image[i] = ir->second;
    auto cr = gc.category_rank.find(d.category_id);
    if (cr == gc.category_rank.end()) {
      det_cat[i] = kDropped;
      ++dropped;
      continue;
    }
    det_cat[i] = cr->second;
    ++per_image[ir->second + 1];
  }
  for (size_t i = 1; i <= I; ++i) per_image[i] += per_image[i - 1];
  std::vector<uint32_t> by_image(per_image.back());
  {
    std::vector<uint32_t> fill(per_image.begin(), per_image.end() - 1);
    for (size_t i = 0; i < dets.size(); ++i) {
      if (det_cat[i] != kDropped) by_image[fill[det_image[i]]++] = static_cast<uint32_t>(i);
    }
  }
  // Within an image: group by category, then by descending score, stably (results order kept
  // among ties, as numpy's mergesort of -score), then at most maxDets[-1] per cell.
  detail::parallel_for(I, threads_, [&](size_t im) {
    std::stable_sort(by_image.begin() + per_image[im], by_image.begin() + per_image[im + 1],
                     [&](uint32_t a, uint32_t b) {
                       if (det_cat[a] != det_cat[b]) return det_cat[a] < det_cat[b];
                       return dets[a].score > dets[b].score;
                     });
  });
  std::vector<uint32_t> dt_order;  // detection indices of all cells, cell after cell
  dt_order.reserve(by_image.size());
  std::vector<Cell> cells;
  std::vector<uint32_t> cell_start(I + 1, 0);
  for (uint32_t im = 0; im < I; ++im) {
    const uint32_t gb = gc.group_start[im], ge = gc.group_start[im + 1];
    uint32_t g = gb;
    uint32_t j = per_image[im];
    const uint32_t je = per_image[im + 1];
    while (g < ge || j < je) {
      const uint32_t cg = g < ge ? gc.groups[g].cat : std::numeric_limits<uint32_t>::max();
      const uint32_t cd = j < je ? det_cat[by_image[j]] : std::numeric_limits<uint32_t>::max();
      const uint32_t cat = std::min(cg, cd);
      Cell c{im, cat, 0, 0, static_cast<uint32_t>(dt_order.size()), 0};
      if (cg == cat) {
        c.gt_begin = gc.groups[g].begin;
        c.gt_end = gc.groups[g].end;
        ++g;
      }
      uint32_t taken = 0;
      while (j < je && det_cat[by_image[j]] == cat) {
        if (taken < max_det) {
          dt_order.push_back(by_image[j]);
          ++taken;
        }
        ++j;
      }
      c.dt_end = static_cast<uint32_t>(dt_order.size());
      cells.push_back(c);
    }
    cell_start[im + 1] = static_cast<uint32_t>(cells.size());
  }
  if (need_segm) check_gt_segmentations();
  std::vector<double> dt_score(dt_order.size());
  for (size_t i = 0; i < dt_order.size(); ++i) dt_score[i] = dets[dt_order[i]].score;
  const double prepare_seconds = seconds_since(t_prepare);

  // -- evaluate(): per image, IoUs and matching for every cell, area range and threshold.
  const auto t_eval = Clock::now();
  const size_t ND = dt_order.size();
  std::vector<double> dt_area(ND);
  std::vector<std::vector<DtFlags>> flags(types.size(), std::vector<DtFlags>(ND * A));
  std::vector<std::vector<uint32_t>> npig(types.size(), std::vector<uint32_t>(cells.size() * A));
  const double max_iou = 1 - 1e-10;

  detail::parallel_for(I, threads_, [&](size_t im) {
    if (cell_start[im + 1] == cell_start[im]) return;  // no ground truth, no detections
    const uint32_t d0 = cells[cell_start[im]].dt_begin;
    const uint32_t nd_img = cells[cell_start[im + 1] - 1].dt_end - d0;
    const Image& image = ds.images[gc.image_pos[im]];
    const uint32_t ih = static_cast<uint32_t>(image.height), iw = static_cast<uint32_t>(image.width);
    // Masks of this image's detections, when needed: for segm IoUs, or for the areas and boxes
    // of results without a bbox.
    // A mask is needed for segm IoUs (only in cells with ground truth) and, for results without
    // a bbox, for every area and box; masks nobody reads are not decoded. Validity of the others
    // is still checked when they are decoded: all of them when !from_bbox.
    std::vector<Rle> masks;
    std::vector<std::array<double, 4>> mask_boxes, boxes(nd_img);
    if (need_segm || !from_bbox) {
      masks.resize(nd_img);
      mask_boxes.resize(nd_img);
    }
    for (uint32_t ci = cell_start[im]; ci < cell_start[im + 1]; ++ci) {
      const bool cell_has_gt = cells[ci].gt_end > cells[ci].gt_begin;
      for (uint32_t k = cells[ci].dt_begin - d0; k < cells[ci].dt_end - d0; ++k) {
        const uint32_t di = dt_order[d0 + k];
        const Detection& d = dets[di];
        const bool decode = !from_bbox || (need_segm && cell_has_gt);
        if (decode) {
          if (d.segmentation.empty()) {
            masks[k] = from_box(d.bbox, ih, iw);  // loadRes: the box as a polygon
          } else {
            masks[k] = to_rle(d.segmentation, ih, iw, det_name(di));
          }
          mask_boxes[k] = to_bbox(masks[k]);
        } else if (need_segm && !d.segmentation.empty()) {
          check_segmentation(d, ih, iw, di);
        }
        if (from_bbox) {
          dt_area[d0 + k] = d.bbox[2] * d.bbox[3];
          boxes[k] = d.bbox;
        } else {
          dt_area[d0 + k] = static_cast<double>(area(masks[k]));
          boxes[k] = d.has_bbox ? d.bbox : mask_boxes[k];
        }
      }
    }
    if (need_segm) {
      for (uint32_t ci = cell_start[im]; ci < cell_start[im + 1]; ++ci) {
        if (cells[ci].gt_end > cells[ci].gt_begin && cells[ci].dt_end > cells[ci].dt_begin) {
          ensure_image_masks(static_cast<uint32_t>(im));
          break;
        }
      }
    }
    std::vector<double> ious, row_max;
    std::vector<uint32_t> order;
    std::vector<uint8_t> gt_ig, gtm;
    std::vector<uint8_t> crowd;
    for (uint32_t ci = cell_start[im]; ci < cell_start[im + 1]; ++ci) {
      const Cell& c = cells[ci];
      const uint32_t G = c.gt_end - c.gt_begin, D = c.dt_end - c.dt_begin;
      const uint32_t* gt_ann = gc.ann_order.data() + c.gt_begin;
      crowd.resize(G);
      for (uint32_t g = 0; g < G; ++g) crowd[g] = ds.annotations[gt_ann[g]].iscrowd ? 1 : 0;
      for (size_t ty = 0; ty < types.size(); ++ty) {
        // computeIoU: a D x G matrix, rows in score order.
        ious.assign(static_cast<size_t>(D) * G, 0.0);
        if (G > 0 && D > 0) {
          for (uint32_t d = 0; d < D; ++d) {
            const uint32_t k = c.dt_begin + d - d0;
            for (uint32_t g = 0; g < G; ++g) {
              const uint32_t a = gt_ann[g];
              double v;
              if (types[ty] == IouType::kBbox) {
                v = box_iou(boxes[k].data(), ds.annotations[a].bbox.data(), crowd[g]);
              } else {
                const Rle& gm = gt_masks_[a];
                if (!(box_iou(mask_boxes[k].data(), gt_mask_boxes_[a].data(), crowd[g]) > 0)) {
                  v = 0;
                } else {
                  const Overlap o = overlap(masks[k], gm);
                  const uint32_t inter = static_cast<uint32_t>(o.intersection);
                  uint32_t uni = static_cast<uint32_t>(o.union_);
                  if (inter == 0) uni = 1;
                  else if (crowd[g]) uni = area(masks[k]);
                  v = static_cast<double>(inter) / static_cast<double>(uni);
                }
              }
              ious[static_cast<size_t>(d) * G + g] = v;
            }
          }
        }
        row_max.assign(D, -1.0);
        for (uint32_t d = 0; d < D; ++d) {
          for (uint32_t g = 0; g < G; ++g) row_max[d] = std::max(row_max[d], ious[static_cast<size_t>(d) * G + g]);
        }
        // evaluateImg for each area range (maxDet = maxDets[-1]: every detection of the cell).
        for (size_t ai = 0; ai < A; ++ai) {
          const double lo = p.area_ranges[ai][0], hi = p.area_ranges[ai][1];
          order.clear();
          gt_ig.assign(G, 0);
          uint32_t not_ignored = 0;
          for (uint32_t g = 0; g < G; ++g) {
            const Annotation& ann = ds.annotations[gt_ann[g]];
            const bool ig = ann.iscrowd || ann.area < lo || ann.area > hi;
            if (!ig) {
              order.push_back(g);
              ++not_ignored;
            }
          }
          for (uint32_t g = 0; g < G; ++g) {
            const Annotation& ann = ds.annotations[gt_ann[g]];
            if (ann.iscrowd || ann.area < lo || ann.area > hi) order.push_back(g);
          }
          for (uint32_t s = 0; s < G; ++s) gt_ig[s] = s >= not_ignored ? 1 : 0;
          npig[ty][ci * A + ai] = not_ignored;
          DtFlags* f = flags[ty].data() + static_cast<size_t>(c.dt_begin) * A;
          for (uint32_t d = 0; d < D; ++d) f[d * A + ai] = DtFlags{};
          if (G > 0 && D > 0) {
            gtm.resize(G);
            for (size_t t = 0; t < T; ++t) {
              std::fill(gtm.begin(), gtm.end(), 0);
              const uint16_t bit = static_cast<uint16_t>(1u << t);
              for (uint32_t d = 0; d < D; ++d) {
                double best = std::min(p.iou_thresholds[t], max_iou);
                if (row_max[d] < best) continue;  // no ground truth reaches the threshold
                int m = -1;
                const double* row = ious.data() + static_cast<size_t>(d) * G;
                for (uint32_t s = 0; s < G; ++s) {
                  const uint32_t g = order[s];
                  if (gtm[s] && !crowd[g]) continue;  // taken, and not a crowd
                  if (m > -1 && !gt_ig[m] && gt_ig[s]) break;  // on a real match, ignored gts follow
                  if (row[g] < best) continue;
                  best = row[g];
                  m = static_cast<int>(s);
                }
                if (m == -1) continue;
                DtFlags& fl = f[d * A + ai];
                if (gt_ig[m]) fl.ignored |= bit;
                if (ds.annotations[gt_ann[order[m]]].id != 0) fl.matched |= bit;
                gtm[m] = 1;
              }
            }
          }
          // Unmatched detections outside the area range are ignored.
          const uint16_t all = static_cast<uint16_t>((1u << T) - 1);
          for (uint32_t d = 0; d < D; ++d) {
            const double ar = dt_area[c.dt_begin + d];
            if (ar < lo || ar > hi) {
              DtFlags& fl = f[d * A + ai];
              fl.ignored |= static_cast<uint16_t>(all & ~fl.matched);
            }
          }
        }
      }
    }
  });
  const double evaluate_seconds = seconds_since(t_eval);

  // -- accumulate(): per category, detections of all images merged by score.
  std::vector<uint32_t> cat_start(K + 1, 0), cells_by_cat(cells.size());
  for (const Cell& c : cells) ++cat_start[c.cat + 1];
  for (size_t k = 1; k <= K; ++k) cat_start[k] += cat_start[k - 1];
  {
    std::vector<uint32_t> fill(cat_start.begin(), cat_start.end() - 1);
    for (uint32_t ci = 0; ci < cells.size(); ++ci) cells_by_cat[fill[cells[ci].cat]++] = ci;
  }

  std::vector<EvalResult> results(types.size());
  for (size_t ty = 0; ty < types.size(); ++ty) {
    const auto t_acc = Clock::now();
    EvalResult& r = results[ty];
    r.iou_type = types[ty];
    r.T = T, r.R = R, r.K = K, r.A = A, r.M = M;
    r.precision.assign(T * R * K * A * M, -1.0);
    r.scores.assign(T * R * K * A * M, -1.0);
    r.recall.assign(T * K * A * M, -1.0);
    r.image_ids = gc.image_ids;
    r.category_ids = gc.category_ids;
    r.num_detections = by_image.size();
    r.dropped_detections = dropped;
    const std::vector<DtFlags>& fl = flags[ty];
    detail::parallel_for(K, threads_, [&](size_t k) {
      const uint32_t cb = cat_start[k], ce = cat_start[k + 1];
      if (cb == ce) return;  // no cell: E is empty for every setting
      struct Entry {
        double score;
        uint32_t image;
        uint32_t rank;  // position within its cell (score order)
        uint32_t pos;   // position in the detection order
      };
      std::vector<Entry> entries;
      for (uint32_t x = cb; x < ce; ++x) {
        const Cell& c = cells[cells_by_cat[x]];
        for (uint32_t d = c.dt_begin; d < c.dt_end; ++d) {
          entries.push_back({dt_score[d], c.image, d - c.dt_begin, d});
        }
      }
      // np.argsort(-scores, kind='mergesort') over the images' lists concatenated in image order.
      std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.score != b.score) return a.score > b.score;
        if (a.image != b.image) return a.image < b.image;
        return a.rank < b.rank;
      });
      // Flags in sorted order, contiguous per area range: the passes below read them in order.
      const size_t n_all = entries.size();
      std::vector<DtFlags> sorted_flags(n_all * A);
      std::vector<double> sorted_scores(n_all);
      std::vector<uint32_t> sorted_rank(n_all);
      for (size_t i = 0; i < n_all; ++i) {
        for (size_t ai = 0; ai < A; ++ai) {
          sorted_flags[ai * n_all + i] = fl[static_cast<size_t>(entries[i].pos) * A + ai];
        }
        sorted_scores[i] = entries[i].score;
        sorted_rank[i] = entries[i].rank;
      }
      std::vector<uint32_t> sel;  // positions (in sorted order) kept by maxDets
      // True positives: where recall and the precision envelope can change (see below).
      struct Tp {
        uint32_t index;  // position in sel
        double tp, fp;
      };
      std::vector<Tp> tps_t[16];
      std::vector<double> env;
      for (size_t m = 0; m < M; ++m) {
        sel.clear();
        for (uint32_t i = 0; i < n_all; ++i) {
          if (sorted_rank[i] < p.max_dets[m]) sel.push_back(i);
        }
        const size_t nd = sel.size();
        for (size_t ai = 0; ai < A; ++ai) {
          uint64_t np_ = 0;
          for (uint32_t x = cb; x < ce; ++x) np_ += npig[ty][cells_by_cat[x] * A + ai];
          if (np_ == 0) continue;
          const double npig_d = static_cast<double>(np_);
          const DtFlags* f = sorted_flags.data() + ai * n_all;
          // pycocotools computes rc = tp/npig and pr = tp/(tp+fp+eps) at every detection, makes
          // pr non-increasing from the right and reads pr at searchsorted(rc, recThrs). Between
          // two true positives tp is constant and fp only grows, so pr is largest right at a
          // true positive, and rc only rises there: the envelope at any index is the larger of pr
          // there and pr at the later true positives, and every searchsorted hit for a threshold
          // > 0 is a true positive. The same divisions at those indices give the same numbers
          // with a fraction of the work. One pass serves all thresholds: a detection that is a
          // false positive at every threshold (the common case) only bumps a shared counter.
          const uint16_t all = static_cast<uint16_t>((1u << T) - 1);
          uint32_t fp_all = 0;
          uint32_t tp_t[16] = {}, fp_t[16] = {};
          for (size_t t = 0; t < T; ++t) tps_t[t].clear();
          for (size_t i = 0; i < nd; ++i) {
            const DtFlags fi = f[sel[i]];
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
              ++tp_t[t];
              tps_t[t].push_back({static_cast<uint32_t>(i), static_cast<double>(tp_t[t]),
                                  static_cast<double>(fp_t[t] + fp_all)});
            }
          }
          for (size_t t = 0; t < T; ++t) {
            const std::vector<Tp>& tps = tps_t[t];
            const double tp = static_cast<double>(tp_t[t]);
            r.recall[((t * K + k) * A + ai) * M + m] = nd ? tp / npig_d : 0;
            // env[j]: max precision over true positives j.. (the envelope at tps[j].index).
            env.resize(tps.size());
            double best = 0;
            for (size_t j = tps.size(); j-- > 0;) {
              const double pr = tps[j].tp / (tps[j].fp + tps[j].tp + kEps);
              if (pr > best) best = pr;
              env[j] = best;
            }
            size_t j = 0;  // first true positive with rc >= threshold
            for (size_t ri = 0; ri < R; ++ri) {
              const size_t at = (((t * R + ri) * K + k) * A + ai) * M + m;
              const double thr = p.recall_thresholds[ri];
              size_t idx;
              double q;
              if (nd > 0 && 0.0 >= thr) {
                // rc[0] >= thr: index 0, whose envelope covers every true positive (pr is 0 at a
                // leading false positive or ignored detection).
                idx = 0;
                q = tps.empty() ? 0.0 : env[0];
              } else {
                while (j < tps.size() && tps[j].tp / npig_d < thr) ++j;
                if (j >= tps.size()) {
                  for (size_t rj = ri; rj < R; ++rj) {
                    const size_t at2 = (((t * R + rj) * K + k) * A + ai) * M + m;
                    r.precision[at2] = 0;
                    r.scores[at2] = 0;
                  }
                  break;
                }
                idx = tps[j].index;
                q = env[j];
              }
              r.precision[at] = q;
              r.scores[at] = sorted_scores[sel[idx]];
            }
          }
        }
      }
    });
    for (size_t i = 0; i < 12; ++i) r.stats[i] = summarize_one(r, p, kSummary[i]);
    r.prepare_seconds = prepare_seconds;
    r.evaluate_seconds = evaluate_seconds;
    r.accumulate_seconds = seconds_since(t_acc);
  }
  return results;
}

}  // namespace mrcnn::eval
