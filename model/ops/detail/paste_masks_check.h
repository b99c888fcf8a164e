// Internal helper of the mask-paste kernels (CPU and CUDA): shared argument checks.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>

namespace mrcnn::ops::detail {

inline void check_paste_inputs(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                               int64_t im_w, int64_t padding, const char* op) {
  TORCH_CHECK(masks.dim() == 3, op, ": masks must be [D, M, M], got ", masks.sizes());
  TORCH_CHECK(at::isFloatingType(masks.scalar_type()), op, ": masks must be floating point, got ",
              masks.scalar_type());
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && boxes.size(0) == masks.size(0), op,
              ": boxes must be [D, 4] with D = ", masks.size(0), ", got ", boxes.sizes());
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op, ": boxes must be floating point, got ",
              boxes.scalar_type());
  TORCH_CHECK(masks.device() == boxes.device(), op, ": masks and boxes must be on one device, got ",
              masks.device(), " and ", boxes.device());
  TORCH_CHECK(im_h >= 0 && im_w >= 0, op, ": image size must be >= 0, got ", im_h, "x", im_w);
  TORCH_CHECK(padding >= 0, op, ": padding must be >= 0, got ", padding);
  TORCH_CHECK(masks.size(0) == 0 || (masks.size(1) > 0 && masks.size(2) > 0), op,
              ": masks must not be empty, got ", masks.sizes());
}

}  // namespace mrcnn::ops::detail
