#include "benchmark/run/input_checks.h"

#include <string>

#include "benchmark/run/assemble.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/device_backend.h"

namespace mrcnn::run {

namespace {

// COCO 2017's 80 categories and the background: a configuration with these classes trains COCO
// (the GPU and Gaudi systems); one with fewer the synthetic set of shapes (the CPU system).
constexpr int kCocoClasses = 81;

// What to do about a missing dataset, as fits what the configuration trains.
std::string missing_data_hint(const config::SystemConfig& c) {
  if (c.model_section.num_classes == kCocoClasses)
    return " (this system trains on COCO 2017: point run.data_dir at its folder, with annotations/, train2017/ and "
           "val2017/, through train --data DIR, MRCNN_DATA_DIR or run_and_time.sh's DATADIR, and check it with "
           "'mlperf-maskrcnn data verify DIR')";
  return " (this system trains on the synthetic dataset: 'mlperf-maskrcnn synth --out DIR' generates it, and "
         "run_scripts/demo.sh does so in data/synthetic)";
}

}  // namespace

void check_inputs(const config::SystemConfig& c) {
  const data::CocoLayout layout = coco_layout(c);
  const std::string hint = missing_data_hint(c);
  require_path(layout.root.string(), true, "dataset folder", hint);
  for (const auto& split : {c.data.train_split, c.data.val_split}) {
    require_path(layout.annotation_file(split).string(), false, "dataset annotation file", hint);
    require_path(layout.image_dir(split).string(), true, "dataset image folder", hint);
  }
  if (!c.run.initial_weights.empty()) require_path(c.run.initial_weights, false, "initial weights");
  require_device_backend(c);
}

}  // namespace mrcnn::run
