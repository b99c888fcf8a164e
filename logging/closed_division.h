// The closed division's rules on Mask R-CNN's hyperparameters (MLPerf Training closed_maskrcnn.yaml,
// of 3.1.0 and of every earlier ruleset with Mask R-CNN), written once and read twice: by the compliance check (`check`, on the
// values a log holds) and by config validation (config::closed_division_violations, on a
// configuration before it runs). Each rule is an expression over a RuleInput, which its reader
// supplies with its own semantics: the checker Python's (raising what Python raises), config its
// typed fields. Config adds the reference's fixed values that the official rules leave open
// (image sizes, weight decay, momentum, the decay steps' schedule, the network).
// The table is constant data; any thread may read it.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace mrcnn::logging::closed_division {

// mlp_compliance.is_integer's test, |round(x) - x| < 1e-5; false for NaN and infinities.
bool near_integer(double x);

// The value a rule reads (the log's value of the rule's key, or the configuration's), and what
// else it reads, as the reader defines them. The arithmetic is plain unless the reader says
// otherwise (the checker's raises where Python raises).
class RuleInput {
 public:
  virtual ~RuleInput() = default;
  virtual double value(const char* op) const = 0;         // the value, as an operand of `op`
  virtual bool value_equals(double x) const = 0;          // value == x
  virtual size_t value_length() const = 0;                // len(value)
  virtual double global_batch_size(const char* op) const = 0;  // the run's, an operand of `op`
  virtual double divide(double a, double b) const { return a / b; }
  virtual bool is_integer(double x) const { return near_integer(x); }
};

struct Rule {
  std::string_view key;          // the log key the rule constrains ("opt_base_learning_rate")
  std::string_view check;        // the official CHECK (Python), as `check` quotes it
  std::string_view requirement;  // the rule in words, as config validation says it
  bool (*holds)(const RuleInput&);
};

// The rules of 3.1.0, in closed_maskrcnn.yaml's order: opt_base_learning_rate, num_image_candidates,
// opt_learning_rate_decay_factor, opt_learning_rate_decay_steps.
std::span<const Rule> rules();

// The rules as training ruleset `ruleset` ("1.0.0" ... "3.1.0") states them. They differ in one
// rule: before 2.0.0 the learning rate is 0.02*K only (no 0.02/K below a global batch of 16).
std::span<const Rule> rules(std::string_view ruleset);

// The rule on `key` (of 3.1.0, or of `ruleset`); throws std::out_of_range when the table has none.
const Rule& rule(std::string_view key);
const Rule& rule(std::string_view key, std::string_view ruleset);

}  // namespace mrcnn::logging::closed_division
