#include "benchmark/run/train_command.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "benchmark/run/coco_parts.h"
#include "benchmark/run/system_config.h"
#include "benchmark/train/checkpoint.h"
#include "eval/coco.h"
#include "logging/console.h"
#include "logging/keys.h"
#include "model/weights.h"

namespace mrcnn::run {
namespace {

namespace fs = std::filesystem;
using logging::Json;
namespace key = logging::key;

constexpr const char* kUsage = R"(usage: mlperf-maskrcnn train [--system FILE] [options]

Runs one timed, seeded MLPerf Mask R-CNN training run as the system file describes it.
Several ranks (launch.nodes x launch.ranks_per_node) are started by mpirun, one process each
(run_scripts/run_and_time.sh does that from the system file).

options:
  --system FILE     system configuration (default: systems/cpu-dev.json)
  --set KEY=VALUE   override a configuration value, e.g. --set run.max_epochs=3 (repeatable)
  --seed N          shorthand for --set run.seed=N
  --out DIR         shorthand for --set run.output_dir=DIR
  --deterministic   deterministic kernels where the fast ones are not (run.deterministic)
  --resume CKPT     continue from a checkpoint (not a timed MLPerf run; the log says so)
  --quiet           no :::MLLOG lines on stdout (the log file is still written)
  --no-progress     no progress bars
  --log-level L     trace | debug | info | warn | error

exit status: 0 targets reached, 3 targets not reached within run.max_epochs, 1 error during the
run, 2 bad configuration or arguments (before anything is written)
)";

struct Args {
  std::string system = "systems/cpu-dev.json";
  std::vector<std::string> overrides;
  std::string resume;
  bool quiet = false;
  bool progress = true;
  logging::Level level = logging::Level::kInfo;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError(s + " needs a value");
      return argv[++i];
    };
    if (s == "--system") a.system = value();
    else if (s == "--set") a.overrides.push_back(value());
    else if (s == "--seed") a.overrides.push_back("run.seed=" + value());
    else if (s == "--out") a.overrides.push_back("run.output_dir=\"" + value() + "\"");
    else if (s == "--deterministic") a.overrides.push_back("run.deterministic=true");
    else if (s == "--resume") a.resume = value();
    else if (s == "--quiet") a.quiet = true;
    else if (s == "--no-progress") a.progress = false;
    else if (s == "--log-level") a.level = logging::parse_level(value());
    else throw ConfigError("unknown argument '" + s + "' (see --help)");
  }
  return a;
}

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%dT%H%M%SZ", &tm);
  return b;
}

// The settings a checkpoint must agree with to resume (model, data, hyperparameters, seed).
std::string fingerprint(const SystemConfig& c) {
  Json f{{"model", c.resolved.value("model", Json::object())},
         {"data", c.resolved["data"]},
         {"hyperparameters", c.resolved["hyperparameters"]},
         {"seed", c.run.seed},
         {"world_size", c.launch.world_size()}};
  const std::string s = f.dump();
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(train::fnv1a64(s.data(), s.size())));
  return b;
}

void require_path(const fs::path& p, bool directory, const std::string& what) {
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (ec || !fs::exists(st))
    throw ConfigError(what + " " + p.string() + " does not exist" +
                      (what.starts_with("dataset") ? " (run_scripts/demo.sh generates the synthetic one)" : ""));
  if (directory != fs::is_directory(st))
    throw ConfigError(what + " " + p.string() + (directory ? " is not a directory" : " is not a file"));
}

}  // namespace

