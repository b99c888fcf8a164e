// The device a run asks for, made usable before anything is written: the vendor's LibTorch bridge
// loaded (launch.backend_library) and the device type checked to have a backend in this process.
//
// LibTorch knows every device type by name (c10::DeviceType), but a type can only hold tensors
// once a backend has registered its device guard: CUDA's when libtorch_cuda is loaded, Habana's
// HPU when Intel's PyTorch bridge (libhabana_pytorch_plugin.so) is, Intel's XPU and Apple's MPS in
// LibTorch builds made for them. Without one the first tensor on the device fails deep inside the
// model; here it is one ConfigError naming the key, the device and what to install.
//
// Thread-safety: called once, at start, before any other thread uses LibTorch.
#pragma once

#include <c10/core/DeviceType.h>

#include <string>

#include "benchmark/config/system_config.h"

namespace mrcnn::run {

// Loads `path` with dlopen(RTLD_NOW | RTLD_GLOBAL) (its static initializers register the backend).
// Throws ConfigError "<source>: launch.backend_library: <path>: <dlerror>" when it cannot be.
// Loading the same library twice is harmless (dlopen counts references).
void load_backend_library(const config::SystemConfig& config);

// Whether a backend for `type` is registered in this process (c10's device guard registry).
bool has_device_backend(c10::DeviceType type);

// What a user installs to get a backend for `type` (one clause, for error messages).
std::string backend_hint(c10::DeviceType type);

// load_backend_library, then throws ConfigError unless run.device has a backend (and, for CUDA,
// a visible GPU), and unless run.ops can run there ("native" needs the project's kernels).
void require_device_backend(const config::SystemConfig& config);

}  // namespace mrcnn::run
