// Small box utilities with torchvision's semantics (torchvision.ops.boxes). Boxes are XYXY,
// absolute pixels, [K, 4], any floating dtype, any device; the functions are written with ATen
// operators (one implementation for every device) and are registered as `mrcnn::box_area`,
// `mrcnn::box_iou`, `mrcnn::clip_boxes_to_image`, `mrcnn::remove_small_boxes`.
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::ops {

// (x2 - x1) * (y2 - y1), [K].
at::Tensor box_area(const at::Tensor& boxes);

// Pairwise IoU [N, M] of a [N, 4] and b [M, 4]: inter / (area_a + area_b - inter), with
// inter = clamp(min(x2) - max(x1), 0) * clamp(min(y2) - max(y1), 0). Either side empty gives an
// empty [N, M] result. Two degenerate boxes give 0/0 = NaN, as torchvision.
at::Tensor box_iou(const at::Tensor& a, const at::Tensor& b);

// box_iou of each image of a batch: a [N, G, 4] and b [N, P, 4] give [N, G, P], each image's
// values bit-identical to box_iou of its rows (the same operators, elementwise). One call where a
// loop over images would make N.
at::Tensor box_iou_batched(const at::Tensor& a, const at::Tensor& b);

// x clamped to [0, width], y to [0, height]; same shape as boxes ([..., 4]). height, width >= 0.
at::Tensor clip_boxes_to_image(const at::Tensor& boxes, int64_t height, int64_t width);

// int64 indices of the boxes whose width and height are both >= min_size, increasing.
at::Tensor remove_small_boxes(const at::Tensor& boxes, double min_size);

}  // namespace mrcnn::ops
