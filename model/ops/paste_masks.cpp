// mrcnn::paste_masks_in_image(_binary): schemas and dispatcher stubs. Kernels: cpu/, cuda/; the
// portable composition (portable/paste_masks.cpp) where implementation.h says so.
#include "model/ops/paste_masks.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "model/ops/implementation.h"
#include "model/ops/portable/portable.h"

namespace mrcnn::ops {

at::Tensor paste_masks_in_image(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                                int64_t im_w, int64_t padding) {
  if (use_portable(masks.device().type())) {
    return portable::paste_masks_in_image(masks, boxes, im_h, im_w, padding);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::paste_masks_in_image", "")
                       .typed<decltype(paste_masks_in_image)>();
  return op.call(masks, boxes, im_h, im_w, padding);
}

at::Tensor paste_masks_in_image_binary(const at::Tensor& masks, const at::Tensor& boxes,
                                       int64_t im_h, int64_t im_w, int64_t padding,
                                       double threshold) {
  if (use_portable(masks.device().type())) {
    return portable::paste_masks_in_image_binary(masks, boxes, im_h, im_w, padding, threshold);
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::paste_masks_in_image_binary", "")
                       .typed<decltype(paste_masks_in_image_binary)>();
  return op.call(masks, boxes, im_h, im_w, padding, threshold);
}

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def(
      "paste_masks_in_image(Tensor masks, Tensor boxes, int im_h, int im_w, int padding=1) "
      "-> Tensor");
  m.def(
      "paste_masks_in_image_binary(Tensor masks, Tensor boxes, int im_h, int im_w, "
      "int padding=1, float threshold=0.5) -> Tensor");
}

}  // namespace mrcnn::ops
