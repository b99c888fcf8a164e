// Counts the host synchronizations LibTorch performs on CUDA while a SyncCounter is alive: each
// blocking device-to-host copy, .item(), stream or device synchronize, nonzero() and the like.
// It switches on LibTorch's sync debug mode (warn), under which every such call raises the
// warning "called a synchronizing CUDA operation", and counts those warnings in its own
// handler (other warnings go on to the previous handler). This is how the train-step benchmark
// reports syncs per step, the figure a host-sync-free step drives to zero.
//
// The handler is per thread: only synchronizations of the constructing thread are counted. On a
// build or machine without CUDA the debug mode does not exist and the count stays 0 (the
// counting itself still works: tests exercise it on the CPU). Not copyable; one per thread.
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <string_view>

namespace mrcnn::train {

class SyncCounter {
 public:
  SyncCounter();
  ~SyncCounter();
  SyncCounter(const SyncCounter&) = delete;
  SyncCounter& operator=(const SyncCounter&) = delete;

  int64_t count() const { return handler_.count; }
  void reset() { handler_.count = 0; }
  // Whether LibTorch's CUDA sync debug mode is on (a CUDA build with a device).
  bool watching_cuda() const { return watching_cuda_; }

  // The text of LibTorch's warning for a synchronizing call.
  static constexpr std::string_view kSyncWarning = "called a synchronizing CUDA operation";

 private:
  struct Handler : c10::WarningHandler {
    void process(const c10::Warning& warning) override;
    c10::WarningHandler* previous = nullptr;
    int64_t count = 0;
  };
  Handler handler_;
  c10::WarningHandler* previous_ = nullptr;
  bool watching_cuda_ = false;
  int previous_mode_ = 0;
};

}  // namespace mrcnn::train