int train_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      std::printf("\ncommunicators built in: %s\n", dist::available_backends().c_str());
      return 0;
    }

  // ---- everything that can be wrong with the input is found before anything is written ------
  Args args;
  SystemConfig cfg;
  std::unique_ptr<train::Checkpoint> resume;
  try {
    args = parse_args(argc, argv);
    cfg = load_system_config(args.system, args.overrides);
    const fs::path root(cfg.run.data_dir);
    require_path(root, true, "dataset folder");
    for (const auto& split : {cfg.data.train_split, cfg.data.val_split}) {
      require_path(root / "annotations" / ("instances_" + split + ".json"), false, "dataset annotation file");
      require_path(root / split, true, "dataset image folder");
    }
    if (!cfg.run.initial_weights.empty()) require_path(cfg.run.initial_weights, false, "initial weights");
    if (cfg.run.device != "cpu") {
      const at::Device dev(cfg.run.device);  // throws on a malformed device string
      if (dev.is_cuda() && !at::hasCUDA())
        throw ConfigError(cfg.file + ": run.device: " + cfg.run.device + " requested, but no CUDA device is available");
      if (dev.type() == at::kHPU)
        throw ConfigError(cfg.file + ": run.device: hpu needs a LibTorch built with the Habana bridge; this one has none");
    }
    if (!args.resume.empty()) {
      resume = std::make_unique<train::Checkpoint>(train::load_checkpoint(args.resume));
      if (resume->config_fingerprint != fingerprint(cfg))
        throw ConfigError("checkpoint " + args.resume +
                          " was written with a different model, data, hyperparameters, seed or rank count");
      if (resume->epoch >= cfg.run.max_epochs)
        throw ConfigError("checkpoint " + args.resume + " finished epoch " + std::to_string(resume->epoch) +
                          "; run.max_epochs is " + std::to_string(cfg.run.max_epochs));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlperf-maskrcnn train: error: %s\n", logging::error_text(e).c_str());
    return 2;
  }

  auto comm = dist::make_communicator(cfg.launch.communicator);
  logging::setup_console({.rank = comm->rank(), .world_size = comm->world_size(), .level = args.level});
  if (comm->world_size() != cfg.launch.world_size()) {
    logging::error(logging::strprintf("launch asks for %lld ranks, but %d are running",
                                      static_cast<long long>(cfg.launch.world_size()), comm->world_size()));
    return 2;
  }
  at::set_num_threads(static_cast<int>(cfg.launch.threads_per_rank));
  if (cfg.run.deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);

  // ---- the run's folder ---------------------------------------------------------------------
  const fs::path run_dir =
      fs::path(cfg.run.output_dir) / (utc_stamp() + "-seed" + std::to_string(cfg.run.seed) + (resume ? "-resumed" : ""));
  if (comm->is_main()) {
    fs::create_directories(run_dir);
    std::ofstream(run_dir / "config.json") << cfg.resolved.dump(2) << "\n";
    std::error_code ec;
    fs::remove(fs::path(cfg.run.output_dir) / "latest", ec);
    fs::create_directory_symlink(run_dir.filename(), fs::path(cfg.run.output_dir) / "latest", ec);
  }
  const fs::path log_path = run_dir / "mlperf_log.txt";
  logging::MLLogger mllog({.to_stdout = !args.quiet, .file_path = comm->is_main() ? log_path.string() : "",
                           .truncate_file = true, .rank = comm->rank()});

  // ---- init: submission info, seed, hyperparameters, the network --------------------------------
  log_submission(mllog, cfg.submission, cfg.run.cache_clear);
  mllog.log(key::kInitStart);
  const auto seed = static_cast<uint64_t>(cfg.run.seed);
  const LoggedHyperparameters hp = logged_hyperparameters(cfg);
  log_hyperparameters(mllog, cfg.run.seed, hp);
  if (resume)
    mllog.log("resumed_from_checkpoint", Json{{"file", args.resume}, {"epoch", resume->epoch}},
              Json{{"note", "a resumed run is not a timed MLPerf run"}});

  // "cuda" without an index: each rank takes the GPU of its index on the node.
  at::Device device(cfg.run.device);
  if (device.is_cuda() && !device.has_index())
    device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(comm->local_rank()));
  auto init_gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  model::MaskRCNN net(cfg.model, init_gen);
  if (!cfg.run.initial_weights.empty()) {
    const auto report = model::load_weights(*net, cfg.run.initial_weights, {.allow_missing = true});
    logging::info(logging::strprintf("initial weights: %zu tensors from %s, %zu initialized here",
                                     report.loaded.size(), cfg.run.initial_weights.c_str(), report.missing.size()));
  }
  net->to(device);
  std::vector<std::string> init_names;
  for (const auto& t : model::mlperf_initialized_tensors(cfg.model)) init_names.push_back(t.mlperf_name);
  log_weights_initialization(mllog, init_names);

  MaskRcnnModel model(net);
  train::Trainer trainer(model,
                         {.schedule = {.base_lr = cfg.hp.base_lr,
                                       .warmup_steps = cfg.hp.warmup_steps,
                                       .warmup_factor = cfg.hp.warmup_factor,
                                       .decay_steps = cfg.hp.decay_steps,
                                       .decay_factor = cfg.hp.decay_factor},
                          .sgd = {.momentum = cfg.hp.momentum,
                                  .weight_decay = cfg.hp.weight_decay,
                                  .bias_lr_factor = cfg.hp.bias_lr_factor,
                                  .bias_weight_decay = cfg.hp.bias_weight_decay},
                          .precision = train::parse_precision(cfg.run.precision),
                          .gradient_clip_norm = cfg.hp.gradient_clip_norm,
                          .seed = seed,
                          .device = device},
                         *comm);
  if (resume) {
    model.load_state_dict(resume->model);
    trainer.restore(resume->step, resume->optimizer, resume->loss_scale, resume->scaler_good_steps);
  }
  mllog.log(key::kInitStop);

  // ---- the timed run -------------------------------------------------------------------------------
  const fs::path root(cfg.run.data_dir);
  const int64_t per_rank = cfg.images_per_rank();
  const int rank = comm->rank(), world = comm->world_size();
  const bool progress = args.progress && comm->is_main();
  std::shared_ptr<data::CocoDataset> val_dataset;
  auto make_dataset = [&](const std::string& split, bool train) {
    auto o = data::CocoDatasetOptions::coco(root.string(), split, train);
    o.transform = cfg.data.transform;
    if (!train) o.transform.flip_probability = 0.0;
    o.progress = progress;
    return std::make_shared<data::CocoDataset>(o);
  };
  data::LoaderOptions loader{.num_threads = static_cast<int>(cfg.data.loader_threads),
                             .prefetch_batches = static_cast<int>(cfg.data.prefetch_batches),
                             .device = device,
                             .size_divisible = cfg.data.size_divisible};
  RunParts parts;
  parts.train_data = [&]() -> std::unique_ptr<DataSource> {
    auto ds = make_dataset(cfg.data.train_split, true);
    logging::info("train set: " + ds->stats().summary());
    if (ds->num_classes() != cfg.model.num_classes)
      throw std::runtime_error(root.string() + ": the training set has " + std::to_string(ds->num_classes() - 1) +
                               " categories, the model " + std::to_string(cfg.model.num_classes - 1) +
                               " (set model.num_classes)");
    return std::make_unique<CocoData>(ds,
                                      CocoDataOptions{.sampler = {.batch_size = per_rank,
                                                                  .shuffle = true,
                                                                  .group_by_aspect_ratio = cfg.data.group_by_aspect_ratio,
                                                                  .last_batch = data::LastBatch::kPad},
                                                      .loader = loader,
                                                      .seed = seed},
                                      rank, world);
  };
  parts.val_data = [&]() -> std::unique_ptr<DataSource> {
    val_dataset = make_dataset(cfg.data.val_split, false);
    return std::make_unique<CocoData>(val_dataset,
                                      CocoDataOptions{.sampler = {.batch_size = cfg.run.eval_images_per_batch,
                                                                  .shuffle = false,
                                                                  .group_by_aspect_ratio = true,
                                                                  .last_batch = data::LastBatch::kKeep},
                                                      .loader = loader,
                                                      .seed = seed},
                                      rank, world);
  };
  parts.scorer = [&]() -> std::unique_ptr<Scorer> {
    auto gt = std::make_shared<const eval::Dataset>(
        eval::load_dataset((root / "annotations" / ("instances_" + cfg.data.val_split + ".json")).string()));
    return std::make_unique<CocoScorer>(gt, val_dataset, static_cast<int>(cfg.run.eval_threads),
                                        cfg.data.transform.legacy_plus_one, *comm);
  };

  TimedRunOptions opts{.first_epoch = resume ? resume->epoch + 1 : 1,
                       .max_epochs = cfg.run.max_epochs,
                       .target_bbox = cfg.run.target_bbox,
                       .target_segm = cfg.run.target_segm,
                       .async_eval = cfg.run.async_eval,
                       .metrics_path = comm->is_main() ? (run_dir / "metrics.jsonl").string() : "",
                       .show_progress = progress};
  if (cfg.run.checkpoint_every_epoch && comm->is_main()) {
    fs::create_directories(run_dir / "checkpoints");
    opts.on_epoch_end = [&](int64_t epoch) {
      train::Checkpoint ck{.epoch = epoch,
                           .step = trainer.global_step(),
                           .seed = seed,
                           .loss_scale = trainer.scaler().scale(),
                           .scaler_good_steps = trainer.scaler().good_steps(),
                           .config_fingerprint = fingerprint(cfg),
                           .model = model.state_dict(),
                           .optimizer = trainer.optimizer_state()};
      train::save_checkpoint((run_dir / "checkpoints" / ("epoch_" + std::to_string(epoch) + ".safetensors")).string(), ck);
    };
  }

  TimedRun timed(mllog, model, trainer, std::move(parts), *comm, opts);
  RunResult result;
  try {
    result = timed.run();
  } catch (const std::exception& e) {
    logging::error("run aborted: " + logging::error_text(e));
    logging::info("MLPerf log: " + log_path.string());
    // The other ranks may be waiting in a collective for this one: end them all.
    if (comm->world_size() > 1) comm->abort(1);
    return 1;
  }
  if (comm->is_main()) {
    // After run_stop, outside the timed region: the trained weights, for eval and predict.
    model::save_weights(*net, (run_dir / "model.safetensors").string(),
                        {{"system", cfg.name}, {"seed", std::to_string(cfg.run.seed)},
                         {"steps", std::to_string(trainer.global_step())}});
    logging::info("MLPerf log: " + log_path.string());
    logging::info("metrics:    " + (run_dir / "metrics.jsonl").string());
    logging::info("weights:    " + (run_dir / "model.safetensors").string());
  }
  return result.success ? 0 : 3;
}

}  // namespace mrcnn::run
