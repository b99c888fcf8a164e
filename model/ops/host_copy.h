// Host tensors to a device without blocking the host.
//
// A copy to a GPU from pageable host memory waits until the device has run everything queued
// before it (LibTorch synchronizes the stream), which in a training step is a full stall. From
// page-locked memory the copy is queued on the current stream and the host goes on.
//
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace mrcnn::ops {

// `host` (a CPU tensor; contiguous or not) on `device`: on a CUDA device copied through
// page-locked memory with non_blocking (the staging buffer is held by the allocator until the
// copy has run); on another device a plain copy; on the CPU the tensor itself. Throws c10::Error if `host` is not on the CPU.
at::Tensor copy_to_device_async(const at::Tensor& host, c10::Device device);

}  // namespace mrcnn::ops
