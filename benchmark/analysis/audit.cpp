#include "benchmark/analysis/audit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

namespace mrcnn::analysis {

namespace {

using Verdict = AuditResult::Verdict;

struct Rule {
  const char* prefix;
  bool changes_results;
  const char* consequence;
};

// What a difference does, where the fingerprint and the configuration both name it.
constexpr const char* kIntraOpThreads =
    "LibTorch splits its reductions over the intra-op threads: float sums round differently and the losses "
    "differ within the first steps";
constexpr const char* kRankLayout = "another rank layout: gradients are summed in another order over other data shards";
constexpr const char* kLoaderThreads = "measured: the loader's thread count does not change the result (batches keep their order)";
constexpr const char* kOps =
    "the portable ops (ATen compositions) sum RoIAlign's samples in another order than the native kernels: "
    "values differ by rounding from the first step";
constexpr const char* kEvalThreads = "measured: the evaluator's thread count does not change the result";

// What each fingerprint field means for the numbers, longest prefix first within a group.
constexpr Rule kFingerprintRules[] = {
    {"binary.path", false, "where the executable lies does not change results"},
    {"binary.library_paths", false, "where the project's libraries lie does not change results"},
    {"binary.libraries", true,
     "another build of a project library (the kernels are libmrcnn_ops.so's, the network libmrcnn_model.so's): "
     "any value may differ"},
    {"binary.", true, "another build of the code: any value may differ"},
    {"libraries.aten_cpu_capability", true,
     "LibTorch runs other vector kernels (another ISA level): float sums round differently, values differ "
     "from the first steps"},
    {"libraries.libtorch_dir", false, "where LibTorch was loaded from; libraries.libtorch says which version ran"},
    {"libraries.", true, "other library versions run other kernels: values may differ from the first step"},
    {"host.cpu_model", true,
     "another CPU model: LibTorch and oneDNN choose other kernels whose float sums round differently; values "
     "differ from the first steps and the converged epoch may too"},
    {"host.cpu_flags", true, "another instruction set: other vector kernels, other rounding"},
    {"host.gpus", true, "another GPU model: other kernels, other rounding"},
    {"host.gpu_driver", true, "another GPU driver: cuDNN and cuBLAS may choose other algorithms"},
    {"host.", false, "does not change the arithmetic"},
    {"threads.intra_op", true,
     kIntraOpThreads},
    {"threads.loader", false, kLoaderThreads},
    {"threads.eval", false, kEvalThreads},
    {"threads.", false, "does not change the arithmetic of a step"},
    {"ranks.communicator_resolved", true,
     "another communicator: the same sums with 2 ranks (a + b), another summation order with more"},
    {"ranks.", true, kRankLayout},
    {"settings.deterministic", true, "nondeterministic kernels in a run: even identical setups may differ"},
    {"settings.ops_resolved", true, kOps},
    {"settings.ops", false, "what run.ops asked for; settings.ops_resolved says what ran"},
    {"settings.", true, "another numeric setting: values differ"},
    {"model.trainable_parameters", false,
     "the network's parameters as counted (absent in runs before it was recorded): another network shows in its configuration"},
    {"data.train_annotations.sha256", true, "different training annotations: different runs"},
    {"data.val_annotations.sha256", true, "different validation annotations: different accuracies"},
    {"data.train_images", true, "another number of training images: different runs"},
    {"data.val_images", true, "another number of validation images: different accuracies"},
    {"data.train_index", false, "the index is the training annotations' arrays: their checksum decides"},
    {"data.", false, "paths and sizes alone do not change results (the checksums decide)"},
};

// Configuration keys that do not change the numbers (everything else does).
constexpr Rule kConfigRules[] = {
    {"comment", false, "a comment"},
    {"system.", false, "the system description does not change results"},
    {"submission.", false, "the submission's labels do not change results"},
    {"run.output_dir", false, "where the run writes does not change results"},
    {"run.data_dir", false, "a path alone does not change results (the data checksums in the fingerprint decide)"},
    {"run.checkpoint_every_epoch", false, "checkpoints are written outside the arithmetic"},
    {"run.cache_clear", false, "a log field"},
    {"run.results_every_steps", false, "when the host reads the step results does not change the arithmetic"},
    {"run.cuda_graph_shapes", true,
     "graphs replay the same operations (bit-identical when rehearsed on the CPU), but no GPU comparison has "
     "been made: treated as a possible difference"},
    {"run.warm_up", false,
     "the warm-up before run_start trains nothing: a warmed network trains bit for bit as a cold one (tested on "
     "the CPU)"},
    {"run.cudnn_benchmark", true, "cuDNN's benchmarking picks convolution algorithms by their timings: values "
                                  "may differ by rounding"},
    {"model.head_streams", true,
     "the loss heads on CUDA streams of their own run the same kernels on the same samples, but no GPU "
     "comparison has been made: treated as a possible difference"},
    {"model.backbone.fused_conv_relu", true,
     "cuDNN's fused convolution sums the bias, the shortcut and the ReLU before one rounding: values differ by "
     "rounding"},
    {"run.eval_threads", false, kEvalThreads},
    {"data.loader_threads", false, kLoaderThreads},
    {"data.prefetch_batches", false, "prefetching does not change the batches"},
    {"data.annotation_source", false,
     "measured: the prepared index and the JSON give bit-identical batches (and losses)"},
    {"launch.cpu_binding", false, "core binding does not change the arithmetic"},
    {"launch.collective_timeout_s", false, "how long a rank waits for a dead peer does not change the arithmetic"},
    {"launch.sbatch_args", false, "scheduler options do not change the arithmetic"},
    {"launch.host_memory", false, "whether freed host memory is kept or handed back does not change the arithmetic"},
    {"launch.network_gbps", false, "a figure for forecasts: the run does not use it"},
    {"run.ops", false, "what run.ops asked for; the fingerprint's settings.ops_resolved says what ran"},
    {"launch.backend_library", true, "another vendor bridge runs the device's kernels: values may differ"},
    {"launch.overlap_allreduce", true,
     "other gradient buckets: identical sums with 2 ranks, another summation order with more"},
    {"launch.threads_per_rank", true,
     kIntraOpThreads},
    {"launch.", true, kRankLayout},
    {"", true, "another value of a setting the run uses: values differ"},
};

// Configuration keys added after runs were kept, with the value that older runs, without them, ran
// under: (absent) against that value is no difference.
constexpr std::pair<std::string_view, std::string_view> kConfigDefaults[] = {
    {"run.max_steps_per_epoch", "0"},  // whole epochs
    {"launch.network_gbps", "0.0"},    // not given
    {"model.head_streams", "false"},   // one stream
    {"model.mask_head.roi_bucket", "0"},  // the mask head's RoIs unpadded
    {"model.backbone.fused_conv_relu", "false"},  // LibTorch's convolution, bias add and ReLU
    {"data.pad_to_shapes", "[]"},  // each batch padded to its own size
    {"run.warm_up", "false"},          // nothing run before run_start
    {"run.cudnn_benchmark", "false"},  // cuDNN's heuristics pick the algorithms
};

bool absent_default(const std::string& key, const std::pair<std::string, std::string>& v) {
  if (!v.first.empty() && !v.second.empty()) return false;
  for (const auto& [k, value] : kConfigDefaults)
    if (key == k) return (v.first.empty() ? v.second : v.first) == value;
  return false;
}

const Rule& rule_for(const std::string& key, const Rule* begin, const Rule* end) {
  for (const Rule* r = begin; r != end; ++r)
    if (key.rfind(r->prefix, 0) == 0) return *r;
  static const Rule kUnknown{"", true, "unknown field: may change results"};
  return kUnknown;
}

void flatten(const Json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    out[prefix] = j.dump();
  }
}

void diff_json(const Json& a, const Json& b, const std::string& label, const Rule* rb, const Rule* re,
               const std::vector<std::string>& skip, std::vector<SetupDifference>& out, bool config_defaults = false) {
  std::map<std::string, std::string> fa, fb;
  flatten(a, "", fa);
  flatten(b, "", fb);
  std::map<std::string, std::pair<std::string, std::string>> both;
  for (const auto& [k, v] : fa) both[k].first = v;
  for (const auto& [k, v] : fb) both[k].second = v;
  for (const auto& [k, v] : both) {
    if (v.first == v.second || (config_defaults && absent_default(k, v))) continue;
    if (std::any_of(skip.begin(), skip.end(), [&](const std::string& s) { return k.rfind(s, 0) == 0; })) continue;
    const Rule& r = rule_for(k, rb, re);
    out.push_back({.what = label + k,
                   .a = v.first.empty() ? "(absent)" : v.first,
                   .b = v.second.empty() ? "(absent)" : v.second,
                   .changes_results = r.changes_results,
                   .consequence = r.consequence});
  }
}

std::string num(double v) { return Json(v).dump(); }

std::optional<int64_t> seed_of(const RunRecord& r) {
  if (r.seed) return r.seed;
  if (r.fingerprint.is_object() && r.fingerprint.contains("seed") && r.fingerprint["seed"].is_number_integer())
    return r.fingerprint["seed"].get<int64_t>();
  return std::nullopt;
}

class ValueComparer {
 public:
  ValueComparer(AuditResult& r, double tolerance) : r_(r), tolerance_(tolerance) {}

