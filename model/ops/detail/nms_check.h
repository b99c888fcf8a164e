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

// batched_nms: idxs an integer tensor [K] on the boxes' device.
inline void check_batched_nms_idxs(const at::Tensor& boxes, const at::Tensor& idxs) {
  TORCH_CHECK(idxs.device() == boxes.device() && idxs.dim() == 1 &&
                  idxs.size(0) == boxes.size(0) && !at::isFloatingType(idxs.scalar_type()) &&
                  !at::isComplexType(idxs.scalar_type()) && idxs.scalar_type() != at::kBool,
              "mrcnn::batched_nms: idxs must be an integer tensor [K] with K = ", boxes.size(0),
              " on ", boxes.device(), ", got ", idxs.scalar_type(), " ", idxs.sizes(), " on ",
              idxs.device());
}

}  // namespace mrcnn::ops::detail
