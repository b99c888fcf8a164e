#include "logging/compliance_rules.h"

#include "logging/closed_division.h"
#include "logging/py_semantics.h"

namespace mrcnn::logging::detail {
namespace {

const std::vector<std::string> kBenchmarks = {"resnet", "ssd", "stable_diffusion", "maskrcnn", "gpt3",
                                              "dlrm_dcnv2", "bert", "rnnt", "unet3d"};

bool value_in_list(const Json& v, const std::vector<std::string>& list) {
  for (const auto& s : list)
    if (py_eq(v, Json(s))) return true;
  return false;
}

Check has_epoch_or_step() {
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
// division (whose POST queues the division's file and sets the compile-time limit), status.
void submission_keys(std::vector<KeyRule>& k) {
  k.push_back({"submission_org", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"submission_platform", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"submission_division", "EXACTLY_ONE",
               {{"v['value'] in ['closed', 'open']",
                 [](Ctx& c) { return value_in_list(c.v_value(), {"closed", "open"}); }}},
               [](Ctx& c) {
                 c.enqueue("training_3.1.0/" + py_str(c.v_value()) + "_common.yaml");
                 c.s.compile_time_mins = py_eq(c.v_value(), Json("open")) ? 240 : 30;
               },
               {}});
  k.push_back({"submission_status", "EXACTLY_ONE",
               {{"v['value'] in ['cloud', 'onprem', 'preview', 'research']",
                 [](Ctx& c) {
                   return value_in_list(c.v_value(), {"cloud", "onprem", "preview", "research"});
                 }}},
               nullptr, {}});
}

// The run's frame: cache_clear, init_start / init_stop (within the compile-time limit), run_start,
// run_stop.
void run_keys(std::vector<KeyRule>& k) {
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
                {"ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3)",
                 [](Ctx& c) {
                   return c.ll.timestamp - c.s.first_init_start < c.s.compile_time_mins * 60 * 1e3;
                 }}},
               [](Ctx& c) { c.s.init_stopped = true; }, {}});
  k.push_back({"run_start", "EXACTLY_ONE",
               {{"( s['init_stopped'] == True )", [](Ctx& c) { return c.s.init_stopped; }}},
               [](Ctx& c) { c.s.run_started = true; }, {}});
  k.push_back({"run_stop", "EXACTLY_ONE",
               {{"s['run_started']", [](Ctx& c) { return c.s.run_started; }},
                {"'status' in v['metadata']", [](Ctx& c) { return py_in("status", c.v_meta()); }}},
               [](Ctx& c) { c.s.run_stopped = true; }, {}});
}

