#include "benchmark/run/system_config.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "model/options_json.h"

namespace mrcnn::run {
namespace {

constexpr Range kPositive{.min = 0, .min_exclusive = true};
constexpr Range kNonNegative{.min = 0};
constexpr Range kAtLeastOne{.min = 1};
constexpr Range kFraction{.min = 0, .max = 1};

LaunchSettings read_launch(ConfigReader r) {
  LaunchSettings l;
  r.ignore("comment");
  l.nodes = r.integer("nodes", kAtLeastOne);
  l.ranks_per_node = r.integer("ranks_per_node", kAtLeastOne);
  l.threads_per_rank = r.integer("threads_per_rank", {.min = 1, .max = 1024});
  l.cpu_binding = r.string_or("cpu_binding", "none", {"none", "core", "socket"});
  l.communicator = r.string_or("communicator", "auto", {"local", "mpi", "nccl", "auto"});
  if (r.has("env")) {
    const Json& env = r.raw("env");
    if (!env.is_object()) r.fail("env", "expected an object of NAME: \"value\"");
    for (const auto& [k, v] : env.items()) {
      if (!v.is_string()) r.fail("env." + k, "expected a string");
      l.env[k] = v.get<std::string>();
    }
  }
  if (r.has("mpirun_args")) {
    const Json& a = r.raw("mpirun_args");
    if (!a.is_array()) r.fail("mpirun_args", "expected a list of strings");
    for (const auto& v : a) {
      if (!v.is_string()) r.fail("mpirun_args", "expected a list of strings");
      l.mpirun_args.push_back(v.get<std::string>());
    }
  }
  r.finish();
  return l;
}

RunSettings read_run(ConfigReader r) {
  RunSettings s;
  r.ignore("comment");
  s.device = r.string("device");
  if (s.device != "cpu" && s.device != "cuda" && !s.device.starts_with("cuda:") && s.device != "hpu")
    r.fail("device", "expected \"cpu\", \"cuda\", \"cuda:N\" or \"hpu\", got \"" + s.device + "\"");
  s.precision = r.string("precision", {"fp32", "bf16", "fp16"});
  if (s.precision == "fp16" && !s.device.starts_with("cuda"))
    r.fail("precision", "fp16 (with loss scaling) is for CUDA devices; use bf16 on " + s.device);
  if (s.precision == "bf16" && s.device.starts_with("cuda"))
    r.fail("precision", "mixed precision on CUDA is fp16 (autocast float16 with loss scaling)");
  s.channels_last = r.boolean_or("channels_last", false);
  s.seed = r.integer("seed", {.min = 0, .max = 4294967295.0});
  s.deterministic = r.boolean_or("deterministic", false);
  s.data_dir = r.string("data_dir");
  s.output_dir = r.string("output_dir");
  s.max_epochs = r.integer("max_epochs", {.min = 1, .max = 100000});
  s.target_bbox = r.number_or("target_bbox", 0.377, kFraction);  // 0: stop at the first score (tests)
  s.target_segm = r.number_or("target_segm", 0.339, kFraction);
  s.async_eval = r.boolean_or("async_eval", true);
  s.eval_threads = r.integer_or("eval_threads", 1, {.min = 1, .max = 1024});
  s.eval_images_per_batch = r.integer_or("eval_images_per_batch", 2, kAtLeastOne);
  s.checkpoint_every_epoch = r.boolean_or("checkpoint_every_epoch", false);
  s.initial_weights = r.string_or("initial_weights", "");
  s.cache_clear = r.boolean_or("cache_clear", true);
  r.finish();
  return s;
}

DataSettings read_data(ConfigReader r) {
  DataSettings d;
  r.ignore("comment");
  auto& t = d.transform;
  t.min_size = r.integer_or("min_size", t.min_size, kAtLeastOne);
  t.max_size = r.integer_or("max_size", t.max_size, kNonNegative);
  t.flip_probability = r.number_or("flip_probability", t.flip_probability, kFraction);
  t.to_bgr255 = r.boolean_or("to_bgr255", t.to_bgr255);
  if (r.has("pixel_mean")) {
    const auto m = r.numbers("pixel_mean");
    if (m.size() != 3) r.fail("pixel_mean", "expected 3 numbers, one per channel");
    for (int c = 0; c < 3; ++c) t.pixel_mean[c] = static_cast<float>(m[c]);
  }
  if (r.has("pixel_std")) {
    const auto s = r.numbers("pixel_std", kPositive);
    if (s.size() != 3) r.fail("pixel_std", "expected 3 positive numbers, one per channel");
    for (int c = 0; c < 3; ++c) t.pixel_std[c] = static_cast<float>(s[c]);
  }
  t.legacy_plus_one = r.boolean_or("legacy_plus_one", t.legacy_plus_one);
  t.dct_downscale = r.boolean_or("dct_downscale", t.dct_downscale);
  d.train_split = r.string_or("train_split", d.train_split);
  d.val_split = r.string_or("val_split", d.val_split);
  d.loader_threads = r.integer_or("loader_threads", d.loader_threads, {.min = 0, .max = 1024});
  d.prefetch_batches = r.integer_or("prefetch_batches", d.prefetch_batches, kAtLeastOne);
  d.group_by_aspect_ratio = r.boolean_or("group_by_aspect_ratio", d.group_by_aspect_ratio);
  d.size_divisible = r.integer_or("size_divisible", d.size_divisible, kAtLeastOne);
  r.finish();
  try {
    t.validate();
  } catch (const std::exception& e) {
    throw ConfigError(r.file() + ": data: " + e.what());
  }
  return d;
}

Hyperparameters read_hyperparameters(ConfigReader r) {
  Hyperparameters h;
  r.ignore("comment");
  h.global_batch_size = r.integer("global_batch_size", kAtLeastOne);
  auto sets = r.object("by_global_batch_size");
  const std::string gbs = std::to_string(h.global_batch_size);
  if (!sets.has(gbs)) {
    std::string known;
    for (const auto& [k, v] : sets.raw_keys()) known += (known.empty() ? "" : ", ") + k;
    sets.fail(gbs, "no hyperparameter set for global_batch_size " + gbs + " (sets exist for: " + known + ")");
  }
  for (const auto& [k, v] : sets.raw_keys()) sets.ignore(k);  // other batch sizes are not used now
  auto s = sets.object(gbs);
  s.ignore("comment");
  h.base_lr = s.number("base_lr", kPositive);
  h.warmup_steps = s.integer("warmup_steps", kNonNegative);
  h.warmup_factor = s.number("warmup_factor", {.min = 0, .max = 1, .min_exclusive = true});
  h.decay_steps = s.integers("decay_steps", kNonNegative);
  for (size_t i = 1; i < h.decay_steps.size(); ++i)
    if (h.decay_steps[i] < h.decay_steps[i - 1]) s.fail("decay_steps", "expected increasing steps");
  h.num_image_candidates = s.integer("num_image_candidates", kAtLeastOne);
  s.finish();
  h.decay_factor = r.number_or("decay_factor", h.decay_factor, {.min = 0, .max = 1, .min_exclusive = true});
  h.weight_decay = r.number_or("weight_decay", h.weight_decay, kNonNegative);
  h.momentum = r.number_or("momentum", h.momentum, {.min = 0, .max = 0.999999});
  h.bias_lr_factor = r.number_or("bias_lr_factor", h.bias_lr_factor, kPositive);
  h.bias_weight_decay = r.number_or("bias_weight_decay", h.bias_weight_decay, kNonNegative);
  h.gradient_clip_norm = r.number_or("gradient_clip_norm", h.gradient_clip_norm, kNonNegative);
  h.gradient_accumulation_steps = r.integer_or("gradient_accumulation_steps", 1, kAtLeastOne);
  if (h.gradient_accumulation_steps != 1)
    r.fail("gradient_accumulation_steps", "only 1 is supported (the trainer updates after every batch)");
  r.finish();
  return h;
}

SubmissionInfo read_submission(ConfigReader r) {
  SubmissionInfo s;
  r.ignore("comment");
  s.benchmark = r.string_or("benchmark", "maskrcnn", {"maskrcnn"});
  s.org = r.string("org");
  if (s.org.empty()) r.fail("org", "must not be empty");
  s.division = r.string("division", {"closed", "open"});
  s.status = r.string("status", {"onprem", "cloud", "preview", "research"});
  s.platform = r.string("platform");
  if (s.platform.empty()) r.fail("platform", "must not be empty");
  r.finish();
  return s;
}

bool near_integer(double x) { return std::abs(std::nearbyint(x) - x) < 1e-5; }

}  // namespace

SystemConfig load_system_config(const std::string& path, const std::vector<std::string>& overrides) {
  SystemConfig c;
  c.file = path;
  c.name = std::filesystem::path(path).stem().string();
  c.resolved = read_json_file(path);
  for (const auto& o : overrides) apply_override(c.resolved, o, "--set");

  ConfigReader root(c.resolved, path);
  root.ignore("comment");
  c.system_description = root.raw("system");
  if (!c.system_description.is_object()) root.fail("system", "expected the MLPerf system description object");
  c.submission = read_submission(root.object("submission"));
  c.launch = read_launch(root.object("launch"));
  c.run = read_run(root.object("run"));
  c.data = read_data(root.object("data"));
  c.hp = read_hyperparameters(root.object("hyperparameters"));

  // The model: MLPerf's defaults, the file's "model" section, then the run-level switches.
  Json model_json = root.has("model") ? root.raw("model") : Json::object();
  if (model_json.is_object()) model_json.erase("comment");
  for (const char* owned : {"channels_last", "mixed_precision"})
    if (model_json.contains(owned))
      root.fail(std::string("model.") + owned, std::string("set by run.") +
                                                   (std::string(owned) == "channels_last" ? "channels_last" : "precision"));
  if (model_json.contains("rpn") && model_json["rpn"].contains("post_nms_top_n_train"))
    root.fail("model.rpn.post_nms_top_n_train", "set by hyperparameters num_image_candidates");
  try {
    c.model = model::model_options_from_json(nlohmann::json::parse(model_json.dump()), model::ModelOptions{}, "model");
    c.model.channels_last = c.run.channels_last;
    c.model.mixed_precision = c.run.precision != "fp32";
    c.model.rpn.post_nms_top_n_train = c.hp.num_image_candidates;
    c.model.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(path + ": " + e.what());
  }
  root.finish();

  // Cross-section consistency.
  const Json& sd = c.system_description;
  if (sd.contains("division") && sd["division"] != c.submission.division)
    throw ConfigError(path + ": system.division (" + sd["division"].dump() + ") differs from submission.division (\"" +
                      c.submission.division + "\")");
  if (c.launch.communicator == "nccl" && c.run.device != "cuda")
    throw ConfigError(path + ": launch.communicator \"nccl\" needs run.device \"cuda\" (each rank takes the GPU of "
                      "its index on the node), not \"" + c.run.device + "\"");
  const int64_t world = c.launch.world_size();
  if (c.hp.global_batch_size % world != 0)
    throw ConfigError(path + ": hyperparameters.global_batch_size " + std::to_string(c.hp.global_batch_size) +
                      " is not divisible by the " + std::to_string(world) + " ranks of launch");
  if (c.submission.division == "closed") {
    const auto v = closed_division_violations(c);
    if (!v.empty()) {
      std::string all;
      for (const auto& m : v) all += "\n  - " + m;
      throw ConfigError(path + ": not allowed in the closed division:" + all);
    }
  }
  return c;
}

std::vector<std::string> closed_division_violations(const SystemConfig& c) {
  std::vector<std::string> out;
  const auto& h = c.hp;
  auto fmt = [](double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  };
  if (!(near_integer(h.base_lr / 0.02) || (h.global_batch_size < 16 && near_integer(0.02 / h.base_lr))))
    out.push_back("opt_base_learning_rate " + fmt(h.base_lr) +
                  ": the learning rate must be 0.02*K for an integer K (or 0.02/K when the global batch size is below 16)");
  if (h.decay_factor != 0.1)
    out.push_back("opt_learning_rate_decay_factor " + fmt(h.decay_factor) + ": must be 0.1");
  if (!near_integer(static_cast<double>(h.num_image_candidates) / 1000.0))
    out.push_back("num_image_candidates " + std::to_string(h.num_image_candidates) + ": must be a multiple of 1000");
  if (c.data.transform.min_size != 800 || c.data.transform.max_size != 1333)
    out.push_back("min_image_size/max_image_size " + std::to_string(c.data.transform.min_size) + "/" +
                  std::to_string(c.data.transform.max_size) + ": the image sizes are fixed to the reference's 800/1333");
  if (h.weight_decay != 1e-4) out.push_back("opt_weight_decay " + fmt(h.weight_decay) + ": fixed to the reference's 0.0001");
  if (h.momentum != 0.9) out.push_back("momentum " + fmt(h.momentum) + ": fixed to the reference's 0.9");
  if (h.decay_steps.size() != 2) {
    out.push_back("opt_learning_rate_decay_steps: must be two steps");
  } else {
    // (60000, 80000) * (1 + K/10) * 16 / global_batch_size for an integer K (rounding allowed).
    const double unit = 16.0 / static_cast<double>(h.global_batch_size);
    const double k = (static_cast<double>(h.decay_steps[0]) / (60000 * unit) - 1) * 10;
    const double kk = std::nearbyint(k);
    const double e0 = 60000 * unit * (1 + kk / 10), e1 = 80000 * unit * (1 + kk / 10);
    if (std::abs(h.decay_steps[0] - e0) > 1 || std::abs(h.decay_steps[1] - e1) > 1)
      out.push_back("opt_learning_rate_decay_steps [" + std::to_string(h.decay_steps[0]) + ", " +
                    std::to_string(h.decay_steps[1]) +
                    "]: must be (60000, 80000) * (1 + K/10) * 16 / global_batch_size for an integer K");
  }
  if (c.data.transform.flip_probability != 0.5)
    out.push_back("data.flip_probability " + fmt(c.data.transform.flip_probability) + ": the reference flips with p=0.5");
  const auto& m = c.model;
  if (m.backbone.depth != 50 || m.backbone.base_channels != 64 || m.backbone.norm != model::NormKind::kFrozenBatchNorm ||
      m.fpn.out_channels != 256 || m.box_head.representation_size != 1024 || m.mask_head.conv_channels != 256 ||
      m.mask_head.num_convs != 4 || m.num_classes != 81)
    out.push_back("model: the closed division trains the reference network (ResNet-50 with frozen batch norm, "
                  "FPN 256, box head 1024, mask head 4x256, 81 classes)");
  return out;
}

LoggedHyperparameters logged_hyperparameters(const SystemConfig& c) {
  LoggedHyperparameters l;
  l.global_batch_size = c.hp.global_batch_size;
  l.gradient_accumulation_steps = c.hp.gradient_accumulation_steps;
  l.num_image_candidates = c.hp.num_image_candidates;
  l.base_lr = c.hp.base_lr;
  l.warmup_steps = c.hp.warmup_steps;
  l.warmup_factor = c.hp.warmup_factor;
  l.decay_steps = c.hp.decay_steps;
  l.decay_factor = c.hp.decay_factor;
  l.weight_decay = c.hp.weight_decay;
  l.momentum = c.hp.momentum;
  l.gradient_clip_norm = c.hp.gradient_clip_norm;
  l.min_image_size = c.data.transform.min_size;
  l.max_image_size = c.data.transform.max_size;
  return l;
}

}  // namespace mrcnn::run
