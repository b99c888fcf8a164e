#include "benchmark/config/system_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>

#include "benchmark/data/image_codec.h"
#include "logging/closed_division.h"
#include "model/ops/devices.h"
#include "model/options_json.h"

namespace mrcnn::config {
namespace {

constexpr Range kPositive{.min = 0, .min_exclusive = true};
constexpr Range kNonNegative{.min = 0};
constexpr Range kAtLeastOne{.min = 1};
constexpr Range kFraction{.min = 0, .max = 1};
constexpr Range kThreads{.min = 1, .max = 1024};
constexpr double kMaxResizedSide = static_cast<double>(data::kMaxImageSide);

// What a field list says of one key besides its name and type.
struct Spec {
  Range range{};
  std::vector<std::string> allowed{};  // for strings: the accepted values
  bool required = false;               // no default: the file must say
  bool non_empty = false;              // for strings
};

// ---- the schema: one field list per section, shared by the reader and the default writer -------

template <class V>
void fields(V& v, SubmissionInfo& s) {
  v("benchmark", s.benchmark, {.allowed = {"maskrcnn"}});
  v("org", s.org, {.required = true, .non_empty = true});
  v("division", s.division, {.allowed = {"closed", "open"}, .required = true});
  v("status", s.status, {.allowed = {"onprem", "cloud", "preview", "research"}, .required = true});
  v("platform", s.platform, {.required = true, .non_empty = true});
}

template <class V>
void fields(V& v, LaunchSettings& l) {
  v("nodes", l.nodes, {.range = kAtLeastOne, .required = true});
  v("ranks_per_node", l.ranks_per_node, {.range = kAtLeastOne, .required = true});
  v("threads_per_rank", l.threads_per_rank, {.range = kThreads, .required = true});
  v("cpu_binding", l.cpu_binding, {.allowed = {"none", "core", "socket"}});
  v("communicator", l.communicator, {.allowed = {"local", "mpi", "tcp", "nccl", "auto"}});
  v("env", l.env);
  v("mpirun_args", l.mpirun_args);
  v("sbatch_args", l.sbatch_args);
  v("nccl_net_plugin_dir", l.nccl_net_plugin_dir);
  v("backend_library", l.backend_library);
  v("collective_timeout_s", l.collective_timeout_s, {.range = {.min = 1, .max = 86400}});
  v("overlap_allreduce", l.overlap_allreduce);
  v("host_memory", l.host_memory, {.allowed = {"retain", "system"}});
  v("network_gbps", l.network_gbps, {.range = {.min = 0, .max = 1e6}});
}

template <class V>
void fields(V& v, RunSettings& s) {
  v("device", s.device, {.required = true});
  v("ops", s.ops);
  v("precision", s.precision, {.required = true});
  v("channels_last", s.channels_last);
  v("seed", s.seed, {.range = {.min = 0, .max = 4294967295.0}, .required = true});
  v("deterministic", s.deterministic);
  v("data_dir", s.data_dir, {.required = true});
  v("output_dir", s.output_dir, {.required = true});
  v("max_epochs", s.max_epochs, {.range = {.min = 1, .max = 100000}, .required = true});
  v("max_steps_per_epoch", s.max_steps_per_epoch, {.range = {.min = 0, .max = 1e9}});
  v("target_bbox", s.target_bbox, {.range = kFraction});
  v("target_segm", s.target_segm, {.range = kFraction});
  v("async_eval", s.async_eval);
  v("eval_threads", s.eval_threads, {.range = kThreads});
  v("eval_images_per_batch", s.eval_images_per_batch, {.range = kAtLeastOne});
  v("checkpoint_every_epoch", s.checkpoint_every_epoch);
  v("initial_weights", s.initial_weights);
  v("cache_clear", s.cache_clear);
  v("results_every_steps", s.results_every_steps, {.range = {.min = 1, .max = 100000}});
  v("cuda_graph_shapes", s.cuda_graph_shapes, {.range = {.min = 0, .max = 1024}});
  v("warm_up", s.warm_up);
  v("cudnn_benchmark", s.cudnn_benchmark);
}

template <class V>
void fields(V& v, DataSettings& d) {
  auto& t = d.transform;
  // Resized sides beyond the largest image the codec accepts would ask for gigabytes a sample
  // (100000 px: 960 GB) and die in the allocator; refused here, naming the key.
  v("min_size", t.min_size, {.range = {.min = 1, .max = kMaxResizedSide}});
  v("max_size", t.max_size, {.range = {.min = 0, .max = kMaxResizedSide}});
  v("flip_probability", t.flip_probability, {.range = kFraction});
  v("to_bgr255", t.to_bgr255);
  v("pixel_mean", t.pixel_mean);
  v("pixel_std", t.pixel_std, {.range = kPositive});
  v("legacy_plus_one", t.legacy_plus_one);
  v("dct_downscale", t.dct_downscale);
  v("train_split", d.train_split, {.non_empty = true});
  v("val_split", d.val_split, {.non_empty = true});
  v("annotation_source", d.annotation_source, {.allowed = {"auto", "json", "index"}});
  v("loader_threads", d.loader_threads, {.range = {.min = 0, .max = 1024}});
  v("prefetch_batches", d.prefetch_batches, {.range = kAtLeastOne});
  v("group_by_aspect_ratio", d.group_by_aspect_ratio);
  v("size_divisible", d.size_divisible, {.range = kAtLeastOne});
  v("pad_to_shapes", d.pad_to_shapes, {.range = {.min = 1, .max = kMaxResizedSide}});  // multiples: validate()
}

// hyperparameters.by_global_batch_size.<global_batch_size>
template <class V>
void batch_size_fields(V& v, Hyperparameters& h) {
  v("base_lr", h.base_lr, {.range = kPositive, .required = true});
  v("warmup_steps", h.warmup_steps, {.range = kNonNegative, .required = true});
  v("warmup_factor", h.warmup_factor, {.range = {.min = 0, .max = 1, .min_exclusive = true}, .required = true});
  v("decay_steps", h.decay_steps, {.range = kNonNegative, .required = true});
  v("num_image_candidates", h.num_image_candidates, {.range = kAtLeastOne, .required = true});
}

// hyperparameters, shared by every batch size (global_batch_size itself is read first).
template <class V>
void shared_hyperparameter_fields(V& v, Hyperparameters& h) {
  v("decay_factor", h.decay_factor, {.range = {.min = 0, .max = 1, .min_exclusive = true}});
  v("weight_decay", h.weight_decay, {.range = kNonNegative});
  v("momentum", h.momentum, {.range = {.min = 0, .max = 0.999999}});
  v("bias_lr_factor", h.bias_lr_factor, {.range = kPositive});
  v("bias_weight_decay", h.bias_weight_decay, {.range = kNonNegative});
  v("gradient_clip_norm", h.gradient_clip_norm, {.range = kNonNegative});
  v("gradient_accumulation_steps", h.gradient_accumulation_steps, {.range = kAtLeastOne});
}

// ---- reading: every key through ConfigReader (type, range, required, unknown keys) --------------

class ReadFields {
 public:
  explicit ReadFields(ConfigReader& r) : r_(r) {}

