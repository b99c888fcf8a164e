#include "benchmark/run/process_settings.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdlib>

#include "benchmark/run/assemble.h"
#include "benchmark/run/device_backend.h"
#include "benchmark/run/host_memory.h"
#include "logging/console.h"
#include "model/ops/implementation.h"

namespace mrcnn::run {

using config::ConfigError;

std::string cublas_workspace_for_determinism(const char* current) {
  if (current == nullptr || *current == '\0') return ":4096:8";
  const std::string v = current;
  if (v == ":4096:8" || v == ":16:8") return "";
  throw ConfigError("environment: CUBLAS_WORKSPACE_CONFIG=" + v +
                    ": run.deterministic on a CUDA device needs :4096:8 or :16:8 (cuBLAS is not deterministic "
                    "otherwise); unset it or set one of those");
}

void apply_launch_settings(const SystemConfig& c, int local_rank) {
  load_backend_library(c);  // the device's bridge (check_inputs has checked it registers the device)
  at::set_num_threads(static_cast<int>(c.launch.threads_per_rank));
  ops::set_implementation(c.run.ops);
  if (!apply_host_memory(host_memory_from_string(c.launch.host_memory)))
    logging::warn("launch.host_memory \"" + c.launch.host_memory +
                  "\" cannot be applied with this C library: freed host memory goes back to the system");
  const c10::Device device = device_of(c, local_rank);
  // float32 is IEEE float32 on every device. LibTorch lets cuDNN run float32 convolutions in TF32
  // (10-bit mantissas) on Ampere and newer GPUs by default: an fp32 run would not compute what its
  // precision names, nor agree with the CPU. (float16 runs convolve in float16 either way.)
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setAllowTF32CuBLAS(false);
  if (c.run.deterministic) {
    if (device.is_cuda()) {
      // Read by cuBLAS when it creates its handle: before the first kernel.
      if (const std::string v = cublas_workspace_for_determinism(std::getenv("CUBLAS_WORKSPACE_CONFIG")); !v.empty())
        ::setenv("CUBLAS_WORKSPACE_CONFIG", v.c_str(), /*overwrite=*/1);
    }
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  if (c.run.cudnn_benchmark) at::globalContext().setBenchmarkCuDNN(true);  // config refuses it with deterministic
  // Kernels and allocations without an explicit device go to the rank's own GPU.
  if (device.is_cuda()) c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
}

}  // namespace mrcnn::run
