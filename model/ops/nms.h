// Non-maximum suppression, torchvision's semantics (`torchvision.ops.nms`, `batched_nms`).
//
// Registered as `mrcnn::nms` (CPU, CUDA, Autocast) and `mrcnn::batched_nms` (CPU, CUDA).
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

namespace mrcnn::ops {

// boxes [K, 4] XYXY, scores [K], same floating dtype and device. Returns the int64 indices of the
// kept boxes by decreasing score. Boxes are visited in a stable descending sort of the scores
// (ties: lower index first, as torchvision's stable sort); box j is suppressed by a kept box i
// when IoU(i, j) > iou_threshold, IoU = inter / (area_i + area_j - inter) in the boxes' dtype
// (a degenerate pair gives 0/0 = NaN, which suppresses nothing, as in torchvision).
// K == 0 gives an empty result.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// NMS done independently per category: idxs [K] int64 category of each box. Boxes of different
// categories never suppress each other. Returns the kept indices by decreasing score (ties:
// lower index first). Every category is suppressed exactly like `nms` on its own boxes (no
// coordinate-offset trick, so no rounding from shifted coordinates).
at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold);

}  // namespace mrcnn::ops