  void operator()(const char* key, int64_t& x, const Spec& s = {}) {
    if (s.required || r_.has(key)) x = r_.integer(key, s.range);
  }
  void operator()(const char* key, double& x, const Spec& s = {}) {
    if (s.required || r_.has(key)) x = r_.number(key, s.range);
  }
  void operator()(const char* key, bool& x, const Spec& s = {}) {
    if (s.required || r_.has(key)) x = r_.boolean(key);
  }
  void operator()(const char* key, std::string& x, const Spec& s = {}) {
    if (!s.required && !r_.has(key)) return;
    x = r_.string(key, s.allowed);
    if (s.non_empty && x.empty()) r_.fail(key, "must not be empty");
  }
  void operator()(const char* key, model::Precision& x, const Spec& s = {}) {
    if (s.required || r_.has(key)) x = model::parse_precision(r_.string(key, {"fp32", "bf16", "fp16"}));
  }
  void operator()(const char* key, ops::Implementation& x, const Spec& s = {}) {
    if (s.required || r_.has(key)) x = ops::parse_implementation(r_.string(key, {"native", "portable", "auto"}));
  }
  void operator()(const char* key, std::vector<int64_t>& x, const Spec& s = {}) {
    if (s.required || r_.has(key)) x = r_.integers(key, s.range);
  }
  void operator()(const char* key, std::array<float, 3>& x, const Spec& s = {}) {
    if (!s.required && !r_.has(key)) return;
    const auto v = r_.numbers(key, s.range);
    if (v.size() != 3) r_.fail(key, "expected 3 numbers, one per channel");
    for (size_t c = 0; c < 3; ++c) x[c] = static_cast<float>(v[c]);
  }
  void operator()(const char* key, std::map<std::string, std::string>& x, const Spec& = {}) {
    if (!r_.has(key)) return;
    const Json& m = r_.raw(key);
    if (!m.is_object()) r_.fail(key, "expected an object of NAME: \"value\"");
    for (const auto& [k, v] : m.items()) {
      if (!v.is_string()) r_.fail(std::string(key) + "." + k, "expected a string");
      x[k] = v.get<std::string>();
    }
  }
  // [[height, width], ...]: integers in s.range, no shape twice.
  void operator()(const char* key, std::vector<data::ImageSize>& x, const Spec& s = {}) {
    if (!r_.has(key)) return;
    const Json& a = r_.raw(key);
    const std::string expected = "expected a list of [height, width] pairs of integers from " +
                                 std::to_string(static_cast<int64_t>(s.range.min)) + " to " +
                                 std::to_string(static_cast<int64_t>(s.range.max)) +
                                 ", e.g. [[800, 1344], [1344, 800]]";
    if (!a.is_array()) r_.fail(key, expected + ", got " + a.dump());
    auto side = [&](const Json& v) {
      return v.is_number_integer() && v.get<double>() >= s.range.min && v.get<double>() <= s.range.max;
    };
    for (size_t k = 0; k < a.size(); ++k) {
      const Json& p = a[k];
      if (!p.is_array() || p.size() != 2 || !side(p[0]) || !side(p[1]))
        r_.fail(key, expected + "; entry " + std::to_string(k) + " is " + p.dump());
      const data::ImageSize shape{p[0].get<int64_t>(), p[1].get<int64_t>()};
      if (std::find(x.begin(), x.end(), shape) != x.end())
        r_.fail(key, "entry " + std::to_string(k) + " " + p.dump() + " is listed twice");
      x.push_back(shape);
    }
  }
  void operator()(const char* key, std::vector<std::string>& x, const Spec& = {}) {
    if (!r_.has(key)) return;
    const Json& a = r_.raw(key);
    if (!a.is_array()) r_.fail(key, "expected a list of strings");
    for (const auto& v : a) {
      if (!v.is_string()) r_.fail(key, "expected a list of strings");
      x.push_back(v.get<std::string>());
    }
  }

