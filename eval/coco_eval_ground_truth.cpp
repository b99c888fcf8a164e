// CocoEvaluator's ground truth, prepared once: the cells (image x category) in pycocotools' order,
// the segmentations checked, each image's masks decoded on first use.
#include <algorithm>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>

#include "eval/coco_eval.h"
#include "eval/coco_eval_detail.h"
#include "eval/parallel.h"

namespace mrcnn::eval {

CocoEvaluator::CocoEvaluator(std::shared_ptr<const Dataset> gt, EvalOptions options)
    : gt_(std::move(gt)), threads_(detail::resolve_threads(options.threads)) {
  if (!gt_) throw std::invalid_argument("CocoEvaluator: no ground truth dataset");
  if (!gt_->indexed()) {
    throw std::invalid_argument(
        "CocoEvaluator: the ground truth dataset is not indexed (call Dataset::build_index() "
        "after filling or changing its vectors)");
  }
  auto c = std::make_unique<detail::GtCache>();
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

const detail::GtCache& CocoEvaluator::gt_cache() const { return *cache_; }

namespace {
// "<file>: ground truth annotations[i]", naming the file when the dataset was read from one.
std::string gt_element(const Dataset& ds, size_t i) {
  return (ds.source.empty() ? "" : ds.source + ": ") + "ground truth annotations[" + std::to_string(i) + "]";
}

}  // namespace

void CocoEvaluator::check_gt_segmentations() const {
  std::call_once(checked_once_, [this]() {
    const Dataset& ds = *gt_;
    for (size_t i = 0; i < ds.annotations.size(); ++i) {
      const Annotation& a = ds.annotations[i];
      const Segmentation& s = a.segmentation;
      const Image* im = ds.find_image(a.image_id);
      auto what = [&]() { return gt_element(ds, i) + " (id " + std::to_string(a.id) + ")"; };
      if (s.kind == Segmentation::Kind::kNone) throw CocoError(what() + ": has no segmentation");
      if (s.kind == Segmentation::Kind::kPolygons) {  // coordinates checked when read
        // pycocotools' frPyObjects takes a first polygon of 4 numbers for a box and refuses
        // fewer ("input type is not supported"): an empty polygon is a damaged annotation.
        const size_t n = s.polygons.empty() ? 0 : s.polygons[0].size();
        if (n < 4)
          throw CocoError(what() + ": segmentation polygon 0 has " + std::to_string(n) +
                          " coordinates (pycocotools refuses fewer than 4)");
        continue;
      }
      const uint32_t h = static_cast<uint32_t>(im->height), w = static_cast<uint32_t>(im->width);
      if (s.height != h || s.width != w) {
        throw CocoError(what() + ": RLE size [" + std::to_string(s.height) + ", " +
                        std::to_string(s.width) + "] differs from its image's [" +
                        std::to_string(h) + ", " + std::to_string(w) + "]");
      }
      try {
        if (s.kind == Segmentation::Kind::kCompressedRle) check_compressed(s.compressed, h, w);
        if (s.kind == Segmentation::Kind::kRle) from_counts(s.counts, h, w);
      } catch (const std::invalid_argument& e) {
        throw CocoError(what() + ": " + e.what());
      }
    }
  });
}

void CocoEvaluator::ensure_image_masks(uint32_t r) const {
  std::call_once(image_masks_once_[r], [this, r]() {
    const Dataset& ds = *gt_;
    const detail::GtCache& gc = *cache_;
    const Image& im = ds.images[gc.image_pos[r]];
    for (uint32_t g = gc.group_start[r]; g < gc.group_start[r + 1]; ++g) {
      for (uint32_t x = gc.groups[g].begin; x < gc.groups[g].end; ++x) {
        const uint32_t i = gc.ann_order[x];
        const Annotation& a = ds.annotations[i];
        gt_masks_[i] = detail::to_rle_named(a.segmentation, static_cast<uint32_t>(im.height),
                                    static_cast<uint32_t>(im.width), [&]() {
                                      return gt_element(ds, i) + " (id " + std::to_string(a.id) + ")";
                                    });
        gt_mask_boxes_[i] = to_bbox(gt_masks_[i]);
      }
    }
  });
}

}  // namespace mrcnn::eval
