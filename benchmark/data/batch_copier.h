// Batches copied to a CUDA device on a side stream, so that the copy of the next batch runs while
// the current step's kernels do; the consumer's stream waits for a copy only where it takes the
// batch.
//
//   BatchCopier copier(device);
//   copier.start(host_batch);                 // queued on the side stream; returns at once
//   ...                                       // the current step's work
//   model::Batch batch = copier.finish();     // the current stream waits for that copy
//
// The host batch should be in pinned memory (data::BatchOptions::pin_memory); from pageable memory
// the copy is still correct but blocks the host. The device tensors are marked as used by the
// consumer's stream, so the allocator reuses their memory only after that stream is done with
// them. With a CPU device (or a build without CUDA kernels) start() is batch_to() on the spot.
//
// Thread-safety: one consumer thread.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "model/structures.h"

namespace mrcnn::data {

class BatchCopier {
 public:
  explicit BatchCopier(c10::Device device);
  ~BatchCopier();
  BatchCopier(const BatchCopier&) = delete;
  BatchCopier& operator=(const BatchCopier&) = delete;

  // Starts the copy of `host` (data::batch_to's fields). Throws std::logic_error if a copy is
  // already in flight.
  void start(const model::Batch& host);
  bool in_flight() const;
  // The batch last started, usable on the current stream. Throws std::logic_error if none.
  model::Batch finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrcnn::data
