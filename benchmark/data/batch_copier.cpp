#include "benchmark/data/batch_copier.h"

#include <optional>
#include <stdexcept>

#include "benchmark/data/batch.h"

#if MRCNN_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mrcnn::data {

struct BatchCopier::Impl {
  c10::Device device;
  std::optional<model::Batch> batch;
#if MRCNN_HAVE_CUDA
  std::optional<c10::cuda::CUDAStream> stream;  // the side stream, taken on first use
  at::cuda::CUDAEvent copied;                   // recorded after each copy on it
#endif
};

BatchCopier::BatchCopier(c10::Device device) : impl_(std::make_unique<Impl>(Impl{.device = device})) {}

BatchCopier::~BatchCopier() = default;

bool BatchCopier::in_flight() const { return impl_->batch.has_value(); }

void BatchCopier::start(const model::Batch& host) {
  if (impl_->batch) throw std::logic_error("BatchCopier::start: the previous batch was not taken");
#if MRCNN_HAVE_CUDA
  if (impl_->device.is_cuda()) {
    if (!impl_->stream) impl_->stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, impl_->device.index());
    const c10::cuda::CUDAStreamGuard guard(*impl_->stream);
    model::Batch copy = batch_to(host, impl_->device, /*non_blocking=*/true);
    impl_->copied.record(*impl_->stream);
    impl_->batch = std::move(copy);  // in flight only once the copy and its event are queued
    return;
  }
#endif
  // Off CUDA a blocking copy: nothing here keeps the host batch alive until another backend's
  // asynchronous copy has run.
  impl_->batch = batch_to(host, impl_->device, /*non_blocking=*/false);
}

model::Batch BatchCopier::finish() {
  if (!impl_->batch) throw std::logic_error("BatchCopier::finish: no batch was started");
  model::Batch out = std::move(*impl_->batch);
  impl_->batch.reset();
#if MRCNN_HAVE_CUDA
  if (impl_->device.is_cuda()) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(impl_->device.index());
    impl_->copied.block(current);
    // Allocated on the side stream, used on this one.
    for (const at::Tensor* t : {&out.images, &out.gt_boxes, &out.gt_labels})
      if (t->defined() && t->is_cuda()) t->record_stream(current);
  }
#endif
  return out;
}

}  // namespace mrcnn::data
