#include "benchmark/run/commands.h"

#include <ATen/core/grad_mode.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "benchmark/comm/collective_watchdog.h"
#include "benchmark/run/assemble.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/input_checks.h"
#include "benchmark/run/mask_rcnn_model.h"
#include "benchmark/run/observers.h"
#include "benchmark/run/process_settings.h"
#include "benchmark/run/profile_window.h"
#include "benchmark/run/run_fingerprint.h"
#include "benchmark/run/run_folder.h"
#include "benchmark/run/stop_signal.h"
#include "benchmark/run/warm_up.h"
#include "benchmark/train/checkpoint.h"
#include "logging/console.h"
#include "logging/keys.h"
#include "logging/sha256.h"
#include "model/weights.h"

namespace mrcnn::run {
namespace {

namespace key = logging::key;

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn train [--system FILE] [options]

Runs one timed, seeded MLPerf Mask R-CNN training run as the system file describes it.
Several ranks (launch.nodes x launch.ranks_per_node), one process each, are started by
`mlperf-maskrcnn launch` (mpirun, a Slurm batch job or torchrun, from the system file).

options:
  --system FILE     system configuration (default: systems/cpu-dev.json)
  --set KEY=VALUE   override a configuration value, e.g. --set run.max_epochs=3 (repeatable)
  --seed N          shorthand for --set run.seed=N
  --data DIR        shorthand for --set run.data_dir=DIR (the COCO-format dataset folder)
  --out DIR         shorthand for --set run.output_dir=DIR
  --deterministic   deterministic kernels where the fast ones are not (run.deterministic; also
                    turns off model.backbone.fused_conv_relu, which cuDNN runs without it)
  --resume CKPT     continue from a checkpoint (not a timed MLPerf run; the log says so)
  --quiet           no :::MLLOG lines on stdout (the log file is still written)
  --no-progress     no progress bars
  --log-level L     trace | debug | info | warn | error
  --profile N[@K]   LibTorch's profiler over N steps from step K (default 5): profile_trace.json
                    (Chrome/Perfetto) and profile.json (per-stage table) in the run folder

SIGTERM or SIGINT stops the run after the current step or validation batch (run_stop "aborted",
checkpoints kept); a second signal exits at once.

exit status: 0 targets reached (or a run.max_steps_per_epoch measurement done), 3 targets not
reached within run.max_epochs, 1 error during the run, 2 bad configuration or arguments (before
anything is written) or data with nothing to train on or to evaluate (found when the data is first
read, right after run_start; run_stop "aborted"), 128+N stopped by signal N

examples:
  mlperf-maskrcnn train --system systems/cpu-dev.json --data data/synthetic --seed 1
  mlperf-maskrcnn train --system systems/aws-p5.48xlarge.json --data /data/coco2017 --out runs/p5
  mlperf-maskrcnn train --system systems/cpu-dev.json --set run.max_epochs=2 --profile 5@10
)";

// Everything the run needs from its command line, checked before anything is written.
struct TrainInputs {
  SystemConfig config;
  std::string resume_path;
  std::unique_ptr<train::Checkpoint> resume;
  bool quiet = false, progress = true;
  logging::Level level = logging::Level::kInfo;
  ProfileRequest profile;
};

TrainInputs read_inputs(int argc, char** argv) {
  CommandLine cl(argc, argv, {"--seed", "--data", "--out", "--resume", "--log-level", "--profile"},
                 {"--deterministic", "--quiet", "--no-progress"});
  if (cl.has("--seed")) cl.add_override("run.seed=" + cl.value("--seed"));
  if (cl.has("--data")) cl.add_override("run.data_dir=" + logging::Json(cl.value("--data")).dump());
  if (cl.has("--out")) cl.add_override("run.output_dir=\"" + cl.value("--out") + "\"");
  // cuDNN's fused bottlenecks ignore the deterministic setting: the flag takes them off (a system
  // file that sets both run.deterministic and the fused path is refused, naming the key).
  if (cl.flag("--deterministic")) {
    cl.add_override("run.deterministic=true");
    cl.add_override("model.backbone.fused_conv_relu=false");
  }
  if (!cl.positional().empty()) throw config::ConfigError("unexpected argument '" + cl.positional()[0] + "' (see --help)");
  TrainInputs in{.config = cl.system_config(),
                 .resume_path = cl.value("--resume"),
                 .quiet = cl.flag("--quiet"),
                 .progress = !cl.flag("--no-progress"),
                 .level = logging::parse_level(cl.value("--log-level", "info"))};
  if (cl.has("--profile")) in.profile = parse_profile_request(cl.value("--profile"));
  check_inputs(in.config);
  require_writable_folder(in.config.run.output_dir, in.config.source("run.output_dir") + ": run.output_dir");
  if (!in.resume_path.empty()) {
    require_file(in.resume_path, "checkpoint");
    in.resume = std::make_unique<train::Checkpoint>(train::load_checkpoint(in.resume_path));
    if (in.resume->config_fingerprint != resume_fingerprint(in.config))
      throw config::ConfigError("checkpoint " + in.resume_path +
                                " was written with a different model, data, hyperparameters, seed or rank count");
    if (in.resume->epoch >= in.config.run.max_epochs)
      throw config::ConfigError("checkpoint " + in.resume_path + " finished epoch " + std::to_string(in.resume->epoch) +
                                "; run.max_epochs is " + std::to_string(in.config.run.max_epochs));
  }
  return in;
}

// The MLPerf init phase's log before the network exists: submission, init_start, seed, hyperparameters.
void log_init(logging::MLLogger& mllog, const TrainInputs& in, bool cache_cleared) {
  const SystemConfig& cfg = in.config;
  log_submission(mllog, cfg.submission, cache_cleared);
  mllog.log(key::kInitStart);
  log_hyperparameters(mllog, cfg);
  if (in.resume)
    mllog.log(key::kResumedFromCheckpoint, logging::Json{{"file", in.resume_path}, {"epoch", in.resume->epoch}},
              logging::Json{{"note", "a resumed run is not a timed MLPerf run"}});
}

std::vector<std::string> initialized_tensor_names(const model::ModelOptions& options) {
  std::vector<std::string> names;
  for (const auto& t : model::mlperf_initialized_tensors(options)) names.push_back(t.mlperf_name);
  return names;
}

// The timed run with its observers (rank 0 keeps the metrics, shows progress and writes
// checkpoints). Returns the exit status: 0 targets reached, 3 not reached, 1 an error, 2 unusable
// data, 128 + N a stop signal N (run_stop "aborted" is logged in the last three cases).
int run_timed(const TrainInputs& in, logging::MLLogger& mllog, MaskRcnnModel& model, train::Trainer& trainer,
              comm::Communicator& comm, c10::Device device, const RunFolder& folder,
              FingerprintWriter* fingerprint) {
  const SystemConfig& cfg = in.config;
  std::unique_ptr<MetricsFile> metrics;
  ProgressDisplay progress;
  std::unique_ptr<CheckpointWriter> checkpoints;
  std::unique_ptr<ProfileWindow> profile;
  TimedRunOptions opts{.first_epoch = in.resume ? in.resume->epoch + 1 : 1, .max_epochs = cfg.run.max_epochs,
                       .max_steps_per_epoch = cfg.run.max_steps_per_epoch,
                       .target_bbox = cfg.run.target_bbox, .target_segm = cfg.run.target_segm,
                       .async_eval = cfg.run.async_eval};
  if (fingerprint) opts.observers.push_back(fingerprint);
  if (comm.is_main()) {
    metrics = std::make_unique<MetricsFile>(folder.metrics().string(), /*append=*/in.resume != nullptr);
    opts.observers.push_back(metrics.get());
    if (in.progress) opts.observers.push_back(&progress);
    if (cfg.run.checkpoint_every_epoch) {
      checkpoints = std::make_unique<CheckpointWriter>(folder.checkpoints().string(), model, trainer,
                                                       static_cast<uint64_t>(cfg.run.seed), resume_fingerprint(cfg));
      opts.observers.push_back(checkpoints.get());
    }
    if (in.profile.steps > 0) {
      profile = std::make_unique<ProfileWindow>(in.profile, folder.dir.string());
      opts.observers.push_back(profile.get());
    }
  }
  TimedRun timed(mllog, model, trainer, coco_run_parts(cfg, comm, device, in.progress && comm.is_main()), comm, opts);
  // A collective watchdog that ends this rank (a hung peer, a cut link under MPI) closes the log first.
  comm::set_last_words([&timed] { timed.close_log_aborted(); });
  struct Forget {
    ~Forget() { comm::set_last_words({}); }
  } forget;
  try {
    const bool success = timed.run().success;
    if (profile) profile->finish();  // the run ended inside the window: what was captured
    return success || cfg.run.max_steps_per_epoch > 0 ? 0 : 3;  // a measurement run ends as planned
  } catch (const StopRequested& e) {
    logging::error(logging::strprintf("%s after %lld steps: run_stop aborted, MLPerf log %s", e.what(),
                                      static_cast<long long>(trainer.global_step()), folder.log().c_str()));
    if (comm.world_size() > 1) comm.abort(e.exit_status());
    return e.exit_status();
  } catch (const DataError& e) {
    logging::error("run aborted, the data cannot be used: " + logging::error_text(e));
    if (comm.world_size() > 1) comm.abort(2);
    return 2;
  } catch (const std::exception& e) {
    logging::error("run aborted: " + logging::error_text(e));
    logging::info("MLPerf log: " + folder.log().string());
    if (comm.world_size() > 1) comm.abort(1);  // the other ranks may be waiting in a collective
    return 1;
  }
}

// Every rank must run the same binary with the same resolved configuration: each rank's hashes
// are gathered at start and compared with rank 0's. Returns "" when they agree, else one message
// naming every rank that differs and how (every rank gets the same answer and stops).
std::string ranks_disagree(comm::Communicator& comm, const SystemConfig& cfg) {
  const std::string config_hash = analysis::config_sha256(cfg.resolved);
  const std::string binary_hash = analysis::binary_fingerprint()["sha256"].get<std::string>();
  const std::vector<std::string> all = comm.allgather_bytes(config_hash + " " + binary_hash);
  std::string problems;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const bool config_differs = all[r].substr(0, all[r].find(' ')) != all[0].substr(0, all[0].find(' '));
    const bool binary_differs = all[r].substr(all[r].find(' ') + 1) != all[0].substr(all[0].find(' ') + 1);
    problems += std::string(problems.empty() ? "" : "; ") + "rank " + std::to_string(r) + " has a different " +
                (config_differs && binary_differs ? "configuration and binary"
                 : config_differs                 ? "configuration (resolved config sha256 " +
                                        all[r].substr(0, 12) + "... vs rank 0's " + all[0].substr(0, 12) + "...)"
                                                  : "binary (mlperf-maskrcnn sha256 differs from rank 0's)");
  }
  if (problems.empty()) return "";
  return "the ranks do not run the same thing: " + problems +
         " (every rank must run the same binary with the same system file and --set arguments)";
}

