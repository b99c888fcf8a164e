// Box regression parameterization (Girshick et al.), torchvision's BoxCoder semantics:
//   encode:  dx = wx * (gx - px) / pw, dy = wy * (gy - py) / ph,
//            dw = ww * log(gw / pw),   dh = wh * log(gh / ph)
//   decode:  the inverse, with dw/ww and dh/wh clamped at bbox_xform_clip (log(1000/16)) before
//            exp() so that a wild prediction cannot overflow.
// Widths are x2 - x1 (no +1), centres x1 + 0.5 * w. Weights: RPN 1,1,1,1; RoI box head
// 10,10,5,5. Written with ATen operators: any floating dtype, any device, differentiable.
// Registered as `mrcnn::box_encode` and `mrcnn::box_decode` (for the parity tests).
//
// Thread-safety: immutable after construction; const methods are safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cmath>

namespace mrcnn::ops {

class BoxCoder {
 public:
  // Throws std::invalid_argument unless every weight is finite and > 0 and the clip is finite.
  explicit BoxCoder(std::array<double, 4> weights,
                    double bbox_xform_clip = std::log(1000.0 / 16));

  // reference_boxes: the matched ground truth [K, 4]; proposals: [K, 4] (same dtype/device).
  // Returns the regression targets [K, 4] (dx, dy, dw, dh).
  at::Tensor encode(const at::Tensor& reference_boxes, const at::Tensor& proposals) const;

  // rel_codes [K, 4*C] (C = 1 for the RPN, num_classes for the box head), boxes [K, 4].
  // Returns [K, 4*C]: for each class the decoded box (x1, y1, x2, y2), in rel_codes' dtype.
  at::Tensor decode(const at::Tensor& rel_codes, const at::Tensor& boxes) const;

  const std::array<double, 4>& weights() const { return weights_; }
  double bbox_xform_clip() const { return bbox_xform_clip_; }

 private:
  std::array<double, 4> weights_;  // wx, wy, ww, wh
  double bbox_xform_clip_;         // upper clamp of dw, dh before exp
};

}  // namespace mrcnn::ops
