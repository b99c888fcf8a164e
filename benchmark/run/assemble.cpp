#include "benchmark/run/assemble.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>

#include "benchmark/run/coco_results.h"
#include "benchmark/run/device_backend.h"
#include "benchmark/run/command_line.h"
#include "benchmark/run/launch_plan.h"
#include "benchmark/run/validation_split.h"
#include "benchmark/train/checkpoint.h"
#include "eval/coco.h"
#include "logging/console.h"
#include "model/seeding.h"
#include "model/weights.h"

namespace mrcnn::run {

namespace fs = std::filesystem;
using config::ConfigError;

c10::Device device_of(const SystemConfig& c, int local_rank) {
  c10::Device device(c.run.device);
  if ((device.is_cuda() || device.is_xpu()) && !device.has_index())
    device = c10::Device(device.type(), static_cast<c10::DeviceIndex>(accelerator_of(c, local_rank)));
  return device;
}

data::CocoLayout coco_layout(const SystemConfig& c, const std::string& data_dir) {
  return {data_dir.empty() ? fs::path(c.run.data_dir) : fs::path(data_dir)};
}

data::CocoDatasetOptions dataset_options(const SystemConfig& c, const data::CocoLayout& layout, const std::string& split,
                                         bool train, bool progress) {
  auto o = data::CocoDatasetOptions::coco(layout.root.string(), split, train);
  o.transform = c.data.transform;
  if (!train) o.transform.flip_probability = 0.0;
  if (train) o.source = c.data.annotation_source;  // only the training split is prepared
  o.progress = progress;
  return o;
}

namespace {

data::LoaderOptions loader_options(const SystemConfig& c, c10::Device device) {
  return {.num_threads = static_cast<int>(c.data.loader_threads),
          .prefetch_batches = static_cast<int>(c.data.prefetch_batches),
          .device = device,
          .size_divisible = c.data.size_divisible};
}

}  // namespace

// Training batches only are padded to data.pad_to_shapes: evaluation keeps each batch's own size,
// as the reference pads it.
CocoDataOptions train_data_options(const SystemConfig& c, c10::Device device) {
  CocoDataOptions o{.sampler = {.batch_size = c.images_per_rank(),
                                .shuffle = true,
                                .group_by_aspect_ratio = c.data.group_by_aspect_ratio,
                                .last_batch = data::LastBatch::kPad},
                    .loader = loader_options(c, device),
                    .seed = static_cast<uint64_t>(c.run.seed)};
  o.loader.pad_to_shapes = c.data.pad_to_shapes;
  return o;
}

CocoDataOptions eval_data_options(const SystemConfig& c, c10::Device device) {
  return {.sampler = {.batch_size = c.run.eval_images_per_batch,
                      .shuffle = false,
                      .group_by_aspect_ratio = true,
                      .last_batch = data::LastBatch::kKeep},
          .loader = loader_options(c, device),
          .seed = static_cast<uint64_t>(c.run.seed)};
}

train::TrainerOptions trainer_options(const SystemConfig& c) {
  const auto& h = c.hp;
  return {.schedule = {.base_lr = h.base_lr,
                       .warmup_steps = h.warmup_steps,
                       .warmup_factor = h.warmup_factor,
                       .decay_steps = h.decay_steps,
                       .decay_factor = h.decay_factor},
          .sgd = {.momentum = h.momentum,
                  .weight_decay = h.weight_decay,
                  .bias_lr_factor = h.bias_lr_factor,
                  .bias_weight_decay = h.bias_weight_decay},
          .precision = c.run.precision,
          .gradient_clip_norm = h.gradient_clip_norm,
          .seed = static_cast<uint64_t>(c.run.seed),
          .overlap_allreduce = c.launch.overlap_allreduce,
          .results_every = c.run.results_every_steps};
}

ScorerOptions scorer_options(const SystemConfig& c) {
  return {.eval_threads = static_cast<int>(c.run.eval_threads), .legacy_plus_one = c.data.transform.legacy_plus_one};
}

std::unique_ptr<comm::Communicator> make_communicator(const SystemConfig& c) {
  const int stride = accelerator_of(c, 1);  // local rank 1's accelerator: the stride between ranks
  return comm::make_communicator(c.launch.communicator, {.collective_timeout_s = c.launch.collective_timeout_s,
                                                         .device_stride = c.launch.ranks_per_node > 1 ? stride : 1});
}

std::string resume_fingerprint(const SystemConfig& c) {
  logging::Json data = c.resolved["data"];
  data.erase("annotation_source");  // the index and the JSON give the same batches
  // Unset, the same batches as before the key existed: checkpoints written then still resume.
  if (data.contains("pad_to_shapes") && data["pad_to_shapes"].empty()) data.erase("pad_to_shapes");
  const logging::Json f{{"model", c.resolved.value("model", config::Json::object())},
                        {"data", data},
                        {"hyperparameters", c.resolved["hyperparameters"]},
                        {"seed", c.run.seed},
                        {"world_size", c.launch.world_size()}};
  const std::string s = f.dump();
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(train::fnv1a64(s.data(), s.size())));
  return b;
}

