// mrcnn::nms and mrcnn::batched_nms: schemas and dispatcher stubs (or the portable composition,
// implementation.h). Kernels: cpu/, cuda/, autocast/, portable/.
#include "model/ops/nms.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "model/ops/implementation.h"
#include "model/ops/portable/portable.h"

namespace mrcnn::ops {

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  if (use_portable(boxes.device().type())) return portable::nms(boxes, scores, iou_threshold);
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::nms", "")
                       .typed<decltype(nms)>();
  return op.call(boxes, scores, iou_threshold);
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold) {
  if (use_portable(boxes.device().type())) {
    return portable::batched_nms(boxes, scores, idxs, iou_threshold);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::batched_nms", "")
                       .typed<decltype(batched_nms)>();
  return op.call(boxes, scores, idxs, iou_threshold);
}

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def("nms(Tensor boxes, Tensor scores, float iou_threshold) -> Tensor");
  m.def("batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor");
}

}  // namespace mrcnn::ops