 private:
  ConfigReader& r_;
};

// ---- writing the defaults back: the keys a section left out, with the values the run used -------

// A float as the shortest decimal that reads back as the same float (0.485f -> 0.485).
double shortest(float f) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, f).ptr;
  return std::stod(std::string(buf, end));
}

class FillDefaults {
 public:
  explicit FillDefaults(Json& section) : j_(section) {}
  template <class T>
  void operator()(const char* key, const T& x, const Spec& = {}) {
    if (!j_.contains(key)) j_[key] = value(x);
  }

 private:
  template <class T>
  static Json value(const T& x) {
    return x;
  }
  static Json value(const model::Precision& p) { return model::to_string(p); }
  static Json value(const ops::Implementation& i) { return ops::to_string(i); }
  static Json value(const std::array<float, 3>& a) { return {shortest(a[0]), shortest(a[1]), shortest(a[2])}; }
  static Json value(const std::vector<data::ImageSize>& shapes) {
    Json a = Json::array();
    for (const data::ImageSize& s : shapes) a.push_back({s.height, s.width});
    return a;
  }
  Json& j_;
};

template <class T>
T read_section(ConfigReader r) {
  T out;
  r.ignore("comment");
  ReadFields read(r);
  fields(read, out);
  r.finish();
  return out;
}