model::MaskRCNN make_network(const SystemConfig& c, c10::Device device) {
  auto init_gen = at::make_generator<at::CPUGeneratorImpl>(seeding::init_seed(static_cast<uint64_t>(c.run.seed)));
  model::MaskRCNN net(config::model_options(c), init_gen);
  if (!c.run.initial_weights.empty()) {
    const auto report = model::load_weights(*net, c.run.initial_weights, {.allow_missing = true});
    logging::info(logging::strprintf("initial weights: %zu tensors from %s, %zu initialized here", report.loaded.size(),
                                     c.run.initial_weights.c_str(), report.missing.size()));
  }
  net->to(device);
  return net;
}

model::MaskRCNN load_network(const SystemConfig& c, const std::string& path) {
  model::MaskRCNN net(config::model_options(c));
  model::load_named_tensors(*net, train::network_tensors(path), {}, path);
  net->to(device_of(c));
  net->eval();
  return net;
}

RunParts coco_run_parts(const SystemConfig& c, comm::Communicator& comm, c10::Device device, bool progress) {
  const data::CocoLayout layout = coco_layout(c);
  const int rank = comm.rank(), world = comm.world_size();
  // One validation split for both val_data and the scorer, read by whichever TimedRun calls first.
  const std::shared_future<ValidationSplit> val =
      std::async(std::launch::deferred, [=, &c]() {
        return ValidationSplit::read(layout, c.data.val_split, dataset_options(c, layout, c.data.val_split, false, progress));
      }).share();
  RunParts parts;
  parts.train_data = [=, &c]() -> std::unique_ptr<DataSource> {
    auto ds = std::make_shared<const data::CocoDataset>(dataset_options(c, layout, c.data.train_split, true, progress));
    logging::info("train set: " + ds->stats().summary() + "; read from the " +
                  (ds->source().index ? "index" : "JSON") + " in " + std::to_string(ds->source().seconds) + " s");
    if (!ds->source().note.empty()) logging::info("train set: the JSON served: " + ds->source().note);
    check_training_set(*ds, layout.annotation_file(c.data.train_split).string(), layout.root.string(),
                       c.model_section.num_classes);
    return std::make_unique<CocoData>(ds, train_data_options(c, device), rank, world);
  };
  parts.val_data = [=, &c]() -> std::unique_ptr<DataSource> {
    const ValidationSplit& v = val.get();
    v.check_images();
    return std::make_unique<CocoData>(v.dataset, eval_data_options(c, device), rank, world);
  };
  parts.scorer = [=, &c, &comm]() -> std::unique_ptr<Scorer> {
    const ValidationSplit& v = val.get();
    v.check_objects();
    return std::make_unique<CocoScorer>(v.ground_truth, v.label_to_category, scorer_options(c), comm);
  };
  return parts;
}

}  // namespace mrcnn::run
