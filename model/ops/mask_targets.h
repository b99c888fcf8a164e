// Mask R-CNN mask-head targets, the MLPerf reference's way (maskrcnn-benchmark's
// project_masks_on_boxes with polygon masks): for every positive proposal k, the polygons of its
// matched ground-truth instance are
//   1. cropped to the proposal: x - x1, y - y1 (float32, as the reference stores polygons);
//   2. scaled to resolution x resolution: x * (M / max(x2 - x1, 1)), y * (M / max(y2 - y1, 1))
//      (float32 multiply by the float64 ratio rounded to float32, as a float32 tensor times a
//      Python float);
//   3. rasterized at M x M with pycocotools' polygon rasterizer (frPyObjects, the union of the
//      instance's polygons, decode), through mask_raster.h.
// Nothing outside the proposal contributes, and nothing is resampled: a polygon edge lands
// where pycocotools puts it, not where a resized full-image bitmap would.
//
// Runs where `proposals` are: on the CPU parallel over proposals; on a GPU one block per proposal
// (the polygons, host data, are copied there without blocking; nothing is read back), with the
// same masks bit for bit (mask_raster.h). Deterministic. Registered as `mrcnn::mask_targets`.
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "model/ops/polygon_list.h"

namespace mrcnn::ops {

// gt_polygons:      the polygons of one image's ground-truth instances (resized-image pixels).
// matched_gt_index: int64 [K], each in 0..num_instances-1.
// proposals:        float [K, 4] XYXY, the positive proposals.
// Returns float32 [K, resolution, resolution] with values in {0, 1}. K == 0 gives [0, M, M].
// Throws (std::invalid_argument from PolygonList::check, c10::Error otherwise) on an inconsistent
// PolygonList, a polygon with an odd number of coordinates, an index out of range or a
// non-finite proposal; on a GPU the last two (and a vertex beyond +-1e8 in a proposal's frame)
// set kFaultMaskTarget in the fault word instead (device_faults.h) and give that proposal 0s. Every polygon is rasterized as a polygon, also one of 2 points (the
// reference's frPyObjects would read an instance whose first polygon has exactly 4 coordinates
// as a box; COCO has no such instance worth copying that quirk for).
at::Tensor mask_targets(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                        const at::Tensor& proposals, int64_t resolution = 28);

}  // namespace mrcnn::ops
