// Pasting the mask head's M x M probabilities back into the image, with torchvision's
// paste_masks_in_image semantics (models/detection/roi_heads.py):
//   * the mask is padded by `padding` zero pixels per side and its box enlarged by
//     (M + 2*padding) / M about its centre (float32), then truncated to int64;
//   * the padded mask is resized bilinearly (align_corners=false) to (y2 - y1 + 1) x
//     (x2 - x1 + 1) (each >= 1) and the part inside the image is written at (x1, y1);
//     the rest of the image is 0.
// Only the pixels inside the box are interpolated: the resized mask is never materialized.
// The box expansion is computed in float32 (torchvision computes it in the boxes' dtype, float32
// in practice) and the interpolation in float32. Unlike torchvision, a box entirely above or
// left of the image pastes nothing instead of failing.
//
// Registered as `mrcnn::paste_masks_in_image` and `mrcnn::paste_masks_in_image_binary` (CPU,
// CUDA). Parallel over detections and rows on CPU; deterministic.
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::ops {

// masks: float [D, M, M] probabilities; boxes: [D, 4] XYXY in the target image's pixels (same
// device). Returns float [D, im_h, im_w] (masks' dtype). D == 0 gives [0, im_h, im_w].
at::Tensor paste_masks_in_image(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                                int64_t im_w, int64_t padding = 1);

// Same pasting, thresholded on the fly: uint8 [D, im_h, im_w], 1 where the pasted probability is
// > threshold (strictly, as the reference's Masker and torchvision's COCO evaluation do with
// 0.5), equal to (paste_masks_in_image(...) > threshold). A quarter of the float result's memory.
at::Tensor paste_masks_in_image_binary(const at::Tensor& masks, const at::Tensor& boxes,
                                       int64_t im_h, int64_t im_w, int64_t padding = 1,
                                       double threshold = 0.5);

}  // namespace mrcnn::ops
