#include "benchmark/train/sync_counter.h"

#if MRCNN_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace mrcnn::train {

void SyncCounter::Handler::process(const c10::Warning& warning) {
  if (warning.msg().find(kSyncWarning) != std::string::npos) {
    ++count;
    return;
  }
  if (previous) previous->process(warning);
}

SyncCounter::SyncCounter() {
  previous_ = c10::WarningUtils::get_warning_handler();
  handler_.previous = previous_;
  c10::WarningUtils::set_warning_handler(&handler_);
#if MRCNN_HAVE_CUDA
  if (c10::cuda::device_count() > 0) {
    auto& state = c10::cuda::warning_state();
    previous_mode_ = static_cast<int>(state.get_sync_debug_mode());
    state.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
    watching_cuda_ = true;
  }
#endif
}

SyncCounter::~SyncCounter() {
#if MRCNN_HAVE_CUDA
  if (watching_cuda_)
    c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(previous_mode_));
#endif
  c10::WarningUtils::set_warning_handler(previous_);
}

}  // namespace mrcnn::train
