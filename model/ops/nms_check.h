// Argument checks of mrcnn::nms and mrcnn::batched_nms shared by every implementation (cpu/,
// cuda/, portable/; internal header): shapes and dtypes, one message on every device. Each kernel
// checks its own device first.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace mrcnn::ops::detail {

// boxes [K, 4], scores [K], one dtype.
inline void check_nms_shapes(const at::Tensor& boxes, const at::Tensor& scores, const char* op) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op, ": boxes must be [K, 4], got ",
              boxes.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), op,
              ": scores must be [K] with K = ", boxes.size(0), ", got ", scores.sizes());
  TORCH_CHECK(boxes.scalar_type() == scores.scalar_type(), op,
              ": boxes and scores must have the same dtype, got ", boxes.scalar_type(), " and ",
              scores.scalar_type());
}

}  // namespace mrcnn::ops::detail