Hyperparameters read_hyperparameters(ConfigReader r) {
  Hyperparameters h;
  r.ignore("comment");
  h.global_batch_size = r.integer("global_batch_size", kAtLeastOne);
  ConfigReader sets = r.object("by_global_batch_size");
  const std::string gbs = std::to_string(h.global_batch_size);
  if (!sets.has(gbs)) {
    std::string known;
    for (const auto& [k, v] : sets.raw_keys()) known += (known.empty() ? "" : ", ") + k;
    sets.fail(gbs, "no hyperparameter set for global_batch_size " + gbs + " (sets exist for: " + known + ")");
  }
  for (const auto& [k, v] : sets.raw_keys()) sets.ignore(k);  // other batch sizes are not used now
  ConfigReader set = sets.object(gbs);
  set.ignore("comment");
  ReadFields read_set(set);
  batch_size_fields(read_set, h);
  for (size_t i = 1; i < h.decay_steps.size(); ++i)
    if (h.decay_steps[i] < h.decay_steps[i - 1]) set.fail("decay_steps", "expected increasing steps");
  set.finish();
  ReadFields read(r);
  shared_hyperparameter_fields(read, h);
  if (h.gradient_accumulation_steps != 1)
    r.fail("gradient_accumulation_steps", "only 1 is supported (the trainer updates after every batch)");
  r.finish();
  return h;
}

// The model: MLPerf's defaults, the file's "model" section, then the run-level switches, which
// the model section may not set itself.
constexpr const char* kOwnedModelKeys[][2] = {{"channels_last", "run.channels_last"},
                                              {"precision", "run.precision"},
                                              {"mixed_precision", "run.precision"},
                                              {"cuda_graph_shapes", "run.cuda_graph_shapes"}};

// The run's values in the model's options (model_options()).
model::ModelOptions with_run_values(model::ModelOptions m, const SystemConfig& c) {
  m.channels_last = c.run.channels_last;
  m.precision = c.run.precision;
  m.cuda_graph_shapes = c.run.cuda_graph_shapes;
  m.rpn.post_nms_top_n_train = c.hp.num_image_candidates;
  return m;
}

model::ModelOptions read_model(const SystemConfig& c, const ConfigReader& root) {
  Json section = c.resolved.contains("model") ? c.resolved["model"] : Json::object();
  if (!section.is_object()) root.fail("model", "expected an object");
  section.erase("comment");
  for (const auto& [key, owner] : kOwnedModelKeys)
    if (section.contains(key)) root.fail(std::string("model.") + key, std::string("set by ") + owner);
  if (section.contains("rpn") && section["rpn"].is_object() && section["rpn"].contains("post_nms_top_n_train"))
    root.fail("model.rpn.post_nms_top_n_train", "set by hyperparameters num_image_candidates");
  model::ModelOptions m;
  try {
    m = model::model_options_from_json(nlohmann::json::parse(section.dump()), model::ModelOptions{}, "model");
    with_run_values(m, c).validate();  // the network the run builds, checked as it loads
  } catch (const std::invalid_argument& e) {
    // The message starts with the key's path ("model.rpn.nms_threshold: ..."): name its source.
    const std::string what = e.what();
    throw ConfigError(c.source(what.substr(0, what.find(':'))) + ": " + what);
  }
  return m;
}


[[noreturn]] void fail_at(const SystemConfig& c, const std::string& path, const std::string& problem) {
  throw ConfigError(c.source(path) + ": " + path + ": " + problem);
}

