#include "model/ops/host_copy.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace mrcnn::ops {

at::Tensor copy_to_device_async(const at::Tensor& host, c10::Device device) {
  TORCH_CHECK(host.is_cpu(), "copy_to_device_async: expected a host tensor, got one on ", host.device());
  if (device.is_cpu()) return host;
  // Page-locked staging is CUDA's (LibTorch's pinned allocator belongs to the CUDA hooks); other
  // devices (hpu, xpu, mps) get a plain copy, which their bridges stage themselves.
  if (!device.is_cuda()) return host.to(device);
  // pin_memory() copies into a block of LibTorch's pinned allocator, which records the copy's
  // stream and reuses the block only after the copy has run.
  const at::Tensor pinned = host.is_pinned() ? host : host.contiguous().pin_memory();
  return pinned.to(device, /*non_blocking=*/true);
}

HostRead::HostRead(const at::Tensor& values) {
  if (!values.defined() || values.is_cpu()) {
    host_ = values;
    return;
  }
  if (!values.is_cuda()) {
    source_ = values;  // read by wait()
    return;
  }
  host_ = at::empty(values.sizes(), values.options().device(at::kCPU).pinned_memory(true));
  host_.copy_(values, /*non_blocking=*/true);
  const c10::Device device = values.device();
  done_.emplace(device.type());
  done_->record(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
}

at::Tensor HostRead::wait() {
  if (done_) {
    done_->synchronize();
    done_.reset();
  }
  if (source_.defined()) {
    host_ = source_.cpu();
    source_ = at::Tensor();
  }
  return host_;
}

}  // namespace mrcnn::ops
