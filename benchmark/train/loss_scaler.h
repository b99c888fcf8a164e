// Dynamic loss scaling for float16 training (the reference's "loss scaling", made part of the
// precision switch instead of a second setting): the loss is multiplied by `scale` before
// backward; gradients are divided by it before the update; a step whose gradients are not finite
// is skipped and the scale halves; after `growth_interval` finite steps in a row it doubles.
// Disabled (scale 1, never skips) for float32 and bfloat16, whose range needs no scaling.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "benchmark/train/sgd.h"

namespace mrcnn::train {

struct LossScalerOptions {
  bool enabled = false;
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Divides every gradient by the scale and checks them all, in one multi-tensor pass per
  // device without reading anything back: returns a float32 [1] on the gradients' device, 1 if
  // any gradient is NaN or infinite (then the caller skips the optimizer step), else 0. With
  // scaling disabled it only checks. Gradients must share one device.
  at::Tensor unscale(const std::vector<NamedParameter>& parameters) const;
  // Adjusts the scale after a step (found_non_finite: what unscale found).
  void update(bool found_non_finite);

  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }
  bool enabled() const { return options_.enabled; }
  // For checkpoints.
  void restore(double scale, int64_t good_steps);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
};

}  // namespace mrcnn::train