// Checks that need more than one key.
void validate(const SystemConfig& c) {
  const std::string& device = c.run.device;
  const ops::DeviceKind* kind = ops::device_kind(device);
  if (kind == nullptr) fail_at(c, "run.device", "expected " + ops::device_names() + ", got \"" + device + "\"");
  const bool cuda = kind->type == c10::DeviceType::CUDA;
  if (!c.launch.backend_library.empty() && !c.launch.backend_library.starts_with("/"))
    fail_at(c, "launch.backend_library",
            "expected an absolute path (the library the run loads, fingerprints and names), got \"" +
                c.launch.backend_library + "\"");
  if (c.run.ops == ops::Implementation::kNative && !kind->native_kernels)
    fail_at(c, "run.ops",
            "\"native\" kernels exist for the CPU and NVIDIA GPUs only; " + device +
                " needs \"portable\" (or \"auto\", which picks it)");
  if (c.run.precision == model::Precision::kFloat16 && !cuda)
    fail_at(c, "run.precision", "fp16 (with loss scaling) is for CUDA devices; use bf16 on " + device);
  // bf16 on CUDA: autocast bfloat16, no loss scaling (Ampere and newer; a V100 emulates it slowly).
  if (c.run.cuda_graph_shapes > 0 && !cuda)
    fail_at(c, "run.cuda_graph_shapes", "CUDA graphs need run.device \"cuda\", not \"" + device + "\" (set 0)");
  if (c.run.cudnn_benchmark && !cuda)
    fail_at(c, "run.cudnn_benchmark", "cuDNN's benchmarking is for CUDA devices: run.device \"" + device +
                                          "\" has none (set false)");
  if (c.run.cudnn_benchmark && c.run.deterministic)
    fail_at(c, "run.cudnn_benchmark", "benchmarking picks algorithms by their timings, which run.deterministic "
                                      "excludes (set one of them false)");
  if (c.run.warm_up && c.data.pad_to_shapes.empty())
    fail_at(c, "run.warm_up", "the warm-up runs the batch shapes a run will meet: set data.pad_to_shapes");
  if (c.model_section.head_streams && !cuda)
    fail_at(c, "model.head_streams", "the loss heads' streams are CUDA streams: run.device \"" + device +
                                         "\" has none (set false)");
  if (c.model_section.backbone.fused_conv_relu && !cuda)
    fail_at(c, "model.backbone.fused_conv_relu",
            "the fused convolutions are cuDNN's: run.device \"" + device + "\" has none (set false)");
  if (c.model_section.backbone.fused_conv_relu && c.model_section.backbone.norm != model::NormKind::kFrozenBatchNorm)
    fail_at(c, "model.backbone.fused_conv_relu",
            "fuses a frozen batch norm's bias into the convolution: backbone.norm \"group_norm\" has none (set false)");
  if (c.model_section.backbone.fused_conv_relu && c.run.deterministic)
    fail_at(c, "model.backbone.fused_conv_relu",
            "cuDNN's fused calls choose their algorithms without the deterministic setting: not with "
            "run.deterministic (set false)");
  // On an H200 (2026-11-26) the step of a second captured shape differed from the eager step
  // (tests/model/test_feature_graphs.cpp, OnCudaGraphedTrainingIsTheEagerTraining); one shape matched.
  if (c.run.cuda_graph_shapes > 1)
    fail_at(c, "run.cuda_graph_shapes",
            "at most 1 for now: on a GPU the graphs of a second batch shape computed another step than the "
            "eager one (model/README.md, \"CUDA graphs\"); other shapes run without graphs");
  for (size_t k = 0; k < c.data.pad_to_shapes.size(); ++k) {
    const data::ImageSize& shape = c.data.pad_to_shapes[k];
    if (shape.height % c.data.size_divisible != 0 || shape.width % c.data.size_divisible != 0)
      fail_at(c, "data.pad_to_shapes",
              "entry " + std::to_string(k) + " [" + std::to_string(shape.height) + ", " + std::to_string(shape.width) +
                  "] is not a multiple of data.size_divisible " + std::to_string(c.data.size_divisible) +
                  " in both sides (batches are padded to multiples of it)");
  }
  try {
    c.data.transform.validate();
  } catch (const std::exception& e) {
    throw ConfigError(c.file + ": data: " + e.what());
  }
  const Json& sd = c.system_description;
  if (sd.contains("division") && sd["division"] != c.submission.division)
    throw ConfigError(c.file + ": system.division (" + sd["division"].dump() + ") differs from submission.division (\"" +
                      c.submission.division + "\")");
  // "cuda:N" names one GPU for every rank; ranks sharing a node each take their own ("cuda").
  if (device.starts_with("cuda:") && c.launch.ranks_per_node > 1)
    fail_at(c, "run.device",
            "\"" + device + "\" would put all " + std::to_string(c.launch.ranks_per_node) +
                " ranks of a node on one GPU; use \"cuda\" (each rank takes the GPU of its index on the node)");
  if (c.launch.communicator == "nccl" && !device.starts_with("cuda"))
    fail_at(c, "launch.communicator",
            "\"nccl\" needs run.device \"cuda\" (each rank takes the GPU of its index on the node), not \"" + device +
                "\"");
  if (sd.contains("number_of_nodes") && sd["number_of_nodes"] != std::to_string(c.launch.nodes))
    throw ConfigError((c.source("system.number_of_nodes") != c.file ? c.source("system.number_of_nodes")
                                                                     : c.source("launch.nodes")) +
                      ": launch.nodes " + std::to_string(c.launch.nodes) +
                      " differs from system.number_of_nodes " + sd["number_of_nodes"].dump() +
                      " (the system description must say what runs)");
  const int64_t world = c.launch.world_size();
  if (c.hp.global_batch_size % world != 0)
    throw ConfigError(c.file + ": hyperparameters.global_batch_size " + std::to_string(c.hp.global_batch_size) +
                      " is not divisible by the " + std::to_string(world) + " ranks of launch");
  if (c.submission.division == "closed") {
    const auto v = closed_division_violations(c);
    if (!v.empty()) {
      std::string all;
      for (const auto& m : v) all += "\n  - " + m;
      throw ConfigError(c.file + ": not allowed in the closed division:" + all);
    }
  }
}

