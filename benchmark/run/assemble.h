// One assembly step, from the typed system configuration to the options of every component, in
// the spirit of detectron2's from_config: the commands (train, eval, predict) ask here and never
// build a component's options themselves, so one system value means one thing everywhere.
//
//   SystemConfig ─► device, the network, dataset and loader options (train, validation),
//                   train::TrainerOptions, ScorerOptions, the communicator, and the COCO parts
//                   of the timed run
//
// The process's own settings are process_settings.h's; the log's hyperparameters are read from
// the configuration itself (init_log.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "benchmark/comm/communicator.h"
#include "benchmark/config/system_config.h"
#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/coco_layout.h"
#include "benchmark/run/coco_data.h"
#include "benchmark/run/coco_scorer.h"
#include "benchmark/run/init_log.h"
#include "benchmark/run/timed_run.h"
#include "benchmark/train/trainer.h"
#include "model/mask_rcnn.h"

namespace mrcnn::run {

using config::SystemConfig;

// run.device; "cuda" (or "xpu") without an index is the GPU of the rank's index on its node.
c10::Device device_of(const SystemConfig& config, int local_rank = 0);

// The dataset folder of the run (run.data_dir), or `data_dir` when a command names another.
data::CocoLayout coco_layout(const SystemConfig& config, const std::string& data_dir = "");

// A split read with the system's transforms: training (flips) or evaluation (none).
data::CocoDatasetOptions dataset_options(const SystemConfig& config, const data::CocoLayout& layout,
                                         const std::string& split, bool train, bool progress);
CocoDataOptions train_data_options(const SystemConfig& config, c10::Device device);
CocoDataOptions eval_data_options(const SystemConfig& config, c10::Device device);

train::TrainerOptions trainer_options(const SystemConfig& config);
ScorerOptions scorer_options(const SystemConfig& config);
std::unique_ptr<comm::Communicator> make_communicator(const SystemConfig& config);

// The settings a checkpoint must agree with to resume (model, data, hyperparameters, seed and
// rank count), as a hash.
std::string resume_fingerprint(const SystemConfig& config);

// The network of the configuration on `device`: initialised from the run seed, then the tensors
// of run.initial_weights (when set; may be partial).
model::MaskRCNN make_network(const SystemConfig& config, c10::Device device);
// The network of the configuration with the trained weights of `path` (a weights file or a
// training checkpoint), in evaluation mode on run.device.
model::MaskRCNN load_network(const SystemConfig& config, const std::string& path);

// The timed run's COCO parts: the training and validation data of this rank and the scorer,
// made after run_start as TimedRun asks.
RunParts coco_run_parts(const SystemConfig& config, comm::Communicator& comm, c10::Device device, bool progress);

}  // namespace mrcnn::run