  // False (and records the first difference) when a and b differ.
  bool same(double a, double b, const std::string& where, const std::string& field, const std::string& source) {
    const bool both_nan = std::isnan(a) && std::isnan(b);
    if (a == b || both_nan) return true;
    const double scale = std::max(std::fabs(a), std::fabs(b));
    const double rel = scale > 0 ? std::fabs(a - b) / scale : 0.0;
    if (std::isfinite(rel)) r_.max_relative_difference = std::max(r_.max_relative_difference, rel);
    if (tolerance_ > 0 && std::isfinite(rel) && rel <= tolerance_) return true;
    if (!r_.first) r_.first = ValueDifference{where, field, num(a), num(b), source};
    return false;
  }

 private:
  AuditResult& r_;
  double tolerance_;
};

void compare_steps(const RunRecord& a, const RunRecord& b, ValueComparer& cmp, AuditResult& r) {
  if (a.steps.empty() || b.steps.empty()) {
    r.notes.push_back(std::string("per-step values not compared: ") +
                      (a.steps.empty() ? a.name : b.name) + " has no metrics.jsonl steps");
    return;
  }
  const size_t n = std::min(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < n; ++i) {
    const StepRecord& x = a.steps[i];
    const StepRecord& y = b.steps[i];
    const std::string where = "step " + std::to_string(x.step);
    const std::string src = "metrics.jsonl lines " + std::to_string(x.line) + " / " + std::to_string(y.line);
    bool same = cmp.same(static_cast<double>(x.step), static_cast<double>(y.step), "step index " + std::to_string(i + 1),
                         "step", src);
    same = same && cmp.same(x.loss, y.loss, where, "loss", src);
    std::map<std::string, double> lx(x.losses.begin(), x.losses.end()), ly(y.losses.begin(), y.losses.end());
    for (const auto& [k, v] : lx) {
      if (!same) break;
      const auto it = ly.find(k);
      same = cmp.same(v, it == ly.end() ? NAN : it->second, where, "losses." + k, src);
    }
    same = same && cmp.same(x.lr, y.lr, where, "lr", src);
    if (same && (x.grad_norm || y.grad_norm))
      same = cmp.same(x.grad_norm.value_or(NAN), y.grad_norm.value_or(NAN), where, "grad_norm", src);
    same = same && cmp.same(x.skipped, y.skipped, where, "skipped", src);
    ++r.steps_compared;
    if (!same) return;
    ++r.identical_steps;
  }
  if (a.steps.size() != b.steps.size())
    r.notes.push_back("the first " + std::to_string(n) + " steps compared; " +
                      (a.steps.size() > b.steps.size() ? a.name : b.name) + " goes on to step " +
                      std::to_string(std::max(a.steps.back().step, b.steps.back().step)));
}

void compare_epochs(const RunRecord& a, const RunRecord& b, ValueComparer& cmp, AuditResult& r) {
  for (const EpochRecord& x : a.epochs) {
    const EpochRecord* y = b.epoch(x.epoch);
    if (y == nullptr || !x.bbox || !y->bbox) continue;
    const std::string where = "epoch " + std::to_string(x.epoch);
    ++r.epochs_compared;
    if (!cmp.same(*x.bbox, *y->bbox, where, "eval_accuracy BBOX", "mlperf_log.txt")) return;
    if (x.segm && y->segm && !cmp.same(*x.segm, *y->segm, where, "eval_accuracy SEGM", "mlperf_log.txt")) return;
  }
  auto scored = [](const RunRecord& run) {
    return std::count_if(run.epochs.begin(), run.epochs.end(), [](const EpochRecord& e) { return e.bbox.has_value(); });
  };
  if (!r.first && scored(a) != scored(b))
    r.first = ValueDifference{"run end", "scored epochs", std::to_string(scored(a)), std::to_string(scored(b)), "mlperf_log.txt"};
  if (!r.first && a.status != b.status)
    r.first = ValueDifference{"run end", "run_stop status", a.status, b.status, "mlperf_log.txt"};
}

}  // namespace

