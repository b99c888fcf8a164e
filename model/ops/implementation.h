// Which implementation of the custom ops runs (`run.ops`): the native kernels (cpu/, cuda/) or the
// portable compositions of standard ATen operators (portable/), which run on any LibTorch device
// (an AMD or Intel GPU, Habana's HPU, Apple's MPS) with the native kernels' semantics.
//
//   native    the project's kernels; a device without one gets the dispatcher's error;
//   portable  the ATen compositions everywhere (also on the CPU: that is how they are tested);
//   auto      native where the device has a native kernel (the CPU; an NVIDIA GPU when the
//             library was built with its CUDA kernels), portable elsewhere.
//
// The choice is process-wide, like at::globalContext()'s determinism switch: the harness sets it
// once from the configuration before the model runs. Each public op (roi_align.h, nms.h, ...)
// asks use_portable() with the device of its input; the ops without a native kernel (box coder,
// matcher, sampler, anchors, box utilities) are ATen compositions already and serve every device.
//
// Thread-safety: set_implementation is meant for start-up (and tests); reading is lock-free.
#pragma once

#include <c10/core/DeviceType.h>

#include <string>
#include <string_view>

namespace mrcnn::ops {

enum class Implementation { kNative, kPortable, kAuto };

// "native" | "portable" | "auto"; throws std::invalid_argument naming the accepted values.
Implementation parse_implementation(std::string_view name);
const char* to_string(Implementation implementation);

// The process-wide choice (default kAuto).
void set_implementation(Implementation implementation);
Implementation implementation();

// Whether libmrcnn_ops holds a native kernel for tensors of `device` (the CPU always; CUDA when
// the library was built with its CUDA kernels and LibTorch runs on NVIDIA, not ROCm).
bool has_native_kernels(c10::DeviceType device);

// Whether an op on tensors of `device` runs its portable composition under the current choice.
// Under kNative on a device without native kernels it returns false: the dispatcher then names
// the op and the device it has no kernel for.
bool use_portable(c10::DeviceType device);

// Whether tensors of `device` can be float64 with IEEE arithmetic: the CPU and NVIDIA GPUs (ROCm
// GPUs report as CUDA). Apple's MPS and Habana's HPU have no float64, nor have most Intel GPUs
// (XPU): code that keeps a value in float64 on the device (the RPN's image bounds, the step's
// results, the gradient norm, the mask-target rasterizer) uses float32 there, or the host.
bool supports_float64(c10::DeviceType device);

// What `implementation` resolves to on `device`: "native" or "portable" (for logs and the
// fingerprint).
std::string resolved_implementation(Implementation implementation, c10::DeviceType device);

// Sets the choice for a scope and restores the previous one (tests, benchmarks).
class ImplementationGuard {
 public:
  explicit ImplementationGuard(Implementation implementation);
  ~ImplementationGuard();
  ImplementationGuard(const ImplementationGuard&) = delete;
  ImplementationGuard& operator=(const ImplementationGuard&) = delete;

 private:
  Implementation previous_;
};

}  // namespace mrcnn::ops
