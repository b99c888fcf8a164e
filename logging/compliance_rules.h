// The rule files of the MLPerf Training 3.1.0 compliance checker that a Mask R-CNN log meets
// (training_3.1.0/common.yaml, closed_common.yaml / open_common.yaml, closed_maskrcnn.yaml /
// open_maskrcnn.yaml), as data: per key its requirement, its CHECKs and its POST code. Each CHECK
// keeps the official Python text, which the report quotes, beside its C++ translation.
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
  std::optional<Json> global_batch_size;
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

struct RuleFile {
  std::string name;
  std::vector<KeyRule> keys;
};

// The rule file named as the official checker names it ("training_3.1.0/closed_maskrcnn.yaml"),
// or std::nullopt when this checker does not carry it.
std::optional<RuleFile> rule_file(const std::string& name);

// Whether `name` is a 3.1.0 rule file of another benchmark (official, but not carried here).
bool is_other_official_file(const std::string& name);

}  // namespace mrcnn::logging::detail
