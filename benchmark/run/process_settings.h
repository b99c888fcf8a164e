// The settings of the process a command runs in, applied before its first kernel: LibTorch's
// threads and determinism, TF32 off, the custom ops' implementation, the device's backend library,
// the rank's current GPU, what happens to freed host memory.
//
// Thread-safety: call once, from the main thread, before any other thread uses LibTorch.
#pragma once

#include <string>

#include "benchmark/config/system_config.h"

namespace mrcnn::run {

using config::SystemConfig;

// The process settings, applied by every command before its first kernel:
// - launch.backend_library loaded (run/device_backend.h; check_inputs checks that it registers
//   run.device) and run.ops chosen for the custom ops (model/ops/implementation.h);
// - launch: LibTorch's intra-op threads (threads_per_rank) and what happens to freed host memory
//   (host_memory, run/host_memory.h; a warning where the C library cannot retain it);
// - run.deterministic: LibTorch's deterministic algorithms, cuDNN's deterministic kernels with its
//   autotuner off, and for a CUDA device cuBLAS's deterministic workspace
//   (CUBLAS_WORKSPACE_CONFIG, see cublas_workspace_for_determinism);
// - a CUDA device: the process's current GPU is the one device_of() gives the rank.
// Throws ConfigError when the backend library cannot be loaded, or when the environment holds a
// CUBLAS_WORKSPACE_CONFIG that cuBLAS does not make deterministic.
void apply_launch_settings(const SystemConfig& config, int local_rank = 0);

// The CUBLAS_WORKSPACE_CONFIG a deterministic CUDA run sets, given the environment's value
// (nullptr: unset): ":4096:8" when unset, "" (keep it) when it is one of the two values cuBLAS
// documents as deterministic (":4096:8", ":16:8"). Throws ConfigError on any other value.
std::string cublas_workspace_for_determinism(const char* current);

}  // namespace mrcnn::run
