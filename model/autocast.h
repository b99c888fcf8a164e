// Scoped mixed precision (autocast) for one device type: bfloat16 on the CPU, float16 on CUDA,
// the way torch.autocast(device_type) enables it in Python. Restores the previous state (enabled
// flag and dtype) on destruction and clears the cast cache when the outermost scope ends.
//
// Thread-safety: autocast state is thread-local; a guard must be destroyed on the thread that
// created it. Not copyable.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace mrcnn::model {

class AutocastGuard {
 public:
  // enabled == false makes the guard a no-op.
  AutocastGuard(bool enabled, c10::DeviceType device_type);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  // The lower precision used on a device type: bfloat16 on the CPU, float16 elsewhere.
  static c10::ScalarType lower_precision(c10::DeviceType device_type);

 private:
  bool enabled_;
  c10::DeviceType device_type_;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace mrcnn::model
