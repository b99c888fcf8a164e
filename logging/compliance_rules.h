// The rule files of the MLPerf Training compliance checker that a Mask R-CNN log meets, for every
// ruleset with Mask R-CNN (training_1.0.0 ... training_3.1.0: common.yaml, closed_common.yaml /
// open_common.yaml, closed_maskrcnn.yaml / open_maskrcnn.yaml), as data: per key its requirement,
// its CHECKs and its POST code, and a file's BEGIN and END blocks. Each CHECK keeps the official
// Python text, which the report quotes, beside its C++ translation. The rulesets differ in
// (compared file by file with the official package):
//   - the init limit: 30 minutes fixed in 1.0.0 and 1.1.0; from 2.0.0 set by submission_division
//     (closed 30, open 240), so that a division logged after init_stop reads as a 0-minute limit;
//   - block and eval metadata: 3.1.0 also takes step_num where the others need the epochs;
//   - the benchmarks closed_common / open_common name (and 1.1.0's open_common queues 1.0.0's
//     open_<benchmark>.yaml);
//   - closed_maskrcnn: 1.1.0 to 2.1.0 require the 21 weights_initialization tensors (a BEGIN, a
//     KEY and an END block); 2.0.0 on keeps s['global_batch_size'] and allows 0.02/K below 16.
// Internal to mrcnn_logging (the compliance check); compliance.cpp runs them.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "logging/log_reader.h"

namespace mrcnn::logging::detail {

struct RuleState {  // the official `s` dictionary, fresh for each rule file
  bool init_started = false, init_stopped = false, run_started = false, run_stopped = false;
  double first_init_start = 9e99;
  double compile_time_mins = 0;
  std::optional<Json> global_batch_size;  // unset: KeyError; null (2.x's BEGIN): TypeError
  std::vector<Json> initialized_tensors;  // weights_initialization's POST (1.1.0 to 2.1.0)
};

// What a CHECK or POST sees: `s`, the line `ll` and its record `v`, and the queue of rule files
// still to run, where POST code adds files (the official enqueue_config).
struct Ctx {
  RuleState& s;
  const LogLine& ll;
  std::deque<std::string>& pending_files;
  const Json& v_value() const { return ll.value; }
  const Json& v_meta() const { return ll.metadata; }
  void enqueue(const std::string& config) const { pending_files.push_back(config); }
};

// Returns the CHECK's verdict; throws PyException where the Python expression raises.
struct Check {
  std::string text;
  std::function<bool(Ctx&)> fn;
};

struct KeyRule {
  std::string name;
  std::string req;  // EXACTLY_ONE, AT_LEAST_ONE, AT_LEAST_ONE_OR(x) or ""
  std::vector<Check> checks;
  std::function<void(Ctx&)> post;
  std::optional<Check> at_least_one_check;
};

// A file's END block: a CHECK on the state after every line (a failure is not overwritable).
struct EndCheck {
  std::string text;
  std::function<bool(const RuleState&)> fn;  // throws PyException where Python raises
  std::function<std::string(const RuleState&)> detail;  // what differs, for the message
};

struct RuleFile {
  std::string name;
  std::vector<KeyRule> keys;
  std::function<void(RuleState&)> begin;  // the BEGIN block, when the file has one
  std::optional<EndCheck> end;
};

// The rule file named as the official checker names it ("training_3.1.0/closed_maskrcnn.yaml"),
// or std::nullopt when this checker does not carry it.
std::optional<RuleFile> rule_file(const std::string& name);

// Whether `name` is a rule file of another benchmark in a ruleset carried here (official, but not
// carried: this checker implements maskrcnn only).
bool is_other_official_file(const std::string& name);

// The training rulesets with Mask R-CNN rules, oldest first: 1.0.0, 1.1.0, 2.0.0, 2.1.0, 3.0.0, 3.1.0.
const std::vector<std::string>& carried_rulesets();

}  // namespace mrcnn::logging::detail
