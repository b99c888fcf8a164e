// A system configuration: systems/<name>.json with command-line overrides, as one typed value.
// One file per system; its sections:
//
//   "system"          the MLPerf system description (the 33 fields system_desc_checker requires)
//   "submission"      org, division, status, platform (the submission_* log keys)
//   "launch"          nodes, ranks per node, threads and core binding per rank, communicator,
//                     network environment (EFA ...), extra mpirun and sbatch arguments, the
//                     collective timeout
//   "extends"         optional: a system file (relative to this one) whose sections this file
//                     amends, key by key (a multi-node variant names the one-node file)
//   "run"             device, precision, layout, seed, determinism, data and output folders,
//                     epoch budget, accuracy targets, evaluation and checkpoint settings
//   "data"            transforms (resize, flip, pixel encoding) and loader settings
//   "model"           ModelOptions (model/options_json.h); absent keys keep MLPerf's values
//   "hyperparameters" the global batch size in use and one hyperparameter set per global batch
//                     size, plus the settings shared by all of them
//
// Loading is one pipeline: read the file (and the files it extends); require its sections; apply the --set overrides (any
// key the schema knows, present in the file or not); read every section through its field list
// (system_config.cpp: one list per section names each key, its type, its range and whether it is
// required; the defaults are the structs' initializers below); validate across sections once;
// write the defaults back into `resolved`, so that config.json holds every value the run used
// and loads again as a system file. Keys nobody reads are errors, so a typo never passes
// silently. Errors are ConfigError with one line naming the file or the --set argument, and the
// key: "<file>: run.max_epochs: expected a value in [1, 100000], got 0".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "benchmark/config/config_reader.h"
#include "benchmark/data/transforms.h"
#include "model/options.h"
#include "model/ops/implementation.h"

namespace mrcnn::config {

struct SubmissionInfo {
  std::string benchmark = "maskrcnn";
  std::string org;
  std::string division;  // "closed" | "open"
  std::string status;    // "onprem" | "cloud" | "preview" | "research"
  std::string platform;  // e.g. "8xNVIDIA V100-SXM2-32GB"
};

struct LaunchSettings {
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;
  int64_t threads_per_rank = 2;       // intra-op threads of each rank (LibTorch starts with one)
  std::string cpu_binding = "none";   // none | core | socket: how mpirun binds ranks
  std::string communicator = "auto";  // local | mpi | tcp | nccl (run.device "cuda") | auto
  std::map<std::string, std::string> env;  // exported to every rank (e.g. EFA's FI_PROVIDER)
  std::vector<std::string> mpirun_args;
  std::vector<std::string> sbatch_args;    // extra #SBATCH lines (partition, account, gres)
  // A folder holding NCCL's network plugin (libnccl-net.so, e.g. aws-ofi-nccl for EFA): put
  // first on every rank's library path, and required to exist when the ranks are started.
  std::string nccl_net_plugin_dir;
  // A shared library loaded (RTLD_GLOBAL) when a rank starts, before the device is used: the
  // vendor's LibTorch bridge that registers run.device (Gaudi: Intel's libhabana_pytorch_plugin.so,
  // which registers "hpu"). "" loads nothing.
  std::string backend_library;
  // A collective that waits longer than this for the other ranks ends its rank (and so the job):
  // a hung or dead peer must not hold the others forever.
  double collective_timeout_s = 900;
  // Several ranks: reduce gradient buckets while the backward pass runs (false: after it).
  bool overlap_allreduce = true;
  // retain | system: whether host memory a rank frees stays in it for the next step's tensors
  // (run/host_memory.h: no page faults refilling them every step; peak RSS stays at its mark).
  std::string host_memory = "retain";
  // The network between nodes, Gbit/s a node (0: not given): a figure for `forecast`, which the
  // MLPerf description's free-text host_networking gives only in words. The run does not use it.
  double network_gbps = 0;

