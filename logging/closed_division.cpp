#include "logging/closed_division.h"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "logging/py_semantics.h"

namespace mrcnn::logging::closed_division {
namespace {

// 0.02 * K, or 0.02 / K below a global batch of 16; the batch is read only when the first fails.
bool base_learning_rate(const RuleInput& in) {
  if (in.is_integer(in.divide(in.value("/"), 0.02))) return true;
  if (!(in.global_batch_size("<") < 16)) return false;
  return in.is_integer(in.divide(0.02, in.value("/")));
}

// 0.02 * K only (1.0.0 and 1.1.0).
bool base_learning_rate_multiple(const RuleInput& in) { return in.is_integer(in.divide(in.value("/"), 0.02)); }

bool image_candidates(const RuleInput& in) { return in.is_integer(in.divide(in.value("/"), 1000.0)); }

bool decay_factor(const RuleInput& in) { return in.value_equals(0.1); }

bool decay_steps(const RuleInput& in) { return in.value_length() == 2; }

constexpr std::array<Rule, 4> kRules = {{
    {"opt_base_learning_rate",
     "is_integer(v['value'] / 0.02) or ( s['global_batch_size'] < 16 and is_integer(0.02 / v['value']) )",
     "the learning rate must be 0.02*K for an integer K (or 0.02/K when the global batch size is below 16)",
     base_learning_rate},
    {"num_image_candidates", "is_integer(v['value'] / 1000.0)", "must be a multiple of 1000",
     image_candidates},
    {"opt_learning_rate_decay_factor", "v['value'] == 0.1", "must be 0.1", decay_factor},
    {"opt_learning_rate_decay_steps", "len(v['value']) == 2", "must be two steps", decay_steps},
}};

// 1.0.0 and 1.1.0: the same table but for the learning rate.
constexpr std::array<Rule, 4> kRulesBefore200 = {{
    {"opt_base_learning_rate", "is_integer(v['value'] / 0.02)",
     "the learning rate must be 0.02*K for an integer K", base_learning_rate_multiple},
    kRules[1],
    kRules[2],
    kRules[3],
}};

}  // namespace

bool near_integer(double x) { return std::isfinite(x) && detail::is_integer(x); }

std::span<const Rule> rules() { return kRules; }

std::span<const Rule> rules(std::string_view ruleset) {
  if (ruleset == "1.0.0" || ruleset == "1.1.0") return kRulesBefore200;
  return kRules;
}

const Rule& rule(std::string_view key) { return rule(key, "3.1.0"); }

const Rule& rule(std::string_view key, std::string_view ruleset) {
  for (const Rule& r : rules(ruleset))
    if (r.key == key) return r;
  throw std::out_of_range("closed_division::rule: no rule on \"" + std::string(key) + "\"");
}

}  // namespace mrcnn::logging::closed_division
