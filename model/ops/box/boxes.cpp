// Box utilities in ATen operators (one implementation for every device, differentiable where
// the math is), registered as composite ops for the Python parity tests.
#include "model/ops/box/boxes.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace mrcnn::ops {
namespace {

void check_boxes(const at::Tensor& boxes, const char* op, const char* name) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op, ": ", name, " must be [K, 4], got ",
              boxes.sizes());
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op, ": ", name,
              " must be floating point, got ", boxes.scalar_type());
}

}  // namespace

at::Tensor box_area(const at::Tensor& boxes) {
  check_boxes(boxes, "mrcnn::box_area", "boxes");
  return (boxes.select(1, 2) - boxes.select(1, 0)) * (boxes.select(1, 3) - boxes.select(1, 1));
}

namespace {

// IoU of boxes along the last two dimensions but one: a [..., G, 4] and b [..., P, 4] give
// [..., G, P]. The same operators for one image ([G, 4], [P, 4]) and for a batch.
at::Tensor pairwise_iou(const at::Tensor& a, const at::Tensor& b) {
  auto area = [](const at::Tensor& t) {
    return (t.select(-1, 2) - t.select(-1, 0)) * (t.select(-1, 3) - t.select(-1, 1));
  };
  const at::Tensor area_a = area(a);
  const at::Tensor area_b = area(b);
  const at::Tensor lt = at::max(a.slice(-1, 0, 2).unsqueeze(-2), b.slice(-1, 0, 2).unsqueeze(-3));
  const at::Tensor rb = at::min(a.slice(-1, 2, 4).unsqueeze(-2), b.slice(-1, 2, 4).unsqueeze(-3));
  const at::Tensor wh = (rb - lt).clamp_min(0);
  const at::Tensor inter = wh.select(-1, 0) * wh.select(-1, 1);
  return inter / (area_a.unsqueeze(-1) + area_b.unsqueeze(-2) - inter);
}

}  // namespace

at::Tensor box_iou(const at::Tensor& a, const at::Tensor& b) {
  check_boxes(a, "mrcnn::box_iou", "a");
  check_boxes(b, "mrcnn::box_iou", "b");
  TORCH_CHECK(a.device() == b.device() && a.scalar_type() == b.scalar_type(),
              "mrcnn::box_iou: a and b must share device and dtype, got ", a.device(), "/",
              a.scalar_type(), " and ", b.device(), "/", b.scalar_type());
  return pairwise_iou(a, b);
}

at::Tensor box_iou_batched(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 3 && a.size(2) == 4 && b.dim() == 3 && b.size(2) == 4 && a.size(0) == b.size(0),
              "mrcnn::box_iou_batched: a must be [N, G, 4] and b [N, P, 4], got ", a.sizes(), " and ", b.sizes());
  TORCH_CHECK(a.device() == b.device() && a.scalar_type() == b.scalar_type() && at::isFloatingType(a.scalar_type()),
              "mrcnn::box_iou_batched: a and b must share device and a floating dtype, got ", a.device(), "/",
              a.scalar_type(), " and ", b.device(), "/", b.scalar_type());
  return pairwise_iou(a, b);
}

at::Tensor clip_boxes_to_image(const at::Tensor& boxes, int64_t height, int64_t width) {
  TORCH_CHECK(boxes.dim() >= 1 && boxes.size(-1) == 4,
              "mrcnn::clip_boxes_to_image: boxes must be [..., 4], got ", boxes.sizes());
  TORCH_CHECK(height >= 0 && width >= 0,
              "mrcnn::clip_boxes_to_image: image size must be >= 0, got ", height, "x", width);
  const at::Tensor x = boxes.slice(-1, 0, 4, 2).clamp(0, static_cast<double>(width));
  const at::Tensor y = boxes.slice(-1, 1, 4, 2).clamp(0, static_cast<double>(height));
  // Interleave back to x1, y1, x2, y2.
  return at::stack({x, y}, -1).reshape(boxes.sizes());
}

at::Tensor remove_small_boxes(const at::Tensor& boxes, double min_size) {
  check_boxes(boxes, "mrcnn::remove_small_boxes", "boxes");
  const at::Tensor ws = boxes.select(1, 2) - boxes.select(1, 0);
  const at::Tensor hs = boxes.select(1, 3) - boxes.select(1, 1);
  return at::where(ws.ge(min_size).logical_and(hs.ge(min_size)))[0];
}

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def("box_area(Tensor boxes) -> Tensor", TORCH_FN(box_area));
  m.def("box_iou(Tensor a, Tensor b) -> Tensor", TORCH_FN(box_iou));
  m.def("clip_boxes_to_image(Tensor boxes, int height, int width) -> Tensor",
        TORCH_FN(clip_boxes_to_image));
  m.def("remove_small_boxes(Tensor boxes, float min_size) -> Tensor",
        TORCH_FN(remove_small_boxes));
}

}  // namespace mrcnn::ops