// The training's intervals: block_start / block_stop, or epoch_start / epoch_stop.
void block_and_epoch_keys(std::vector<KeyRule>& k) {
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
  k.push_back({"epoch_start", "AT_LEAST_ONE_OR(block_start)",
               {{"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}},
               nullptr, {}});
  k.push_back({"epoch_stop", "AT_LEAST_ONE_OR(block_stop)",
               {{"'epoch_num' in v['metadata']", [](Ctx& c) { return py_in("epoch_num", c.v_meta()); }}},
               nullptr, {}});
}

// Evaluation and the sample counts.
void eval_keys(std::vector<KeyRule>& k) {
  k.push_back({"eval_start", "AT_LEAST_ONE_OR(block_start)", {has_epoch_or_step()}, nullptr, {}});
  k.push_back({"eval_stop", "AT_LEAST_ONE_OR(block_stop)", {has_epoch_or_step()}, nullptr, {}});
  k.push_back({"eval_accuracy", "AT_LEAST_ONE", {has_epoch_or_step()}, nullptr, {}});
  k.push_back({"train_samples", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
  k.push_back({"eval_samples", "EXACTLY_ONE", {value_not_empty()}, nullptr, {}});
}

RuleFile common_310() {
  RuleFile f{"training_3.1.0/common.yaml", {}};
  submission_keys(f.keys);
  run_keys(f.keys);
  block_and_epoch_keys(f.keys);
  eval_keys(f.keys);
  return f;
}

KeyRule submission_benchmark(const std::string& division) {
  return {"submission_benchmark", "EXACTLY_ONE",
          {{"v['value'] in ['resnet', 'ssd', 'stable_diffusion', 'maskrcnn', 'gpt3', 'dlrm_dcnv2', "
            "'bert', 'rnnt', 'unet3d']",
            [](Ctx& c) { return value_in_list(c.v_value(), kBenchmarks); }}},
          [division](Ctx& c) {
            c.enqueue("training_3.1.0/" + division + "_" + py_str(c.v_value()) + ".yaml");
          },
          {}};
}

RuleFile closed_common_310() {
  RuleFile f{"training_3.1.0/closed_common.yaml", {}};
  f.keys.push_back(submission_benchmark("closed"));
  f.keys.push_back({"gradient_accumulation_steps", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)}, nullptr, {}});
  return f;
}

RuleFile open_common_310() {
  RuleFile f{"training_3.1.0/open_common.yaml", {}};
  f.keys.push_back(submission_benchmark("open"));
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

// The CHECK of the closed division's rule on `key` (closed_division.h).
Check closed_division_check(std::string_view key) {
  const closed_division::Rule& r = closed_division::rule(key);
  return {std::string(r.check), [&r](Ctx& c) { return r.holds(LoggedValue(c)); }};
}

RuleFile closed_maskrcnn_310() {
  RuleFile f{"training_3.1.0/closed_maskrcnn.yaml", {}};
  auto& k = f.keys;
  k.push_back({"global_batch_size", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)},
               [](Ctx& c) { c.s.global_batch_size = c.v_value(); }, {}});
  k.push_back({"opt_base_learning_rate", "EXACTLY_ONE", {closed_division_check("opt_base_learning_rate")},
               nullptr, {}});
  k.push_back({"opt_learning_rate_warmup_steps", "EXACTLY_ONE", {num_cmp("v['value'] >= 0", false)}, nullptr, {}});
  k.push_back({"opt_learning_rate_warmup_factor", "EXACTLY_ONE", {num_cmp("v['value'] > 0", true)}, nullptr, {}});
  k.push_back({"num_image_candidates", "EXACTLY_ONE", {closed_division_check("num_image_candidates")}, nullptr,
               {}});
  k.push_back({"opt_learning_rate_decay_factor", "EXACTLY_ONE",
               {closed_division_check("opt_learning_rate_decay_factor")}, nullptr, {}});
  k.push_back({"opt_learning_rate_decay_steps", "EXACTLY_ONE",
               {closed_division_check("opt_learning_rate_decay_steps")}, nullptr, {}});
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

RuleFile open_maskrcnn_310() {
  RuleFile f{"training_3.1.0/open_maskrcnn.yaml", {}};
  f.keys.push_back({"eval_accuracy", "AT_LEAST_ONE", eval_accuracy_checks(), nullptr,
                    Check{"v['value']['BBOX'] < 1.0 and v['value']['SEGM'] < 1.0", [](Ctx& c) {
                            const Json& v = c.v_value();
                            return num(py_index(v, "BBOX"), "<") < 1.0 && num(py_index(v, "SEGM"), "<") < 1.0;
                          }}});
  return f;
}

}  // namespace

// Rule files of other benchmarks exist in the official package; this checker does not carry them.
bool is_other_official_file(const std::string& name) {
  for (const auto& b : kBenchmarks)
    if (b != "maskrcnn" && (name == "training_3.1.0/closed_" + b + ".yaml" ||
                            name == "training_3.1.0/open_" + b + ".yaml"))
      return true;
  return false;
}

std::optional<RuleFile> rule_file(const std::string& name) {
  if (name == "training_3.1.0/common.yaml") return common_310();
  if (name == "training_3.1.0/closed_common.yaml") return closed_common_310();
  if (name == "training_3.1.0/open_common.yaml") return open_common_310();
  if (name == "training_3.1.0/closed_maskrcnn.yaml") return closed_maskrcnn_310();
  if (name == "training_3.1.0/open_maskrcnn.yaml") return open_maskrcnn_310();
  return std::nullopt;
}

}  // namespace mrcnn::logging::detail
