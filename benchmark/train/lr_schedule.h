// Learning-rate schedule of the MLPerf Mask R-CNN reference (maskrcnn-benchmark's
// WarmupMultiStepLR): linear warmup from base_lr * warmup_factor to base_lr over warmup_steps,
// then a step decay by decay_factor at each of decay_steps.
//
//   lr(s) = base_lr * w(s) * decay_factor ^ (number of decay steps <= s)
//   w(s)  = warmup_factor * (1 - s / warmup_steps) + s / warmup_steps   for s < warmup_steps, else 1
//
// `s` is the 0-based index of the optimizer step about to be taken. Stateless and pure, so a
// resumed run computes exactly the rates of the uninterrupted one.
#pragma once

#include <cstdint>
#include <vector>

namespace mrcnn::train {

struct LrScheduleOptions {
  double base_lr = 0.02;             // opt_base_learning_rate
  int64_t warmup_steps = 500;        // opt_learning_rate_warmup_steps
  double warmup_factor = 1.0 / 3.0;  // opt_learning_rate_warmup_factor
  std::vector<int64_t> decay_steps = {60000, 80000};  // opt_learning_rate_decay_steps (sorted)
  double decay_factor = 0.1;         // opt_learning_rate_decay_factor
};

class LrSchedule {
 public:
  // Throws std::invalid_argument naming the field for impossible values (base_lr <= 0,
  // warmup_steps < 0, warmup_factor outside (0, 1], decay steps unsorted or negative,
  // decay_factor outside (0, 1]).
  explicit LrSchedule(LrScheduleOptions options);
  double lr(int64_t step) const;
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace mrcnn::train