AuditResult audit_runs(const RunRecord& a, const RunRecord& b, const AuditOptions& options) {
  AuditResult r;
  // ---- setup ----
  const auto sa = seed_of(a), sb = seed_of(b);
  if (sa != sb)
    r.setup.push_back({.what = "seed",
                       .a = sa ? std::to_string(*sa) : "(not logged)",
                       .b = sb ? std::to_string(*sb) : "(not logged)",
                       .changes_results = true,
                       .consequence = "different seeds draw other initial weights, data order and augmentation: the "
                                      "runs are independent samples; compare their accuracies and epochs to converge, "
                                      "not their values"});
  std::vector<SetupDifference> rest;
  if (a.fingerprint.is_object() && b.fingerprint.is_object()) {
    diff_json(a.fingerprint, b.fingerprint, "", std::begin(kFingerprintRules), std::end(kFingerprintRules),
              {"seed", "config_sha256", "format"}, rest);
  } else {
    r.notes.push_back("setup not fully compared: " + std::string(a.fingerprint.is_object() ? b.name : a.name) +
                      " has no fingerprint.json (binary, libraries, CPU, threads and data unknown)");
  }
  if (a.config.is_object() && b.config.is_object()) {
    diff_json(a.config, b.config, "config ", std::begin(kConfigRules), std::end(kConfigRules), {"run.seed"}, rest, /*config_defaults=*/true);
  } else {
    // The MLPerf log's hyperparameters are what is left to compare.
    Json ha = Json::object(), hb = Json::object();
    for (const auto& [k, v] : a.hyperparameters) ha[k] = v;
    for (const auto& [k, v] : b.hyperparameters) hb[k] = v;
    const Rule hp[] = {{"", true, "another hyperparameter: values differ"}};
    diff_json(ha, hb, "logged ", std::begin(hp), std::end(hp), {}, rest);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const SetupDifference& x, const SetupDifference& y) { return x.changes_results > y.changes_results; });
  r.setup.insert(r.setup.end(), rest.begin(), rest.end());

  // ---- values ----
  ValueComparer cmp(r, options.tolerance);
  compare_steps(a, b, cmp, r);
  if (!r.first) compare_epochs(a, b, cmp, r);

  const auto explaining = std::find_if(r.setup.begin(), r.setup.end(), [](const SetupDifference& d) { return d.changes_results; });
  std::ostringstream h;
  if (!r.first) {
    r.verdict = Verdict::kIdentical;
    if (options.tolerance > 0)
      h << "equal within tolerance " << options.tolerance << " (largest relative difference "
        << r.max_relative_difference << "): ";
    else
      h << "bit-identical: ";
    h << r.steps_compared << " steps and " << r.epochs_compared << " epoch accuracies";
  } else {
    const ValueDifference& d = *r.first;
    std::ostringstream values;
    if (r.identical_steps > 0)
      values << "identical up to step " << a.steps[r.identical_steps - 1].step << ", then diverges";
    else if (r.steps_compared > 0)
      values << "differ from the first step";
    else
      values << "values differ";
    values << " (first differing value: " << d.where << " " << d.field << " " << d.a << " vs " << d.b << ", "
           << d.source << ")";
    if (explaining != r.setup.end()) {
      r.verdict = Verdict::kSetupDiffers;
      h << "differ in setup: " << explaining->what << " " << explaining->a << " vs " << explaining->b << "; "
        << values.str();
    } else {
      r.verdict = Verdict::kDiverges;
      h << values.str();
    }
  }
  r.headline = h.str();
  return r;
}

