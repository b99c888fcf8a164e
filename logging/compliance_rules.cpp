#include "logging/compliance_rules.h"

#include <algorithm>
#include <map>

#include "logging/closed_division.h"
#include "logging/py_semantics.h"

namespace mrcnn::logging::detail {
namespace {

// A ruleset as its rule files differ (see compliance_rules.h).
struct Version {
  std::string v;  // "1.0.0"
  int n;          // 100 ... 310
  std::string dir() const { return "training_" + v; }
};

std::optional<Version> version_of(const std::string& v) {
  for (const std::string& r : carried_rulesets())
    if (r == v) return Version{v, (v[0] - '0') * 100 + (v[2] - '0') * 10 + (v[4] - '0')};
  return std::nullopt;
}

// The benchmarks closed_common.yaml and open_common.yaml accept, in their order.
const std::vector<std::string>& benchmarks(const Version& ver) {
  static const std::vector<std::string> b100 = {"resnet", "ssd", "maskrcnn", "minigo", "dlrm", "bert", "rnnt", "unet3d"};
  static const std::vector<std::string> b300 = {"resnet", "ssd", "maskrcnn", "gpt3", "dlrm_dcnv2", "bert", "rnnt", "unet3d"};
  static const std::vector<std::string> b310 = {"resnet", "ssd", "stable_diffusion", "maskrcnn", "gpt3",
                                                "dlrm_dcnv2", "bert", "rnnt", "unet3d"};
  return ver.n >= 310 ? b310 : ver.n >= 300 ? b300 : b100;
}

std::string list_text(const std::vector<std::string>& list) {
  std::string t;
  for (const auto& x : list) t += (t.empty() ? "[" : ", ") + ("'" + x + "'");
  return t + "]";
}

bool value_in_list(const Json& v, const std::vector<std::string>& list) {
  for (const auto& s : list)
    if (py_eq(v, Json(s))) return true;
  return false;
}

// 3.1.0: epoch_num or step_num; before: epoch_num.
Check has_epoch_or_step(const Version& ver) {
  if (ver.n < 310) return {"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }};
  return {"('epoch_num' in v['metadata']) | ('step_num' in v['metadata'])", [](Ctx& c) {
            const bool a = py_in("epoch_num", c.v_meta());
            const bool b = py_in("step_num", c.v_meta());
            return a || b;
          }};
}

Check value_not_empty() {
  return {"v['value'] != ''", [](Ctx& c) { return !py_eq(c.v_value(), Json("")); }};
}

Check num_cmp(std::string text, bool strict_gt) {
  return {std::move(text), [strict_gt](Ctx& c) {
            const double x = num(c.v_value(), strict_gt ? ">" : ">=");
            return strict_gt ? x > 0 : x >= 0;
          }};
}

// common.yaml's keys in its order, in four groups. The submission: organisation, platform,
// division (whose POST queues the division's file and, from 2.0.0, sets the compile-time limit),
// status.
void submission_keys(const Version& ver, std::vector<KeyRule>& k) {
  k.push_back({"submission_org", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"submission_platform", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"submission_division", "EXACTLY_ONE",
               {{"v['value'] in ['closed', 'open']",
                 [](Ctx& c) { return value_in_list(c.v_value(), {"closed", "open"}); }}},
               [ver](Ctx& c) {
                 c.enqueue(ver.dir() + "/" + py_str(c.v_value()) + "_common.yaml");
                 if (ver.n >= 200) c.s.compile_time_mins = py_eq(c.v_value(), Json("open")) ? 240 : 30;
               },
               {}});
  k.push_back({"submission_status", "EXACTLY_ONE",
               {{"v['value'] in ['cloud', 'onprem', 'preview', 'research']",
                 [](Ctx& c) {
                   return value_in_list(c.v_value(), {"cloud", "onprem", "preview", "research"});
                 }}},
               nullptr, {}});
}

// The run's frame: cache_clear, init_start / init_stop (within the compile-time limit: 30 minutes
// before 2.0.0, the division's from 2.0.0), run_start, run_stop.
void run_keys(const Version& ver, std::vector<KeyRule>& k) {
  Check init_limit = {"ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3)", [](Ctx& c) {
                        return c.ll.timestamp - c.s.first_init_start < c.s.compile_time_mins * 60 * 1e3;
                      }};
  if (ver.n < 200)
    init_limit = {"ll.timestamp - s['first_init_start'] < (30*60*1e3)",
                  [](Ctx& c) { return c.ll.timestamp - c.s.first_init_start < 30 * 60 * 1e3; }};
  k.push_back({"cache_clear", "AT_LEAST_ONE", {{"'value' in v", [](Ctx&) { return true; }}}, nullptr, {}});
  k.push_back({"init_start", "AT_LEAST_ONE",
               {{"not s['init_stopped']", [](Ctx& c) { return !c.s.init_stopped; }},
                {"not s['run_started']", [](Ctx& c) { return !c.s.run_started; }}},
               [](Ctx& c) {
                 c.s.init_started = true;
                 // Python's min(a, b) keeps a unless b < a (so a NaN timestamp is ignored).
                 if (c.ll.timestamp < c.s.first_init_start) c.s.first_init_start = c.ll.timestamp;
               },
               {}});
  k.push_back({"init_stop", "EXACTLY_ONE",
               {{"s['init_started']", [](Ctx& c) { return c.s.init_started; }},
                {"not s['run_started']", [](Ctx& c) { return !c.s.run_started; }},
                init_limit},
               [](Ctx& c) { c.s.init_stopped = true; }, {}});
  k.push_back({"run_start", "EXACTLY_ONE",
               {{"( s['init_stopped'] == True )", [](Ctx& c) { return c.s.init_stopped; }}},
               [](Ctx& c) { c.s.run_started = true; }, {}});
  k.push_back({"run_stop", "EXACTLY_ONE",
               {{"s['run_started']", [](Ctx& c) { return c.s.run_started; }},
                {"'status' in v['metadata']", [](Ctx& c) { return py_in("status", c.v_meta()); }}},
               [](Ctx& c) { c.s.run_stopped = true; }, {}});
}

// Blocks before 3.1.0: epoch_count (> 0) and first_epoch_num.
void block_keys(std::vector<KeyRule>& k) {
  k.push_back({"block_start", "AT_LEAST_ONE_OR(epoch_start)",
               {{"s['run_started']", [](Ctx& c) { return c.s.run_started; }},
                {"'epoch_count' in v['metadata']", [](Ctx& c) { return py_in("epoch_count", c.v_meta()); }},
                {"'first_epoch_num' in v['metadata']", [](Ctx& c) { return py_in("first_epoch_num", c.v_meta()); }},
                {"v['metadata']['epoch_count'] > 0",
                 [](Ctx& c) { return num(py_index(c.v_meta(), "epoch_count"), ">") > 0; }}},
               nullptr, {}});
  k.push_back({"block_stop", "AT_LEAST_ONE_OR(epoch_stop)",
               {{"'first_epoch_num' in v['metadata']", [](Ctx& c) { return py_in("first_epoch_num", c.v_meta()); }}},
               nullptr, {}});
}

// Blocks in 3.1.0: epoch_count and first_epoch_num, or step_num.
void block_keys_310(std::vector<KeyRule>& k) {
  k.push_back(
      {"block_start", "AT_LEAST_ONE_OR(epoch_start)",
       {{"s['run_started']", [](Ctx& c) { return c.s.run_started; }},
        {"('epoch_count' in v['metadata']) | ('step_num' in v['metadata'])",
         [](Ctx& c) {
           const bool a = py_in("epoch_count", c.v_meta());
           const bool b = py_in("step_num", c.v_meta());
           return a || b;
         }},
        {"'first_epoch_num' in v['metadata'] if 'epoch_count' in v['metadata'] else True",
         [](Ctx& c) { return py_in("epoch_count", c.v_meta()) ? py_in("first_epoch_num", c.v_meta()) : true; }},
        {"v['metadata']['epoch_count'] > 0 if 'epoch_count' in v['metadata'] else True",
         [](Ctx& c) {
           return py_in("epoch_count", c.v_meta()) ? num(py_index(c.v_meta(), "epoch_count"), ">") > 0 : true;
         }},
        {"v['metadata']['step_num'] >= 0 if 'step_num' in v['metadata'] else True",
         [](Ctx& c) {
           return py_in("step_num", c.v_meta()) ? num(py_index(c.v_meta(), "step_num"), ">=") >= 0 : true;
         }}},
       nullptr, {}});
  k.push_back({"block_stop", "AT_LEAST_ONE_OR(epoch_stop)",
               {{"('first_epoch_num' in v['metadata']) | ('step_num' in v['metadata'])",
                 [](Ctx& c) {
                   const bool a = py_in("first_epoch_num", c.v_meta());
                   const bool b = py_in("step_num", c.v_meta());
                   return a || b;
                 }}},
               nullptr, {}});
}

// The training's intervals: block_start / block_stop, or epoch_start / epoch_stop.
void block_and_epoch_keys(const Version& ver, std::vector<KeyRule>& k) {
  if (ver.n < 310) block_keys(k);
  else block_keys_310(k);
  k.push_back({"epoch_start", "AT_LEAST_ONE_OR(block_start)",
               {{"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}},
               nullptr, {}});
  k.push_back({"epoch_stop", "AT_LEAST_ONE_OR(block_stop)",
               {{"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}},
               nullptr, {}});
}

// Evaluation and the sample counts.
void eval_keys(const Version& ver, std::vector<KeyRule>& k) {
  k.push_back({"eval_start", "AT_LEAST_ONE_OR(block_start)", {has_epoch_or_step(ver)}, nullptr, {}});
  k.push_back({"eval_stop", "AT_LEAST_ONE_OR(block_stop)", {has_epoch_or_step(ver)}, nullptr, {}});
  k.push_back({"eval_accuracy", "AT_LEAST_ONE", {has_epoch_or_step(ver)}, nullptr, {}});
  k.push_back({"train_samples", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"eval_samples", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
}

RuleFile common(const Version& ver) {
  RuleFile f{ver.dir() + "/common.yaml", {}};
  submission_keys(ver, f.keys);
  run_keys(ver, f.keys);
  block_and_epoch_keys(ver, f.keys);
  eval_keys(ver, f.keys);
  return f;
}

// The benchmark's POST queues <division>_<benchmark>.yaml of the same ruleset, except 1.1.0's
// open_common.yaml, which queues 1.0.0's (as the official file does; the two are the same).
KeyRule submission_benchmark(const Version& ver, const std::string& division) {
  const std::string dir = ver.n == 110 && division == "open" ? std::string("training_1.0.0") : ver.dir();
  const std::vector<std::string>& list = benchmarks(ver);
  return {"submission_benchmark", "EXACTLY_ONE",
          {{"v['value'] in " + list_text(list), [&list](Ctx& c) { return value_in_list(c.v_value(), list); }}},
          [dir, division](Ctx& c) { c.enqueue(dir + "/" + division + "_" + py_str(c.v_value()) + ".yaml"); },
          {}};
}

RuleFile closed_common(const Version& ver) {
  RuleFile f{ver.dir() + "/closed_common.yaml", {}};
  f.keys.push_back(submission_benchmark(ver, "closed"));
  f.keys.push_back({"gradient_accumulation_steps", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)}, nullptr, {}});
  return f;
}

RuleFile open_common(const Version& ver) {
  RuleFile f{ver.dir() + "/open_common.yaml", {}};
  f.keys.push_back(submission_benchmark(ver, "open"));
  return f;
}

std::vector<Check> eval_accuracy_checks() {
  return {{"'BBOX' in v['value']", [](Ctx& c) { return py_in("BBOX", c.v_value()); }},
          {"'SEGM' in v['value']", [](Ctx& c) { return py_in("SEGM", c.v_value()); }},
          {"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}};
}

// A log line's value as the closed division's table reads it: Python's semantics, s['global_batch_size']
// from the rule file's state.
class LoggedValue final : public closed_division::RuleInput {
 public:
  explicit LoggedValue(const Ctx& c) : c_(c) {}
  double value(const char* op) const override { return num(c_.v_value(), op); }
  bool value_equals(double x) const override { return py_eq(c_.v_value(), Json(x)); }
  size_t value_length() const override { return py_len_of(c_.v_value()); }
  double global_batch_size(const char* op) const override {
    if (!c_.s.global_batch_size) throw PyException{"KeyError: 'global_batch_size'"};
    return num(*c_.s.global_batch_size, op);
  }
  double divide(double a, double b) const override { return py_div(a, b); }
  bool is_integer(double x) const override { return detail::is_integer(x); }

 private:
  const Ctx& c_;
};

// The CHECK of the closed division's rule on `key` as ruleset `ver` states it (closed_division.h).
Check closed_division_check(std::string_view key, const Version& ver) {
  const closed_division::Rule& r = closed_division::rule(key, ver.v);
  return {std::string(r.check), [&r](Ctx& c) { return r.holds(LoggedValue(c)); }};
}

// The 21 tensors closed_maskrcnn.yaml's END block requires (1.1.0 to 2.1.0), in its order.
const std::vector<std::string>& required_tensors() {
  static const std::vector<std::string> names = {
      "FPN_inner_block1", "FPN_layer_block1", "FPN_inner_block2", "FPN_layer_block2", "FPN_inner_block3",
      "FPN_layer_block3", "FPN_inner_block4", "FPN_layer_block4", "RPNHead_conv", "RPNHead_cls", "RPNHead_bbox",
      "ROI_BOX_FEATURE_EXTRACTOR_fc6", "ROI_BOX_FEATURE_EXTRACTOR_fc7", "ROI_BOX_PREDICTOR_cls",
      "ROI_BOX_PREDICTOR_bbox", "ROI_MASK_FEATURE_EXTRACTOR_fcn1", "ROI_MASK_FEATURE_EXTRACTOR_fcn2",
      "ROI_MASK_FEATURE_EXTRACTOR_fcn3", "ROI_MASK_FEATURE_EXTRACTOR_fcn4", "ROI_MASK_PREDICTOR_fcn5",
      "ROI_MASK_PREDICTOR_fcn_logits"};
  return names;
}

// sorted(s['initialized_tensors']) == sorted([...21 names...]): the logged tensors are the 21
// names, each once. A tensor that is not a string makes the lists differ (or sorted() raise).
bool tensors_complete(const RuleState& s) {
  std::vector<std::string> got;
  for (const Json& t : s.initialized_tensors) {
    if (!t.is_string()) return false;
    got.push_back(t.get<std::string>());
  }
  std::vector<std::string> want = required_tensors();
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  return got == want;
}

std::string tensors_detail(const RuleState& s) {
  std::map<std::string, int> count;
  int other = 0;
  for (const Json& t : s.initialized_tensors) {
    if (t.is_string()) ++count[t.get<std::string>()];
    else ++other;
  }
  std::string missing, repeated, unknown;
  for (const std::string& n : required_tensors()) {
    if (!count.contains(n)) missing += (missing.empty() ? "" : ", ") + n;
    else if (count[n] > 1) repeated += (repeated.empty() ? "" : ", ") + n + " x" + std::to_string(count[n]);
  }
  for (const auto& [n, c] : count)
    if (std::find(required_tensors().begin(), required_tensors().end(), n) == required_tensors().end())
      unknown += (unknown.empty() ? "" : ", ") + n;
  std::string out = std::to_string(s.initialized_tensors.size()) + " logged";
  if (!missing.empty()) out += "; missing: " + missing;
  if (!repeated.empty()) out += "; repeated: " + repeated;
  if (!unknown.empty()) out += "; not one of the 21: " + unknown;
  if (other > 0) out += "; " + std::to_string(other) + " not a string";
  return out;
}

// 1.1.0 to 2.1.0: BEGIN (initialized_tensors = [], and in 2.x global_batch_size = None), the
// weights_initialization KEY and the END check.
void weights_initialization(const Version& ver, RuleFile& f) {
  const bool gbs_none = ver.n >= 200;
  f.begin = [gbs_none](RuleState& s) {
    s.initialized_tensors.clear();
    if (gbs_none) s.global_batch_size = Json(nullptr);
  };
  f.keys.push_back({"weights_initialization", "AT_LEAST_ONE",
                    {{"'tensor' in v['metadata']", [](Ctx& c) { return py_in("tensor", c.v_meta()); }}},
                    [](Ctx& c) { c.s.initialized_tensors.push_back(py_index(c.v_meta(), "tensor")); }, {}});
  f.end = EndCheck{"sorted(s['initialized_tensors']) == sorted([the 21 tensors])", tensors_complete, tensors_detail};
}

RuleFile closed_maskrcnn(const Version& ver) {
  RuleFile f{ver.dir() + "/closed_maskrcnn.yaml", {}};
  if (ver.n >= 110 && ver.n < 300) weights_initialization(ver, f);
  auto& k = f.keys;
  // From 2.0.0 the batch is kept for the learning rate's rule below 16.
  k.push_back({"global_batch_size", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)},
               ver.n >= 200 ? std::function<void(Ctx&)>([](Ctx& c) { c.s.global_batch_size = c.v_value(); }) : nullptr,
               {}});
  k.push_back({"opt_base_learning_rate", "EXACTLY_ONE", {closed_division_check("opt_base_learning_rate", ver)},
               nullptr, {}});
  k.push_back({"opt_learning_rate_warmup_steps", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"opt_learning_rate_warmup_factor", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)}, nullptr, {}});
  k.push_back({"num_image_candidates", "EXACTLY_ONE", {closed_division_check("num_image_candidates", ver)},
               nullptr, {}});
  k.push_back({"opt_learning_rate_decay_factor", "EXACTLY_ONE",
               {closed_division_check("opt_learning_rate_decay_factor", ver)}, nullptr, {}});
  k.push_back({"opt_learning_rate_decay_steps", "EXACTLY_ONE",
               {closed_division_check("opt_learning_rate_decay_steps", ver)}, nullptr, {}});
  k.push_back({"min_image_size", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"max_image_size", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"eval_accuracy", "AT_LEAST_ONE", eval_accuracy_checks(), nullptr,
               Check{"v['value']['BBOX'] >= 0.377 and v['value']['BBOX'] < 1.0 and v['value']['SEGM'] >= "
                     "0.339 and v['value']['SEGM'] < 1.0",
                     [](Ctx& c) {
                       const Json& v = c.v_value();
                       return num(py_index(v, "BBOX"), ">=") >= 0.377 && num(py_index(v, "BBOX"), "<") < 1.0 &&
                              num(py_index(v, "SEGM"), ">=") >= 0.339 && num(py_index(v, "SEGM"), "<") < 1.0;
                     }}});
  return f;
}

RuleFile open_maskrcnn(const Version& ver) {
  RuleFile f{ver.dir() + "/open_maskrcnn.yaml", {}};
  f.keys.push_back({"eval_accuracy", "AT_LEAST_ONE", eval_accuracy_checks(), nullptr,
                    Check{"v['value']['BBOX'] < 1.0 and v['value']['SEGM'] < 1.0", [](Ctx& c) {
                            const Json& v = c.v_value();
                            return num(py_index(v, "BBOX"), "<") < 1.0 && num(py_index(v, "SEGM"), "<") < 1.0;
                          }}});
  return f;
}

}  // namespace

const std::vector<std::string>& carried_rulesets() {
  static const std::vector<std::string> v = {"1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"};
  return v;
}

namespace {

// "training_X.Y.Z/file.yaml" split into its ruleset and file, when X.Y.Z is carried.
std::optional<std::pair<Version, std::string>> split_name(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos || name.rfind("training_", 0) != 0) return std::nullopt;
  const auto ver = version_of(name.substr(9, slash - 9));
  if (!ver) return std::nullopt;
  return std::pair{*ver, name.substr(slash + 1)};
}

}  // namespace

// Rule files of other benchmarks exist in the official package; this checker does not carry them.
bool is_other_official_file(const std::string& name) {
  const auto parts = split_name(name);
  if (!parts) return false;
  for (const auto& b : benchmarks(parts->first))
    if (b != "maskrcnn" && (parts->second == "closed_" + b + ".yaml" || parts->second == "open_" + b + ".yaml"))
      return true;
  return false;
}

std::optional<RuleFile> rule_file(const std::string& name) {
  const auto parts = split_name(name);
  if (!parts) return std::nullopt;
  const auto& [ver, file] = *parts;
  if (file == "common.yaml") return common(ver);
  if (file == "closed_common.yaml") return closed_common(ver);
  if (file == "open_common.yaml") return open_common(ver);
  if (file == "closed_maskrcnn.yaml") return closed_maskrcnn(ver);
  if (file == "open_maskrcnn.yaml") return open_maskrcnn(ver);
  return std::nullopt;
}

}  // namespace mrcnn::logging::detail