// `resolved` gains every key a section left out, with the value the run uses.
void fill_defaults(SystemConfig& c) {
  Json& r = c.resolved;
  auto fill = [&](const char* section, auto& value) {
    FillDefaults w(r[section]);
    fields(w, value);
  };
  fill("submission", c.submission);
  fill("launch", c.launch);
  fill("run", c.run);
  fill("data", c.data);
  FillDefaults hp(r["hyperparameters"]);
  shared_hyperparameter_fields(hp, c.hp);
  Json model = model::to_json(c.model_section);
  for (const auto& [key, owner] : kOwnedModelKeys) model.erase(key);
  model["rpn"].erase("post_nms_top_n_train");
  Json& section = r["model"];
  if (!section.is_object()) section = Json::object();
  // Keep the file's own keys (and comments) as written; add the rest.
  std::function<void(Json&, const nlohmann::json&)> merge = [&](Json& into, const nlohmann::json& from) {
    for (const auto& [k, v] : from.items()) {
      if (!into.contains(k)) into[k] = Json::parse(v.dump());
      else if (v.is_object() && into[k].is_object()) merge(into[k], v);
    }
  };
  merge(section, model);
}

const char* const kSections[] = {"system", "submission", "launch", "run", "data", "hyperparameters"};

// `patch` merged into `base` (RFC 7386): objects key by key, anything else replaced, null removes
// the key. Every value left from the base is attributed to `base_file` in `origins`, so that an
// error in an inherited value names the file that holds it.
void merge_patch(Json& base, const Json& patch, const std::string& prefix, const std::string& base_file,
                 Origins& origins) {
  for (auto it = base.begin(); it != base.end(); ++it) {
    const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (!patch.contains(it.key())) origins.emplace(path, base_file);
  }
  for (const auto& [k, v] : patch.items()) {
    const std::string path = prefix.empty() ? k : prefix + "." + k;
    if (v.is_null()) base.erase(k);
    else if (v.is_object() && base.contains(k) && base[k].is_object()) merge_patch(base[k], v, path, base_file, origins);
    else base[k] = v;
  }
}

