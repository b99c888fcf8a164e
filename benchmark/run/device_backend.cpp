#include "benchmark/run/device_backend.h"

#include <ATen/Context.h>
#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>

#include "model/ops/devices.h"
#include "model/ops/implementation.h"

namespace mrcnn::run {

using config::ConfigError;

void load_backend_library(const config::SystemConfig& c) {
  const std::string& path = c.launch.backend_library;
  if (path.empty()) return;
  if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* why = ::dlerror();
    throw ConfigError(c.source("launch.backend_library") + ": launch.backend_library: " + path +
                      ": cannot be loaded: " + (why ? why : "unknown dlopen error"));
  }
}

bool has_device_backend(c10::DeviceType type) {
  return type == c10::DeviceType::CPU || c10::impl::hasDeviceGuardImpl(type);
}

std::string backend_hint(c10::DeviceType type) {
  if (const ops::DeviceKind* kind = ops::device_kind(type)) return std::string(kind->install);
  return "use a LibTorch with a backend for it, or set launch.backend_library to the library that registers it";
}

void require_device_backend(const config::SystemConfig& c) {
  load_backend_library(c);
  const std::string where = c.source("run.device") + ": run.device: " + c.run.device;
  c10::DeviceType type = c10::DeviceType::CPU;
  try {
    type = c10::Device(c.run.device).type();
  } catch (const std::exception&) {
    throw ConfigError(where + ": not a LibTorch device name");
  }
  if (!has_device_backend(type)) {
    std::string msg = where + ": no backend for '" + c10::DeviceTypeName(type, true) +
                      "' is registered in this process; " + backend_hint(type);
    if (!c.launch.backend_library.empty())
      msg += " (launch.backend_library " + c.launch.backend_library + " was loaded but registered none)";
    throw ConfigError(msg);
  }
  if (type == c10::DeviceType::CUDA && !at::hasCUDA())
    throw ConfigError(where + " requested, but no CUDA device is available");
  if (type != c10::DeviceType::CPU) {
    const c10::Device device(c.run.device);
    const int64_t count = c10::impl::getDeviceGuardImpl(type)->deviceCount();
    const int64_t needed = device.has_index() ? device.index() + 1 : 1;
    if (count < needed)
      throw ConfigError(where + ": this process sees " + std::to_string(count) + " " +
                        c10::DeviceTypeName(type, true) + " device(s)" +
                        (device.has_index() ? ", not index " + std::to_string(device.index()) : ""));
  }
  if (c.run.ops == ops::Implementation::kNative && !ops::has_native_kernels(type))
    throw ConfigError(c.source("run.ops") + ": run.ops: \"native\": this build has no native kernels for " +
                      c.run.device + "; use \"portable\" (or \"auto\", which picks it)");
}

}  // namespace mrcnn::run
