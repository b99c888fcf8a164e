// Host tensors to a device, and device tensors to the host, without blocking the host.
//
// A copy to a GPU from pageable host memory waits until the device has run everything queued
// before it (LibTorch synchronizes the stream), which in a training step is a full stall. From
// page-locked memory the copy is queued on the current stream and the host goes on.
//
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <optional>

namespace mrcnn::ops {

// `host` (a CPU tensor; contiguous or not) on `device`: on a CUDA device copied through
// page-locked memory with non_blocking (the staging buffer is held by the allocator until the
// copy has run); on another device a plain copy; on the CPU the tensor itself. Throws c10::Error if `host` is not on the CPU.
at::Tensor copy_to_device_async(const at::Tensor& host, c10::Device device);

// A device tensor's values on the host, read in two halves: the constructor queues the copy (on a
// CUDA device into page-locked memory, with an event recorded after it on the current stream) and
// returns at once; wait() blocks until the copy has run (until then the host goes on queueing
// work) and returns the host tensor. A CPU tensor is its own read; another device's is read by
// wait(), as a plain copy. Thread-compatible: one thread waits.
class HostRead {
 public:
  HostRead() = default;
  explicit HostRead(const at::Tensor& values);
  // The values on the host (an undefined tensor for an undefined one). The same tensor on every call.
  at::Tensor wait();

 private:
  at::Tensor source_, host_;
  std::optional<c10::Event> done_;
};

}  // namespace mrcnn::ops
