// The devices a run can name (run.device), one row each: the name and its LibTorch type, whether
// it takes an index, whether the project's native kernels can serve it, whether it computes in
// float64, and what gives a process its backend. Configuration checks, the backend loader and the
// ops read this one table.
//
// Native kernels: the CPU always; "cuda" only where libmrcnn_ops was built with its CUDA kernels
// on an NVIDIA LibTorch (a ROCm LibTorch also names its GPUs "cuda" and gets none):
// implementation.h's has_native_kernels() decides that at run time. Header-only: the
// configuration reads it without linking the ops.
#pragma once

#include <c10/core/DeviceType.h>

#include <iterator>
#include <string>
#include <string_view>

namespace mrcnn::ops {

struct DeviceKind {
  std::string_view name;     // run.device, or its type before ":N"
  c10::DeviceType type;
  bool indexed;              // "name:N" accepted
  bool native_kernels;       // the project's kernels may serve it (see above)
  bool float64;              // IEEE float64 on the device (else float32 there, or the host)
  std::string_view install;  // what to install where the process has no backend for it
};

inline constexpr DeviceKind kDevices[] = {
    {"cpu", c10::DeviceType::CPU, false, true, true, "nothing: every LibTorch has the CPU"},
    {"cuda", c10::DeviceType::CUDA, true, true, true, "use a LibTorch built with CUDA (NVIDIA) or ROCm (AMD)"},
    {"hpu", c10::DeviceType::HPU, true, false, false,
     "install Intel Gaudi's PyTorch bridge (habana_frameworks, SynapseAI) and set launch.backend_library to its "
     "libhabana_pytorch_plugin.so"},
    {"xpu", c10::DeviceType::XPU, true, false, false,
     "use a LibTorch built with XPU support (Intel's oneAPI), or set launch.backend_library to the library that "
     "registers it"},
    {"mps", c10::DeviceType::MPS, false, false, false, "use a LibTorch for macOS on Apple silicon, which has the MPS backend"},
};

// The row of a run.device value ("cuda", "cuda:1"), or null where it names none (an index on a
// device that takes none, or one that is not 1 to 4 digits).
inline const DeviceKind* device_kind(std::string_view device) {
  for (const DeviceKind& d : kDevices) {
    if (device == d.name) return &d;
    if (!d.indexed || device.size() <= d.name.size() + 1 || !device.starts_with(d.name) || device[d.name.size()] != ':')
      continue;
    const std::string_view index = device.substr(d.name.size() + 1);
    return index.size() <= 4 && index.find_first_not_of("0123456789") == std::string_view::npos ? &d : nullptr;
  }
  return nullptr;
}

// The row of a LibTorch device type, or null for one the harness does not run on.
inline const DeviceKind* device_kind(c10::DeviceType type) {
  for (const DeviceKind& d : kDevices)
    if (d.type == type) return &d;
  return nullptr;
}

// "\"cpu\", \"cuda\", \"cuda:N\", ... or \"mps\"": the accepted values, for error messages.
inline std::string device_names() {
  std::string out;
  constexpr size_t n = std::size(kDevices);
  for (size_t i = 0; i < n; ++i) {
    const std::string name(kDevices[i].name);
    out += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + ("\"" + name + "\"");
    if (kDevices[i].indexed) out += (i + 1 == n ? "" : ", ") + ("\"" + name + ":N\"");
  }
  return out;
}

}  // namespace mrcnn::ops