// Whether a merge patch sets the value at a dotted path (or a value above it).
bool patch_sets(const Json& patch, const std::string& path) {
  const Json* node = &patch;
  for (size_t start = 0;;) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key)) return false;
    node = &(*node)[key];
    if (dot == std::string::npos || !node->is_object()) return true;
    start = dot + 1;
  }
}

// A system file with the files it extends applied: "extends": "<file>" names a system file,
// relative to this one's folder, whose content this file amends.
Json read_system_file(const std::string& path, Origins& origins, std::vector<std::string>& chain) {
  Json j = read_json_file(path);
  if (!j.is_object() || !j.contains("extends")) return j;
  if (!j["extends"].is_string() || j["extends"].get<std::string>().empty())
    throw ConfigError(path + ": extends: expected the name of a system file");
  const auto base_path =
      (std::filesystem::path(path).parent_path() / j["extends"].get<std::string>()).lexically_normal().string();
  for (const auto& seen : chain)
    if (std::filesystem::exists(seen) && std::filesystem::exists(base_path) &&
        std::filesystem::equivalent(seen, base_path))
      throw ConfigError(path + ": extends: " + base_path + " extends itself (through " + chain.front() + ")");
  chain.push_back(base_path);
  Origins base_origins;
  Json base = read_system_file(base_path, base_origins, chain);
  if (!base.is_object()) throw ConfigError(base_path + ": expected a JSON object with the sections of a system file");
  j.erase("extends");
  base.erase("comment");  // the base's description of itself is not this file's
  for (const auto& [p, from] : base_origins)  // what the base inherited, unless this file sets it
    if (!patch_sets(j, p)) origins.try_emplace(p, from);
  merge_patch(base, j, "", base_path, origins);  // the base's own values (emplace: the above stay)
  return base;
}

}  // namespace

std::string SystemConfig::source(const std::string& path) const { return source_of(&origins, file, path); }

SystemConfig load_system_config(const std::string& path, const std::vector<std::string>& overrides) {
  SystemConfig c;
  c.file = path;
  c.name = std::filesystem::path(path).stem().string();
  std::vector<std::string> chain{path};
  c.resolved = read_system_file(path, c.origins, chain);
  if (!c.resolved.is_object()) throw ConfigError(path + ": expected a JSON object with the sections of a system file");
  for (const char* section : kSections)
    if (!c.resolved.contains(section) || !c.resolved[section].is_object())
      throw ConfigError(path + ": no \"" + section +
                        "\" section (a system file has system, submission, launch, run, data and hyperparameters; "
                        "model is optional)");
  for (const auto& o : overrides) apply_override(c.resolved, o, c.origins);

  ConfigReader root(c.resolved, path, "", &c.origins);
  root.ignore("comment");
  c.system_description = root.raw("system");
  c.submission = read_section<SubmissionInfo>(root.object("submission"));
  c.launch = read_section<LaunchSettings>(root.object("launch"));
  c.run = read_section<RunSettings>(root.object("run"));
  c.data = read_section<DataSettings>(root.object("data"));
  c.hp = read_hyperparameters(root.object("hyperparameters"));
  root.ignore("model");
  c.model_section = read_model(c, root);
  root.finish();
  validate(c);
  fill_defaults(c);
  return c;
}

model::ModelOptions model_options(const SystemConfig& c) { return with_run_values(c.model_section, c); }

Json resolved_value(const SystemConfig& c, const std::string& path) {
  if (path == "name") return c.name;
  if (path == "launch.world_size") return c.launch.world_size();
  const Json* node = &c.resolved;
  for (size_t start = 0;;) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(key))
      throw ConfigError(c.file + ": " + path + ": no such key in the resolved configuration");
    node = &(*node)[key];
    if (dot == std::string::npos) return *node;
    start = dot + 1;
  }
}

namespace {

// A configured hyperparameter as the closed division's table (logging/closed_division.h) reads it:
// a number (length 1), or a list, which the rules read by its length alone.
class ConfiguredValue final : public logging::closed_division::RuleInput {
 public:
  ConfiguredValue(double value, size_t length, int64_t global_batch_size)
      : value_(value), length_(length), global_batch_size_(global_batch_size) {}
  double value(const char*) const override { return value_; }
  bool value_equals(double x) const override { return value_ == x; }
  size_t value_length() const override { return length_; }
  double global_batch_size(const char*) const override { return static_cast<double>(global_batch_size_); }