// Where every rank runs, on rank 0's console: "rank 1: host b (local rank 0 of 1)", what decides
// each rank's device and which ranks clear their node's page cache.
void log_placement(comm::Communicator& comm) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const auto all = comm.allgather_bytes(std::string(host) + " (local rank " + std::to_string(comm.local_rank()) +
                                        " of " + std::to_string(comm.local_size()) + ")");
  if (!comm.is_main()) return;
  std::string text = comm.backend() + " communicator, " + std::to_string(comm.world_size()) + " ranks:";
  for (size_t r = 0; r < all.size(); ++r) text += (r ? "; " : " ") + std::to_string(r) + " on " + all[r];
  logging::info(text);
}

// The ranks start from rank 0's weights, whatever each rank's initializer or weight file did.
void broadcast_weights(MaskRcnnModel& model, comm::Communicator& comm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors;
  for (auto& [name, t] : model.state_dict()) tensors.push_back(t);
  comm.broadcast(tensors, 0);
}

// run.cache_clear: the first rank of every node drops the page cache (so that no run starts with
// the dataset already in memory); true only when every node could.
bool clear_page_caches(comm::Communicator& comm, bool wanted) {
  bool done = false;
  if (wanted && comm.local_rank() == 0) {
    ::sync();
    std::ofstream drop("/proc/sys/vm/drop_caches");
    drop << "3\n";
    drop.flush();
    done = static_cast<bool>(drop);
    if (!done) logging::warn("run.cache_clear: the page cache cannot be dropped here (no permission): logged as false");
  }
  if (comm.world_size() == 1) return done;
  bool all = true;
  const auto flags = comm.allgather_bytes(comm.local_rank() == 0 ? (done ? "1" : "0") : "-");
  for (const auto& f : flags) all = all && f != "0";
  return wanted && all;
}

