// Run-length encoded binary masks, bit-exact with pycocotools' mask API (maskApi.c).
//
// An Rle is the column-major (Fortran order) run lengths of an h x w binary mask: counts[0]
// zeros, counts[1] ones, counts[2] zeros, ...; the counts sum to h*w. The compressed string form
// is COCO's ("counts": "...") 6-bits-a-character encoding of the same runs.
//
// Everything here is a pure function of its arguments: thread-safe, no global state. Functions
// that read caller memory (masks, coordinates) only read it during the call.
// Malformed input (a compressed string with a bad character, counts that do not add up to h*w,
// masks of different sizes where one size is needed, non-finite coordinates) throws
// std::invalid_argument naming what was wrong.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::eval {

struct Rle {
  uint32_t h = 0;
  uint32_t w = 0;
  std::vector<uint32_t> counts;  // column-major runs, zeros first; sum == h*w

  friend bool operator==(const Rle&, const Rle&) = default;
};

// ---- encode / decode --------------------------------------------------------------------------
// `mask` holds h*w bytes, any non-zero byte is foreground.
// Row-major (C order, mask[y*w + x]): what a model produces; read in place, no transposed copy.
Rle encode_row_major(const uint8_t* mask, uint32_t h, uint32_t w);
// Column-major (Fortran order, mask[x*h + y]): what pycocotools' encode() takes.
Rle encode_column_major(const uint8_t* mask, uint32_t h, uint32_t w);
// Write the mask (0/1 bytes) into `out`, which holds rle.h*rle.w bytes.
void decode_row_major(const Rle& rle, uint8_t* out);
void decode_column_major(const Rle& rle, uint8_t* out);

// ---- compressed string <-> counts --------------------------------------------------------------
std::string to_string(const Rle& rle);
// Throws std::invalid_argument if `s` is not a valid compressed RLE of an h x w mask.
Rle from_string(std::string_view s, uint32_t h, uint32_t w);
// Checks `s` as from_string() does, without building the counts.
void check_string(std::string_view s, uint32_t h, uint32_t w);
// Builds an Rle from uncompressed counts, checking that they add up to h*w.
Rle from_counts(std::vector<uint32_t> counts, uint32_t h, uint32_t w);

// ---- rasterization -----------------------------------------------------------------------------
// One polygon given as `num_points` (x, y) pairs xy[0], xy[1], ...: pycocotools' rleFrPoly
// (5x upsampled boundary, same rounding), bit-exact. Coordinates must be finite, |v| <= 1e8.
Rle from_polygon(const double* xy, size_t num_points, uint32_t h, uint32_t w);
// The union of several polygons (pycocotools: frPyObjects + merge), each a flat x0,y0,x1,y1,...
// list. No polygon gives an empty mask.
Rle from_polygons(std::span<const std::vector<double>> polygons, uint32_t h, uint32_t w);
// A box [x, y, width, height] (pycocotools' rleFrBbox: the box as a 4-point polygon).
Rle from_box(const std::array<double, 4>& xywh, uint32_t h, uint32_t w);

// Rasterizes the union of `num_polygons` polygons into a caller-provided row-major h x w grid of
// bytes (1 inside, 0 outside; the grid is overwritten). Polygon j is
// coords[offsets[j] .. offsets[j+1]) = x0, y0, x1, y1, ... (offsets has num_polygons+1 entries,
// each difference even). The same pixels as from_polygons(), with no dataset types and no RLE
// in between.
void rasterize_polygons(const double* coords, const int64_t* offsets, size_t num_polygons,
                        uint32_t h, uint32_t w, uint8_t* out_row_major);

// ---- set operations and measures ---------------------------------------------------------------
// Union (intersect = false) or intersection of masks of one size (pycocotools' merge). An empty
// span gives a 0x0 mask; masks of different sizes throw.
Rle merge(std::span<const Rle> rles, bool intersect = false);
Rle merge(const Rle& a, const Rle& b, bool intersect = false);
// Number of foreground pixels (pycocotools' area, uint32 as there).
uint32_t area(const Rle& rle);
// Tight bounding box [x, y, width, height] of the foreground; all zeros for an empty mask.
std::array<double, 4> to_bbox(const Rle& rle);

// IoU with pycocotools' crowd semantics: when the ground truth is a crowd region, the union is
// the detection's area alone (intersection over detection). Masks of different sizes: -1, as in
// pycocotools (the evaluator refuses such input before it gets here).
double iou(const Rle& dt, const Rle& gt, bool gt_is_crowd);
// Box IoU of [x, y, w, h] boxes, the same arithmetic as pycocotools' bbIou.
double box_iou(const double* dt, const double* gt, bool gt_is_crowd);
// All pairs: out[d * gt.size() + g] = iou(dt[d], gt[g], gt_is_crowd[g]) (row-major D x G).
// `dt_boxes` / `gt_boxes` may be null, else they hold to_bbox() of each mask (saves recomputing).
void iou_matrix(std::span<const Rle> dt, std::span<const Rle> gt, const uint8_t* gt_is_crowd,
                double* out, const std::array<double, 4>* dt_boxes = nullptr,
                const std::array<double, 4>* gt_boxes = nullptr);

// Intersection and union pixel counts of two masks of one size (no size check).
struct Overlap {
  uint64_t intersection = 0;
  uint64_t union_ = 0;
};
Overlap overlap(const Rle& a, const Rle& b);

}  // namespace mrcnn::eval
