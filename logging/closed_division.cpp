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

}  // namespace

bool near_integer(double x) { return std::isfinite(x) && detail::is_integer(x); }

std::span<const Rule> rules() { return kRules; }

const Rule& rule(std::string_view key) {
  for (const Rule& r : kRules)
    if (r.key == key) return r;
  throw std::out_of_range("closed_division::rule: no rule on \"" + std::string(key) + "\"");
}

}  // namespace mrcnn::logging::closed_division
