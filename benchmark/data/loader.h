// The threaded loader of one epoch: N worker threads build the epoch's batches (decode, transform,
// pad) ahead of the consumer, at most `prefetch_batches` ahead, and next() hands them over in the
// sampler's order whatever the thread count or timing. Each batch is the same for any number of
// threads: flips come from (seed, epoch, sample index), not from a shared generator.
//
//   BatchSampler sampler(groups, {.batch_size = 2, .last_batch = LastBatch::kPad}, rank, world);
//   for (int64_t epoch = 0; ...; ++epoch) {
//     Loader loader(dataset, sampler.epoch(seed, epoch), {seed, epoch}, {.num_threads = 2});
//     while (auto batch = loader.next()) train_step(*batch);
//   }
//
// A Loader starts working in its constructor, so the next epoch's Loader may be built before the
// current one is exhausted to keep the workers busy across the boundary.
//
// Errors: a worker's exception (a missing or corrupt image, named by file) is parked with its
// batch and rethrown by next() on the consumer's thread when that batch is due; batches before it
// are delivered normally, later ones are not loaded, and every later call rethrows the same error.
//
// Device: with a CUDA device, batches are assembled in pinned host memory and copied on a side
// stream (BatchCopier): next() hands over batch k, the current stream waiting for its copy, and
// starts the copy of batch k + 1 if a worker has finished it, so that it overlaps the caller's
// step. The metadata and polygons stay on the host (data::batch_to). That batch then counts as
// taken: one more batch may be loading ahead than prefetch_batches says.
//
// Lifetime and threads: the Loader shares ownership of the dataset. next() must be called from one
// thread at a time. The destructor stops the workers mid-epoch and joins them (each finishes at
// most the batch it is building); it never hangs on an unconsumed queue.
#pragma once

#include <c10/core/Device.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "benchmark/data/batch.h"
#include "benchmark/data/batch_copier.h"
#include "benchmark/data/dataset.h"
#include "model/structures.h"

namespace mrcnn::data {

struct LoaderOptions {
  // Worker threads. 0: no threads, next() loads each batch on the caller's thread.
  int num_threads = 2;
  // Batches loaded ahead of the consumer (ready or in progress), >= 1. Bounds host memory to
  // about prefetch_batches batches; at most min(num_threads, prefetch_batches) load at once.
  int prefetch_batches = 4;
  // Where next() delivers. CUDA: pinned host memory plus non-blocking copies.
  c10::Device device = c10::Device(c10::kCPU);
  // Padded height and width are multiples of this.
  int64_t size_divisible = 32;
  // Fixed shapes to pad each batch to (BatchOptions::shapes, batch_shape()); empty: each batch
  // padded to its own size. Each a multiple of size_divisible.
  std::vector<ImageSize> pad_to_shapes;
};

class Loader {
 public:
  // `batches`: this rank's batches of the epoch, each a list of dataset indices (BatchSampler).
  // Throws std::invalid_argument on bad options or an empty batch.
  Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<int64_t>> batches,
         EpochKey key, LoaderOptions options = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch in order, or std::nullopt after the last. Rethrows a worker's error.
  std::optional<model::Batch> next();

  int64_t num_batches() const { return static_cast<int64_t>(batches_.size()); }
  // Batches handed out so far (consumer's thread).
  int64_t delivered() const { return delivered_; }
  // Seconds next() spent waiting for a batch that was not ready yet (consumer's thread): the
  // time the consumer was starved by the data pipeline.
  double wait_seconds() const { return wait_seconds_; }

 private:
  struct Slot {
    model::Batch batch;
    std::exception_ptr error;
  };

  void worker_loop();
  // Batch k, taken from the workers (built here without them): waiting for it, or only if it is
  // finished already (else nullopt). Consumer's thread.
  std::optional<Slot> take(int64_t k, bool wait);
  std::string where(int64_t k) const;  // "data loader, epoch E, batch K of N: " for errors
  Slot build(int64_t k) const;

  // Constant after construction.
  const std::shared_ptr<const Dataset> dataset_;
  const std::vector<std::vector<int64_t>> batches_;
  const EpochKey key_;
  const LoaderOptions options_;
  const BatchOptions batch_options_;

  // Consumer's thread only.
  int64_t delivered_ = 0;
  double wait_seconds_ = 0.0;
  std::exception_ptr error_;             // sticky once a batch failed
  std::unique_ptr<BatchCopier> copier_;  // a non-CPU device only
  std::optional<Slot> ahead_;            // batch delivered_, taken but not yet handed over

  // State below is protected by mu_.
  std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a claim became possible, or stop
  std::condition_variable ready_cv_;  // consumer: a batch was finished
  int64_t next_claim_ = 0;            // next batch a worker will build
  int64_t consumed_ = 0;              // batches taken by the consumer (mirrors delivered_)
  bool failed_ = false;               // a batch failed: claim nothing more
  bool stop_ = false;                 // destructor: claim nothing more, exit
  std::map<int64_t, Slot> ready_;     // finished batches not yet taken

  std::vector<std::thread> workers_;
};

}  // namespace mrcnn::data
