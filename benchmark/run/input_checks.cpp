#include "benchmark/run/input_checks.h"

#include <string>

#include "benchmark/run/assemble.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/device_backend.h"

namespace mrcnn::run {

void check_inputs(const config::SystemConfig& c) {
  const data::CocoLayout layout = coco_layout(c);
  const std::string hint = " (run_scripts/demo.sh generates the synthetic one)";
  require_path(layout.root.string(), true, "dataset folder", hint);
  for (const auto& split : {c.data.train_split, c.data.val_split}) {
    require_path(layout.annotation_file(split).string(), false, "dataset annotation file", hint);
    require_path(layout.image_dir(split).string(), true, "dataset image folder", hint);
  }
  if (!c.run.initial_weights.empty()) require_path(c.run.initial_weights, false, "initial weights");
  require_device_backend(c);
}

}  // namespace mrcnn::run
