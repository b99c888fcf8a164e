// One assembly step, from the typed system configuration to the options of every component, in
// the spirit of detectron2's from_config: the commands (train, eval, predict) ask here and never
// build a component's options themselves, so one system value means one thing everywhere.
//
//   SystemConfig ─► device, the network, dataset and loader options (train, validation),
//                   train::TrainerOptions, ScorerOptions, the communicator, the logged
//                   hyperparameters, and the COCO parts of the timed run
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

// The process settings, applied by every command before its first kernel:
// - launch.backend_library loaded (run/device_backend.h; check_inputs checks that it registers
//   run.device) and run.ops chosen for the custom ops (model/ops/implementation.h);
// - launch: LibTorch's intra-op threads (threads_per_rank) and what happens to freed host memory
//   (host_memory, run/host_memory.h; a warning where the C library cannot retain it);
// - run.deterministic: LibTorch's deterministic algorithms, cuDNN's deterministic kernels with its
//   autotuner off, and for a CUDA device cuBLAS's deterministic workspace
//   (CUBLAS_WORKSPACE_CONFIG, see cublas_workspace_for_determinism);
// - a CUDA device: the process's current GPU is the one device_of() gives the rank.
// Throws ConfigError when the backend library cannot be loaded, or when the environment holds a
// CUBLAS_WORKSPACE_CONFIG that cuBLAS does not make deterministic.
void apply_launch_settings(const SystemConfig& config, int local_rank = 0);

// The CUBLAS_WORKSPACE_CONFIG a deterministic CUDA run sets, given the environment's value
// (nullptr: unset): ":4096:8" when unset, "" (keep it) when it is one of the two values cuBLAS
// documents as deterministic (":4096:8", ":16:8"). Throws ConfigError on any other value.
std::string cublas_workspace_for_determinism(const char* current);

// Checks before anything is written that the inputs the configuration names exist (the dataset
// folder with both splits, the initial weights) and that the device can be used; throws
// ConfigError naming the file or key.
void check_inputs(const SystemConfig& config);

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
LoggedHyperparameters logged_hyperparameters(const SystemConfig& config);

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
