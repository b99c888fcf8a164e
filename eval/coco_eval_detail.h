// Internal to CocoEvaluator, shared by its files: the ground truth's cells, prepared once
// (coco_eval_ground_truth.cpp) and read by every evaluation (coco_eval.cpp); a segmentation
// decoded with its name built only for an error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "eval/coco.h"
#include "eval/rle.h"

namespace mrcnn::eval {

namespace detail {

// Cells of the ground truth: per image (sorted by id), the annotations grouped by category (sorted
// by id), file order within a group.
struct GtCache {
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

// to_rle(s, h, w, name()), building the name only for an error: the common kinds (polygons, and
// compressed RLE of the right size) are decoded here with to_rle's exact error messages.
template <class Name>
Rle to_rle_named(const Segmentation& s, uint32_t h, uint32_t w, Name&& name) {
  const bool fast = s.kind == Segmentation::Kind::kPolygons ||
                    (s.kind == Segmentation::Kind::kCompressedRle && s.height == h && s.width == w);
  if (!fast) return to_rle(s, h, w, name());
  try {
    if (s.kind == Segmentation::Kind::kPolygons) return from_polygons(s.polygons, h, w);
    return from_compressed(s.compressed, h, w);
  } catch (const std::invalid_argument& e) {
    throw CocoError(name() + ": " + e.what());
  }
}

}  // namespace detail

}  // namespace mrcnn::eval
