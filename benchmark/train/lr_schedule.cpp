#include "benchmark/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mrcnn::train {

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("learning-rate schedule: " + what); };
  const auto& o = options_;
  if (!(o.base_lr > 0) || !std::isfinite(o.base_lr)) bad("base_lr must be a positive number");
  if (o.warmup_steps < 0) bad("warmup_steps must be >= 0");
  if (!(o.warmup_factor > 0 && o.warmup_factor <= 1)) bad("warmup_factor must be in (0, 1]");
  if (!(o.decay_factor > 0 && o.decay_factor <= 1)) bad("decay_factor must be in (0, 1]");
  if (!std::is_sorted(o.decay_steps.begin(), o.decay_steps.end()))
    bad("decay_steps must be in increasing order");
  if (!o.decay_steps.empty() && o.decay_steps.front() < 0) bad("decay_steps must be >= 0");
}

double LrSchedule::lr(int64_t step) const {
  const auto& o = options_;
  double warmup = 1.0;
  if (step < o.warmup_steps) {
    const double alpha = static_cast<double>(step) / static_cast<double>(o.warmup_steps);
    warmup = o.warmup_factor * (1.0 - alpha) + alpha;
  }
  // bisect_right: decay steps <= step have been passed.
  const auto passed = std::upper_bound(o.decay_steps.begin(), o.decay_steps.end(), step) - o.decay_steps.begin();
  return o.base_lr * warmup * std::pow(o.decay_factor, static_cast<double>(passed));
}

}  // namespace mrcnn::train
