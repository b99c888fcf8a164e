// Scoped mixed precision (autocast) for one device type in the lower precision the options name
// (bfloat16 or float16), the way torch.autocast(device_type, dtype) enables it in Python. Restores the previous state (enabled
// flag and dtype) on destruction and clears the cast cache when the outermost scope ends.
//
// Thread-safety: autocast state is thread-local; a guard must be destroyed on the thread that
// created it. Not copyable.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "model/options.h"

namespace mrcnn::model {

class AutocastGuard {
 public:
  // Precision::kFloat32 makes the guard a no-op.
  AutocastGuard(Precision precision, c10::DeviceType device_type);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  c10::ScalarType dtype_;
  c10::DeviceType device_type_;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace mrcnn::model
