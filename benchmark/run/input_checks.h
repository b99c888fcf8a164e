// What a training run checks before it writes anything: that the inputs its configuration names
// exist and that its device can be used.
//
// Thread-safety: reads the file system only.
#pragma once

#include "benchmark/config/system_config.h"

namespace mrcnn::run {

// The dataset folder with both splits' annotation files and image folders, the initial weights,
// the device's backend; throws ConfigError naming the file or key.
void check_inputs(const config::SystemConfig& config);

}  // namespace mrcnn::run