std::string format_audit(const RunRecord& a, const RunRecord& b, const AuditResult& r) {
  std::ostringstream o;
  o << "A: " << a.name << "\nB: " << b.name << "\n\n" << r.headline << "\n";
  if (!r.setup.empty()) {
    o << "\nsetup differences (" << r.setup.size() << "):\n";
    for (const SetupDifference& d : r.setup)
      o << "  " << (d.changes_results ? "changes results  " : "no effect        ") << d.what << ": " << d.a << " vs "
        << d.b << "\n                   " << d.consequence << "\n";
  } else {
    o << "\nsetup: the same (fingerprint, configuration and seed)\n";
  }
  if (r.first)
    o << "\nfirst difference: " << r.first->where << ", " << r.first->field << ": " << r.first->a << " vs "
      << r.first->b << " (" << r.first->source << ")\n";
  for (const std::string& n : r.notes) o << "note: " << n << "\n";
  return o.str();
}

Json audit_json(const RunRecord& a, const RunRecord& b, const AuditResult& r) {
  static constexpr const char* kNames[] = {"identical", "diverges", "", "setup_differs"};
  Json setup = Json::array();
  for (const SetupDifference& d : r.setup)
    setup.push_back({{"what", d.what}, {"a", d.a}, {"b", d.b}, {"changes_results", d.changes_results},
                     {"consequence", d.consequence}});
  Json first = nullptr;
  if (r.first)
    first = {{"where", r.first->where}, {"field", r.first->field}, {"a", r.first->a}, {"b", r.first->b},
             {"source", r.first->source}};
  return Json{{"a", a.name}, {"b", b.name}, {"verdict", kNames[static_cast<int>(r.verdict)]},
              {"exit_status", r.exit_status()}, {"headline", r.headline}, {"steps_compared", r.steps_compared},
              {"identical_steps", r.identical_steps}, {"epochs_compared", r.epochs_compared},
              {"max_relative_difference", r.max_relative_difference}, {"first_difference", first},
              {"setup", setup}, {"notes", r.notes}};
}

}  // namespace mrcnn::analysis
