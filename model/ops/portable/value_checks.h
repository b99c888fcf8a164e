// Value checks of the portable ops (internal header).
//
// On the CPU a bad value throws the native kernel's error (reading a value there costs nothing,
// and the op tests expect the same messages). On any other device reading it would stall the
// host, so the condition is OR-ed into the device's fault word (device_faults.h) as the CUDA
// kernels do, and the harness reports it where it reads the device anyway.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "model/ops/device_faults.h"

namespace mrcnn::ops::portable {

// `bad`: a bool tensor (any shape) marking the invalid elements. `message()` builds the CPU
// error from the index of the first bad element (flattened), called only when there is one.
template <typename Message>
void check_values(const at::Tensor& bad, DeviceFault fault, Message&& message) {
  if (bad.numel() == 0) return;
  if (bad.is_cpu()) {
    const at::Tensor where = bad.flatten().nonzero();
    if (where.numel() > 0) {
      const std::string text = std::forward<Message>(message)(where[0][0].item<int64_t>());
      TORCH_CHECK(false, text);
    }
    return;
  }
  device_fault_word(bad.device()).bitwise_or_(bad.any().to(at::kInt) * static_cast<int>(fault));
}

// Reduced-precision inputs are computed in float32 (the native ops' autocast islands).
inline at::ScalarType compute_dtype(at::ScalarType dtype) {
  return (dtype == at::kHalf || dtype == at::kBFloat16) ? at::kFloat : dtype;
}

}  // namespace mrcnn::ops::portable