  int64_t world_size() const { return nodes * ranks_per_node; }
};

struct RunSettings {
  // cpu | cuda | cuda:N (NVIDIA, or AMD under a ROCm LibTorch) | hpu | hpu:N | xpu | xpu:N | mps
  std::string device = "cpu";
  // The custom ops (model/ops/implementation.h): native kernels, portable ATen compositions, or
  // auto (native where the device has them: the CPU, NVIDIA GPUs; portable elsewhere). Parsed
  // here, typed after.
  ops::Implementation ops = ops::Implementation::kAuto;
  // fp32 | bf16 (CPU, HPU: autocast bfloat16) | fp16 (CUDA: autocast float16 with loss scaling)
  model::Precision precision = model::Precision::kFloat32;
  bool channels_last = false;
  int64_t seed = 0;                // MLPerf wants a different seed for every run (see --seed)
  bool deterministic = false;      // deterministic kernels where the fast ones are not
  std::string data_dir;            // a COCO folder (CocoLayout): annotations/, train2017/, val2017/
  std::string output_dir;          // MLPerf log, metrics, checkpoints, plots
  int64_t max_epochs = 20;
  // A measurement for `forecast`, not a result: every epoch ends after this many steps (0: whole
  // epochs), each still evaluated on the whole validation set so that the pauses are real. Such a
  // run never converges (its run_stop says aborted, whatever it scores).
  int64_t max_steps_per_epoch = 0;
  double target_bbox = 0.377;      // 0: stop at the first score (tests)
  double target_segm = 0.339;
  bool async_eval = true;
  int64_t eval_threads = 1;        // worker threads of the COCO scorer
  int64_t eval_images_per_batch = 2;  // per rank
  bool checkpoint_every_epoch = false;
  std::string initial_weights;     // safetensors to start from ("" = from scratch); may be partial
  bool cache_clear = false;        // drop the page cache before the run where permitted (logged: done or not)
  // Steps between reads of the step results (losses, the float16 skip, GPU faults) from the
  // device: 1 reads every step; N keeps N steps' on the device and reads them in one copy, a
  // step without a host synchronization (train::TrainerOptions::results_every).
  int64_t results_every_steps = 1;
  // CUDA: training replays the backbone, FPN and RPN head from CUDA graphs for up to this many
  // padded batch shapes (model::FeatureGraphs); 0: no graphs.
  int64_t cuda_graph_shapes = 0;
  // Before run_start, untimed (inside MLPerf's init): each of data.pad_to_shapes through the
  // network's forward and backward on synthetic batches of the rank's size (no dataset file read,
  // no update, no random stream of the run drawn from), capturing its CUDA graphs; and the mask
  // head at every RoI count its bucket lets a step meet. A device's per-shape work (graph
  // capture, cuDNN plans and benchmarking) is then done before the clock (run/warm_up.h).
  // Needs data.pad_to_shapes.
  bool warm_up = false;
  // CUDA: cuDNN times its algorithms for each new convolution shape and keeps the fastest
  // (LibTorch's benchmark mode). Worth it only where the shapes are few and warmed before the
  // clock (warm_up): each new shape is timed where it is first met. Not with deterministic.
  bool cudnn_benchmark = false;
};

struct DataSettings {
  data::TransformOptions transform = data::TransformOptions::mlperf_train();  // training
  std::string train_split = "train2017";
  std::string val_split = "val2017";
  // Where the training split's annotations are read from: "index", the binary index that
  // `mlperf-maskrcnn data prepare` writes beside the JSON (refused when missing or stale); "json",
  // the JSON itself; "auto", the index when it is present and current, else the JSON (the log's
  // train_samples event says which).
  std::string annotation_source = "auto";
  int64_t loader_threads = 2;
  int64_t prefetch_batches = 4;
  bool group_by_aspect_ratio = true;
  int64_t size_divisible = 32;
  // Training batches padded to the smallest of these shapes that holds them ([height, width]
  // each, multiples of size_divisible; data::batch_shape): a run then meets only these shapes
  // (NVIDIA: [[800, 1344], [1344, 800]]). Empty: each batch padded to its own size.
  std::vector<data::ImageSize> pad_to_shapes;
};

struct Hyperparameters {
  int64_t global_batch_size = 0;
  // The set of by_global_batch_size[global_batch_size]:
  double base_lr = 0;
  int64_t warmup_steps = 0;
  double warmup_factor = 0;
  std::vector<int64_t> decay_steps;
  int64_t num_image_candidates = 1000;
  // Shared by every set:
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
  // The "model" section as read and checked (MLPerf's values where it is silent). The fields the
  // run owns (channels_last, precision, cuda_graph_shapes, rpn.post_nms_top_n_train) keep
  // ModelOptions' defaults here: model_options() maps the run's values in.
  model::ModelOptions model_section;
  Hyperparameters hp;
  Json resolved;    // every value after overrides and defaults (written beside the run's log)
  Origins origins;  // the keys set on the command line, and by which argument

  // Images each rank processes per step.
  int64_t images_per_rank() const { return hp.global_batch_size / launch.world_size(); }
  // "<file>" or "--set <assignment>": where the value at `path` came from, for error messages.
  std::string source(const std::string& path) const;
};

// Reads, overrides ("run.seed=5", "hyperparameters.global_batch_size=64") and validates.
SystemConfig load_system_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The network a run builds: the model section with the run's switches (run.channels_last,
// run.precision, run.cuda_graph_shapes) and hyperparameters.num_image_candidates mapped in, the
// one place the configuration's sections meet the model's options.
model::ModelOptions model_options(const SystemConfig& c);

// The value at a dotted path of the resolved configuration ("run.seed"), plus the derived
// "launch.world_size" and "name"; throws ConfigError naming the path when there is none.
Json resolved_value(const SystemConfig& config, const std::string& path);

// The closed division's rules (MLPerf Training 3.1 Mask R-CNN): one message per broken rule,
// saying the rule. Empty when the configuration may be submitted to the closed division. The
// official rules come from logging/closed_division.h's table, the one `check` runs on a log; the
// reference's fixed values (image sizes, weight decay, momentum, the decay schedule, flips, the
// network) are config's own.
std::vector<std::string> closed_division_violations(const SystemConfig& config);

}  // namespace mrcnn::config
