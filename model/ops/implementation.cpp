// run.ops: the process-wide choice between native kernels and portable ATen compositions.
#include "model/ops/implementation.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <stdexcept>

#include "model/ops/devices.h"

namespace mrcnn::ops {
namespace {

std::atomic<Implementation> g_implementation{Implementation::kAuto};

}  // namespace

Implementation parse_implementation(std::string_view name) {
  if (name == "native") return Implementation::kNative;
  if (name == "portable") return Implementation::kPortable;
  if (name == "auto") return Implementation::kAuto;
  throw std::invalid_argument("expected one of \"native\", \"portable\", \"auto\", got \"" +
                              std::string(name) + "\"");
}

const char* to_string(Implementation implementation) {
  switch (implementation) {
    case Implementation::kNative: return "native";
    case Implementation::kPortable: return "portable";
    case Implementation::kAuto: return "auto";
  }
  return "auto";
}

void set_implementation(Implementation implementation) { g_implementation.store(implementation); }

Implementation implementation() { return g_implementation.load(std::memory_order_relaxed); }

bool has_native_kernels(c10::DeviceType device) {
  const DeviceKind* kind = device_kind(device);
  if (kind == nullptr || !kind->native_kernels) return false;
  if (device == c10::DeviceType::CPU) return true;
  // The CUDA kernels are registered when libmrcnn_ops was built with them (nvcc and a CUDA
  // LibTorch); a ROCm LibTorch also names its GPUs "cuda" but never gets them.
  static const bool cuda = [] {
    const auto op = c10::Dispatcher::singleton().findSchema({"mrcnn::roi_align", ""});
    return op.has_value() && op->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
  }();
  return cuda;
}

bool use_portable(c10::DeviceType device) {
  switch (implementation()) {
    case Implementation::kNative: return false;
    case Implementation::kPortable: return true;
    case Implementation::kAuto: return !has_native_kernels(device);
  }
  return false;
}

bool supports_float64(c10::DeviceType device) {
  const DeviceKind* kind = device_kind(device);
  return kind != nullptr && kind->float64;
}

std::string resolved_implementation(Implementation implementation, c10::DeviceType device) {
  switch (implementation) {
    case Implementation::kNative: return "native";
    case Implementation::kPortable: return "portable";
    case Implementation::kAuto: return has_native_kernels(device) ? "native" : "portable";
  }
  return "native";
}

ImplementationGuard::ImplementationGuard(Implementation implementation)
    : previous_(ops::implementation()) {
  set_implementation(implementation);
}

ImplementationGuard::~ImplementationGuard() { set_implementation(previous_); }

}  // namespace mrcnn::ops