// The ranks meet and agree on the launch: 0, or the exit code of why they cannot (2: a malformed
// rank environment, a rank count other than the launch's, configurations that differ; 1: ranks
// that cannot meet). The console knows its rank from here on.
int meet_ranks(const TrainInputs& in, std::unique_ptr<comm::Communicator>& comm) {
  const SystemConfig& cfg = in.config;
  try {
    comm = make_communicator(cfg);
  } catch (const comm::CommunicatorConfigError& e) {
    return report_error("train", e, 2);
  } catch (const std::exception& e) {
    return report_error("train", e, 1);
  }
  logging::setup_console({.rank = comm->rank(), .world_size = comm->world_size(), .level = in.level});
  if (comm->world_size() != cfg.launch.world_size()) {
    logging::error(logging::strprintf("launch asks for %lld ranks, but %d are running",
                                      static_cast<long long>(cfg.launch.world_size()), comm->world_size()));
    return 2;
  }
  if (comm->world_size() > 1) {
    if (const std::string problem = ranks_disagree(*comm, cfg); !problem.empty()) {
      if (comm->is_main()) logging::error(problem);
      return 2;
    }
    log_placement(*comm);
  }
  return 0;
}

// Rank 0, after run_stop, outside the timed region: the trained weights (for eval and predict),
// and where the run's files are.
void save_outputs(const model::MaskRCNN& net, const SystemConfig& cfg, const RunFolder& folder, int64_t steps) {
  model::save_weights(*net, folder.weights().string(),
                      {{"system", cfg.name}, {"seed", std::to_string(cfg.run.seed)}, {"steps", std::to_string(steps)}});
  logging::info("MLPerf log: " + folder.log().string());
  logging::info("metrics:    " + folder.metrics().string());
  logging::info("weights:    " + folder.weights().string());
}

}  // namespace

