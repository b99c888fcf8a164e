// A system configuration: systems/<name>.json, with command-line overrides, read into plain
// structs and validated. One file per system; its sections:
//
//   "system"          the MLPerf system description (the 33 fields system_desc_checker requires)
//   "submission"      org, division, status, platform (the submission_* log keys)
//   "launch"          nodes, ranks per node, threads and core binding per rank, communicator,
//                     network environment (EFA ...), extra mpirun arguments
//   "run"             device, precision, layout, seed, determinism, data and output folders,
//                     epoch budget, accuracy targets, evaluation and checkpoint settings
//   "data"            transforms (resize, flip, pixel encoding) and loader settings
//   "model"           ModelOptions (model/options_json.h); absent keys keep MLPerf's values
//   "hyperparameters" the global batch size in use and one hyperparameter set per global batch
//                     size, plus the settings shared by all of them
//
// Every key is read with its type and range checked, and keys nobody reads are errors, so a typo
// never passes silently. Errors are ConfigError with one line: "<file>: <path>: <problem>".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "benchmark/data/transforms.h"
#include "benchmark/run/config_reader.h"
#include "benchmark/run/init_log.h"
#include "model/options.h"

namespace mrcnn::run {

struct LaunchSettings {
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;
  int64_t threads_per_rank = 2;       // intra-op threads of each rank (LibTorch starts with one)
  std::string cpu_binding = "none";   // none | core | socket: how run_and_time.sh has mpirun bind ranks
  std::string communicator = "auto"; // local | mpi | nccl (run.device "cuda") | auto
  std::map<std::string, std::string> env;  // exported to every rank (e.g. EFA's FI_PROVIDER)
  std::vector<std::string> mpirun_args;

  int64_t world_size() const { return nodes * ranks_per_node; }
};

struct RunSettings {
  std::string device = "cpu";      // cpu | cuda | cuda:N | hpu
  std::string precision = "fp32";  // fp32 | bf16 (CPU, HPU) | fp16 (CUDA, with loss scaling)
  bool channels_last = false;
  int64_t seed = 0;                // MLPerf wants a different seed for every run (see --seed)
  bool deterministic = false;      // deterministic kernels where the fast ones are not
  std::string data_dir;            // COCO layout: annotations/instances_*.json, train2017/, val2017/
  std::string output_dir;          // MLPerf log, metrics, checkpoints, plots
  int64_t max_epochs = 20;
  double target_bbox = 0.377;
  double target_segm = 0.339;
  bool async_eval = true;
  int64_t eval_threads = 1;        // worker threads of the COCO scorer
  int64_t eval_images_per_batch = 2;  // per rank
  bool checkpoint_every_epoch = false;
  std::string initial_weights;     // safetensors to start from ("" = from scratch); may be partial
  bool cache_clear = true;         // what the launcher did (logged as cache_clear)
};

struct DataSettings {
  data::TransformOptions transform = data::TransformOptions::mlperf_train();  // training
  std::string train_split = "train2017";
  std::string val_split = "val2017";
  int64_t loader_threads = 2;
  int64_t prefetch_batches = 4;
  bool group_by_aspect_ratio = true;
  int64_t size_divisible = 32;
};

struct Hyperparameters {
  int64_t global_batch_size = 0;
  double base_lr = 0;
  int64_t warmup_steps = 0;
  double warmup_factor = 0;
  std::vector<int64_t> decay_steps;
  int64_t num_image_candidates = 1000;
  double decay_factor = 0.1;
  double weight_decay = 1e-4;
  double momentum = 0.9;
  double bias_lr_factor = 2.0;
  double bias_weight_decay = 0.0;
  double gradient_clip_norm = 0.0;
  int64_t gradient_accumulation_steps = 1;
};

struct SystemConfig {
  std::string name;  // the file's stem: systems/cpu-dev.json -> "cpu-dev"
  std::string file;
  Json system_description;
  SubmissionInfo submission;
  LaunchSettings launch;
  RunSettings run;
  DataSettings data;
  model::ModelOptions model;
  Hyperparameters hp;
  Json resolved;  // the whole configuration after overrides (written beside the run's log)

  // Images each rank processes per step.
  int64_t images_per_rank() const { return hp.global_batch_size / launch.world_size(); }
};

// Reads, overrides ("run.seed=5", "hyperparameters.global_batch_size=64") and validates.
SystemConfig load_system_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The closed division's rules (MLPerf Training 3.1 Mask R-CNN): one message per broken rule,
// saying the rule. Empty when the configuration may be submitted to the closed division.
std::vector<std::string> closed_division_violations(const SystemConfig& config);

// The MLPerf log's hyperparameters of this configuration.
LoggedHyperparameters logged_hyperparameters(const SystemConfig& config);

}  // namespace mrcnn::run
