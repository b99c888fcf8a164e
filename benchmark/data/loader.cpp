#include "benchmark/data/loader.h"

#include <chrono>
#include <stdexcept>
#include <string>

namespace mrcnn::data {

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<int64_t>> batches,
               EpochKey key, LoaderOptions options)
    : dataset_(std::move(dataset)),
      batches_(std::move(batches)),
      key_(key),
      options_(options),
      batch_options_{options.size_divisible, options.device.is_cuda(), options.pad_to_shapes} {
  if (!dataset_) throw std::invalid_argument("Loader: dataset is null");
  if (options_.num_threads < 0)
    throw std::invalid_argument("Loader: num_threads must be >= 0, got " + std::to_string(options_.num_threads));
  if (options_.prefetch_batches < 1)
    throw std::invalid_argument("Loader: prefetch_batches must be >= 1, got " +
                                std::to_string(options_.prefetch_batches));
  if (options_.size_divisible < 1)
    throw std::invalid_argument("Loader: size_divisible must be >= 1");
  try {
    validate_shapes(options_.pad_to_shapes, options_.size_divisible);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("Loader: ") + e.what());
  }
  for (size_t k = 0; k < batches_.size(); ++k)
    if (batches_[k].empty()) throw std::invalid_argument("Loader: batch " + std::to_string(k) + " is empty");
  if (!options_.device.is_cpu()) copier_ = std::make_unique<BatchCopier>(options_.device);
  workers_.reserve(static_cast<size_t>(options_.num_threads));
  for (int t = 0; t < options_.num_threads; ++t) workers_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// Counted from 1, as the MLPerf log counts epochs (the sampler's epoch e is the log's e + 1).
std::string Loader::where(int64_t k) const {
  return "data loader, epoch " + std::to_string(key_.epoch + 1) + ", batch " + std::to_string(k + 1) + " of " +
         std::to_string(batches_.size()) + ": ";
}

Loader::Slot Loader::build(int64_t k) const {
  Slot s;
  try {
    s.batch = load_batch(*dataset_, batches_[static_cast<size_t>(k)], key_, batch_options_);
  } catch (const std::exception& e) {
    s.error = std::make_exception_ptr(std::runtime_error(where(k) + e.what()));
  } catch (...) {
    s.error = std::make_exception_ptr(std::runtime_error(where(k) + "unknown error"));
  }
  return s;
}

void Loader::worker_loop() {
  const auto total = static_cast<int64_t>(batches_.size());
  for (;;) {
    int64_t k = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] {
        return stop_ || failed_ || next_claim_ >= total ||
               next_claim_ < consumed_ + options_.prefetch_batches;
      });
      if (stop_ || failed_ || next_claim_ >= total) return;
      k = next_claim_++;
    }
    Slot s = build(k);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.error) failed_ = true;
      ready_.emplace(k, std::move(s));
    }
    ready_cv_.notify_all();
    work_cv_.notify_all();  // a failure releases the other workers
  }
}

std::optional<Loader::Slot> Loader::take(int64_t k, bool wait) {
  if (workers_.empty()) return wait ? std::optional<Slot>(build(k)) : std::nullopt;
  std::optional<Slot> s;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = ready_.find(k);
    if (it == ready_.end()) {
      if (!wait) return std::nullopt;
      const auto t0 = std::chrono::steady_clock::now();
      ready_cv_.wait(lock, [&] { return ready_.count(k) != 0; });
      wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      it = ready_.find(k);
    }
    s = std::move(it->second);
    ready_.erase(it);
    consumed_ = k + 1;
  }
  work_cv_.notify_all();
  return s;
}

std::optional<model::Batch> Loader::next() {
  if (error_) std::rethrow_exception(error_);
  if (delivered_ >= num_batches()) return std::nullopt;
  // The batch stays in ahead_ until it is handed over: a copy that throws loses nothing, and the
  // next call starts it again.
  if (!ahead_) ahead_ = take(delivered_, /*wait=*/true);
  if (ahead_->error) {
    error_ = ahead_->error;
    std::rethrow_exception(error_);
  }
  model::Batch out;
  if (copier_) {
    if (!copier_->in_flight()) copier_->start(ahead_->batch);
    out = copier_->finish();
  } else {
    out = std::move(ahead_->batch);
  }
  ahead_.reset();
  ++delivered_;
  // On a device, the next batch's copy, if a worker has finished that batch, runs while the
  // caller computes on this one. If starting it fails, the next call starts it and reports why.
  if (copier_ && delivered_ < num_batches()) {
    ahead_ = take(delivered_, /*wait=*/false);
    if (ahead_ && !ahead_->error) {
      try {
        copier_->start(ahead_->batch);
      } catch (...) {
      }
    }
  }
  return out;
}

}  // namespace mrcnn::data