int train_main(int argc, char** argv) {
  if (wants_help(argc, argv))
    return std::printf("%s\ncommunicators built in: %s\n", kUsage, comm::available_backends().c_str()), 0;
  TrainInputs in;
  try {
    in = read_inputs(argc, argv);
  } catch (const std::exception& e) {
    return report_error("train", e, 2);
  }
  const SystemConfig& cfg = in.config;
  std::unique_ptr<comm::Communicator> comm;
  if (const int code = meet_ranks(in, comm); code != 0) return code;
  StopSignals stop_signals;  // SIGTERM/SIGINT: stop at the next safe point
  apply_launch_settings(cfg, comm->local_rank());

  const bool main_rank = comm->is_main();
  if (main_rank && remove_stale_temporaries(cfg.run.output_dir) > 0)
    logging::info("removed temporary files that killed runs left in " + cfg.run.output_dir);
  const RunFolder folder = open_run_folder(cfg, in.resume != nullptr, main_rank);
  logging::MLLogger mllog({.to_stdout = !in.quiet, .file_path = main_rank ? folder.log().string() : "",
                           .truncate_file = true, .rank = comm->rank()});
  log_init(mllog, in, clear_page_caches(*comm, cfg.run.cache_clear));
  std::optional<FingerprintWriter> fingerprint;  // rank 0
  if (main_rank)
    fingerprint.emplace(cfg, comm->world_size(), comm->backend(), folder.fingerprint().string(),
                        folder.log().string(), mllog);
  const c10::Device device = device_of(cfg, comm->local_rank());
  model::MaskRCNN net = make_network(cfg, device);
  log_weights_initialization(mllog, initialized_tensor_names(config::model_options(cfg)));
  MaskRcnnModel model(net);
  int64_t trainable = 0;
  for (const auto& p : model.trainable_parameters()) trainable += p.tensor.numel();
  if (fingerprint) fingerprint->set_trainable_parameters(trainable);
  logging::info(logging::strprintf("network: %lld trainable parameters, %.1f MB of float32 gradients per step",
                                   static_cast<long long>(trainable), static_cast<double>(trainable) * 4 / 1e6));
  train::Trainer trainer(model, trainer_options(cfg), *comm);
  if (in.resume) {
    model.load_state_dict(in.resume->model);
    trainer.load_state(in.resume->trainer);
  }
  if (comm->world_size() > 1) broadcast_weights(model, *comm);
  if (cfg.run.warm_up) {
    const WarmUpPlan plan = warm_up_plan(cfg.data.pad_to_shapes, cfg.images_per_rank(), config::model_options(cfg));
    const WarmUpReport r = warm_up(net, plan, device);
    logging::Json shapes = logging::Json::array();
    for (const data::ImageSize& s : plan.shapes) shapes.push_back({s.height, s.width});
    mllog.log(key::kInitWarmUp, r.seconds,
              logging::Json{{"shapes", shapes}, {"batches", r.batches}, {"mask_head_rois", plan.mask_head_rois},
                   {"graphs_captured", r.graphs_captured}});
    if (main_rank)
      logging::info(logging::strprintf("warm-up before run_start: %zu shapes, %lld passes, the mask head at %lld RoI "
                                       "counts, %lld graphs captured, %.1f s",
                                       plan.shapes.size(), static_cast<long long>(r.batches),
                                       static_cast<long long>(r.mask_head_sizes),
                                       static_cast<long long>(r.graphs_captured), r.seconds));
  }
  mllog.log(key::kInitStop);

  const int status = run_timed(in, mllog, model, trainer, *comm, device, folder, fingerprint ? &*fingerprint : nullptr);
  if (status != 0 && status != 3) return status;
  if (main_rank) save_outputs(net, cfg, folder, trainer.global_step());
  // Every rank ends after rank 0 has written everything: a launcher that ends the job at the
  // first rank's non-zero exit (srun --kill-on-bad-exit, with 3 for targets not reached) would
  // otherwise stop rank 0 while it writes the weights. After it, the launcher's SIGTERM to the
  // ranks still tearing down (MPI_Finalize among it) when a first one has exited is ignored.
  if (comm->world_size() > 1) {
    comm->barrier();
    stop_signals.run_over();
  }
  return status;
}

}  // namespace mrcnn::run
