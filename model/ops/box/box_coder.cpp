// BoxCoder in ATen operators, following torchvision's encode_boxes / decode_single expression
// for expression, so that results agree bit for bit on the same device.
#include "model/ops/box/box_coder.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <stdexcept>
#include <string>

namespace mrcnn::ops {

BoxCoder::BoxCoder(std::array<double, 4> weights, double bbox_xform_clip)
    : weights_(weights), bbox_xform_clip_(bbox_xform_clip) {
  for (size_t i = 0; i < 4; ++i) {
    if (!(std::isfinite(weights[i]) && weights[i] > 0)) {
      throw std::invalid_argument("BoxCoder: weights[" + std::to_string(i) + "] = " +
                                  std::to_string(weights[i]) + "; expected a finite value > 0");
    }
  }
  if (!std::isfinite(bbox_xform_clip)) {
    throw std::invalid_argument("BoxCoder: bbox_xform_clip must be finite");
  }
}

at::Tensor BoxCoder::encode(const at::Tensor& reference_boxes, const at::Tensor& proposals) const {
  TORCH_CHECK(reference_boxes.dim() == 2 && reference_boxes.size(1) == 4 &&
                  proposals.sizes() == reference_boxes.sizes(),
              "BoxCoder::encode: reference_boxes and proposals must both be [K, 4], got ",
              reference_boxes.sizes(), " and ", proposals.sizes());
  const at::Tensor& gt = reference_boxes;
  const at::Tensor p = proposals.to(gt.scalar_type());
  const double wx = weights_[0], wy = weights_[1], ww = weights_[2], wh = weights_[3];
  const at::Tensor px1 = p.select(1, 0), py1 = p.select(1, 1);
  const at::Tensor px2 = p.select(1, 2), py2 = p.select(1, 3);
  const at::Tensor gx1 = gt.select(1, 0), gy1 = gt.select(1, 1);
  const at::Tensor gx2 = gt.select(1, 2), gy2 = gt.select(1, 3);
  const at::Tensor ex_w = px2 - px1;
  const at::Tensor ex_h = py2 - py1;
  const at::Tensor ex_cx = px1 + 0.5 * ex_w;
  const at::Tensor ex_cy = py1 + 0.5 * ex_h;
  const at::Tensor gt_w = gx2 - gx1;
  const at::Tensor gt_h = gy2 - gy1;
  const at::Tensor gt_cx = gx1 + 0.5 * gt_w;
  const at::Tensor gt_cy = gy1 + 0.5 * gt_h;
  const at::Tensor dx = wx * (gt_cx - ex_cx) / ex_w;
  const at::Tensor dy = wy * (gt_cy - ex_cy) / ex_h;
  const at::Tensor dw = ww * at::log(gt_w / ex_w);
  const at::Tensor dh = wh * at::log(gt_h / ex_h);
  return at::stack({dx, dy, dw, dh}, 1);
}

at::Tensor BoxCoder::decode(const at::Tensor& rel_codes, const at::Tensor& boxes) const {
  TORCH_CHECK(rel_codes.dim() == 2 && rel_codes.size(1) % 4 == 0,
              "BoxCoder::decode: rel_codes must be [K, 4*C], got ", rel_codes.sizes());
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && boxes.size(0) == rel_codes.size(0),
              "BoxCoder::decode: boxes must be [K, 4] with K = ", rel_codes.size(0), ", got ",
              boxes.sizes());
  const at::Tensor b = boxes.to(rel_codes.scalar_type());
  const at::Tensor widths = b.select(1, 2) - b.select(1, 0);
  const at::Tensor heights = b.select(1, 3) - b.select(1, 1);
  const at::Tensor ctr_x = b.select(1, 0) + 0.5 * widths;
  const at::Tensor ctr_y = b.select(1, 1) + 0.5 * heights;
  const at::Tensor dx = rel_codes.slice(1, 0, at::indexing::None, 4) / weights_[0];
  const at::Tensor dy = rel_codes.slice(1, 1, at::indexing::None, 4) / weights_[1];
  // Prevent sending too large values into exp().
  const at::Tensor dw =
      (rel_codes.slice(1, 2, at::indexing::None, 4) / weights_[2]).clamp_max(bbox_xform_clip_);
  const at::Tensor dh =
      (rel_codes.slice(1, 3, at::indexing::None, 4) / weights_[3]).clamp_max(bbox_xform_clip_);
  const at::Tensor pred_ctr_x = dx * widths.unsqueeze(1) + ctr_x.unsqueeze(1);
  const at::Tensor pred_ctr_y = dy * heights.unsqueeze(1) + ctr_y.unsqueeze(1);
  const at::Tensor pred_w = at::exp(dw) * widths.unsqueeze(1);
  const at::Tensor pred_h = at::exp(dh) * heights.unsqueeze(1);
  const at::Tensor half_w = 0.5 * pred_w;
  const at::Tensor half_h = 0.5 * pred_h;
  return at::stack({pred_ctr_x - half_w, pred_ctr_y - half_h, pred_ctr_x + half_w,
                    pred_ctr_y + half_h},
                   2)
      .flatten(1);
}

namespace {

at::Tensor box_encode_op(const at::Tensor& reference_boxes, const at::Tensor& proposals,
                         at::ArrayRef<double> weights) {
  TORCH_CHECK(weights.size() == 4, "mrcnn::box_encode: expected 4 weights, got ", weights.size());
  return BoxCoder({weights[0], weights[1], weights[2], weights[3]})
      .encode(reference_boxes, proposals);
}

at::Tensor box_decode_op(const at::Tensor& rel_codes, const at::Tensor& boxes,
                         at::ArrayRef<double> weights, double bbox_xform_clip) {
  TORCH_CHECK(weights.size() == 4, "mrcnn::box_decode: expected 4 weights, got ", weights.size());
  return BoxCoder({weights[0], weights[1], weights[2], weights[3]}, bbox_xform_clip)
      .decode(rel_codes, boxes);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def("box_encode(Tensor reference_boxes, Tensor proposals, float[] weights) -> Tensor",
        TORCH_FN(box_encode_op));
  m.def(
      "box_decode(Tensor rel_codes, Tensor boxes, float[] weights, "
      "float bbox_xform_clip=4.135166556742356) -> Tensor",
      TORCH_FN(box_decode_op));
}

}  // namespace mrcnn::ops