 private:
  double value_;
  size_t length_;
  int64_t global_batch_size_;
};

// Whether the table's rule on `key` holds for `value`; if not, adds "<key> <shown>: <requirement>"
// (or "<key>: <requirement>" when nothing is shown) to `out`.
bool check_rule(std::string_view key, const ConfiguredValue& value, const std::string& shown,
                std::vector<std::string>& out) {
  const auto& rule = logging::closed_division::rule(key);
  if (rule.holds(value)) return true;
  out.push_back(std::string(key) + (shown.empty() ? "" : " " + shown) + ": " + std::string(rule.requirement));
  return false;
}

// The model keys a closed system may set freely: the speed paths, which change no result beyond
// rounding (graphs, streams, layouts, precision, the fused bottlenecks, the mask head's bucket, the
// CPU's own weight gradient, which random stream the samplers draw from), and the proposal count
// that hyperparameters.num_image_candidates sets under its own rule (per image or per batch, as
// the rules allow either). Every other key must hold the reference's value.
constexpr std::string_view kClosedFreeModelKeys[] = {
    "model.backbone.fused_conv_relu", "model.mask_head.roi_bucket", "model.head_streams",
    "model.cuda_graph_shapes",        "model.channels_last",        "model.precision",
    "model.cpu_own_weight_grad",      "model.sampling_streams",     "model.rpn.post_nms_top_n_train",
    "model.rpn.post_nms_per_batch_train",
};

// Adds "model.<key> <value>: the closed division computes what the reference computes (<value>)"
// for every key of `got` whose value differs from `reference`'s, outside kClosedFreeModelKeys.
void model_departures(const Json& got, const Json& reference, const std::string& path, std::vector<std::string>& out) {
  for (const auto& [key, want] : reference.items()) {
    const std::string at = path + "." + key;
    if (std::find(std::begin(kClosedFreeModelKeys), std::end(kClosedFreeModelKeys), at) != std::end(kClosedFreeModelKeys))
      continue;
    const Json& have = got.at(key);
    if (want.is_object()) {
      model_departures(have, want, at, out);
    } else if (have != want) {
      out.push_back(at + " " + have.dump() + ": the closed division computes what the reference computes (" +
                    want.dump() + ")");
    }
  }
}

}  // namespace

std::vector<std::string> closed_division_violations(const SystemConfig& c) {
  std::vector<std::string> out;
  const auto& h = c.hp;
  auto fmt = [](double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  };
  auto scalar = [&h](double x) { return ConfiguredValue(x, 1, h.global_batch_size); };
  check_rule("opt_base_learning_rate", scalar(h.base_lr), fmt(h.base_lr), out);
  check_rule("opt_learning_rate_decay_factor", scalar(h.decay_factor), fmt(h.decay_factor), out);
  check_rule("num_image_candidates", scalar(static_cast<double>(h.num_image_candidates)),
             std::to_string(h.num_image_candidates), out);
  if (c.data.transform.min_size != 800 || c.data.transform.max_size != 1333)
    out.push_back("min_image_size/max_image_size " + std::to_string(c.data.transform.min_size) + "/" +
                  std::to_string(c.data.transform.max_size) + ": the image sizes are fixed to the reference's 800/1333");
  if (h.weight_decay != 1e-4) out.push_back("opt_weight_decay " + fmt(h.weight_decay) + ": fixed to the reference's 0.0001");
  if (h.momentum != 0.9) out.push_back("momentum " + fmt(h.momentum) + ": fixed to the reference's 0.9");
  const ConfiguredValue steps(0, h.decay_steps.size(), h.global_batch_size);
  if (check_rule("opt_learning_rate_decay_steps", steps, "", out)) {
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
  model_departures(model::to_json(c.model_section), model::to_json(model::reference_options()), "model", out);
  return out;
}

}  // namespace mrcnn::config
