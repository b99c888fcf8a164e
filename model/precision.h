// Which dtype a computation runs in. The network computes in the dtype of its parameters
// (float32; float64 for reference checks), and under autocast its layers' outputs come in a
// reduced precision (bfloat16, float16); box arithmetic, proposals and losses never run in a
// reduced precision.
#pragma once

#include <ATen/core/Tensor.h>

namespace mrcnn::model {

// t's own dtype when it is float32 or float64, float32 otherwise.
inline at::ScalarType full_precision_type(const at::Tensor& t) {
  const at::ScalarType s = t.scalar_type();
  return s == at::kDouble ? at::kDouble : at::kFloat;
}

// t in full_precision_type(t) (t itself when it already is).
inline at::Tensor full_precision(const at::Tensor& t) { return t.to(full_precision_type(t)); }

}  // namespace mrcnn::model
