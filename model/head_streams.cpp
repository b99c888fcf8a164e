#include "model/head_streams.h"

#if MRCNN_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <optional>
#endif

namespace mrcnn::model {

#if MRCNN_HAVE_CUDA
struct HeadStreams::Impl {
  c10::DeviceIndex device;
  std::array<std::optional<c10::cuda::CUDAStream>, 3> streams;
  std::array<bool, 3> used{};  // ran since the last join
};
#else
struct HeadStreams::Impl {};
#endif

HeadStreams::HeadStreams() = default;
HeadStreams::~HeadStreams() = default;

HeadStreams::HeadStreams(bool enabled, c10::Device device) {
#if MRCNN_HAVE_CUDA
  if (!enabled || !device.is_cuda()) return;
  impl_ = std::make_unique<Impl>();
  impl_->device = device.index();
  const c10::cuda::CUDAGuard on(device.index());
  for (auto& s : impl_->streams) s = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
#else
  (void)enabled, (void)device;
#endif
}

void HeadStreams::run(Head head, const std::vector<at::Tensor>& inputs, const std::function<void()>& fn) {
#if MRCNN_HAVE_CUDA
  if (impl_) {
    const auto k = static_cast<size_t>(head);
    const c10::cuda::CUDAStream side = *impl_->streams[k];
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(impl_->device));
    ready.block(side);
    for (const at::Tensor& t : inputs)
      if (t.defined() && t.is_cuda()) t.record_stream(side);
    impl_->used[k] = true;
    const c10::cuda::CUDAStreamGuard guard(side);
    fn();
    return;
  }
#else
  (void)head, (void)inputs;
#endif
  fn();
}

void HeadStreams::join(const std::vector<at::Tensor>& outputs) {
#if MRCNN_HAVE_CUDA
  if (!impl_) return;
  const c10::cuda::CUDAStream step = c10::cuda::getCurrentCUDAStream(impl_->device);
  for (size_t k = 0; k < impl_->streams.size(); ++k) {
    if (!impl_->used[k]) continue;
    at::cuda::CUDAEvent done;
    done.record(*impl_->streams[k]);
    done.block(step);
    impl_->used[k] = false;
  }
  for (const at::Tensor& t : outputs)
    if (t.defined() && t.is_cuda()) t.record_stream(step);
#else
  (void)outputs;
#endif
}

}  // namespace mrcnn::model
