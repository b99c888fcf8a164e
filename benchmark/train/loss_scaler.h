// Dynamic loss scaling for float16 training (the reference's "loss scaling", made part of the
// precision switch instead of a second setting): the loss is multiplied by `scale` before
// backward; gradients are divided by it before the update; a step whose gradients are not finite
// is skipped and the scale halves; after `growth_interval` finite steps in a row it doubles.
// Disabled (scale 1, never skips) for float32 and bfloat16, whose range needs no scaling.
//
// The scale and the count of finite steps live on the gradients' device and are updated there
// (LibTorch's _amp_update_scale_): a step never waits for the host to learn whether it overflowed.
// scale() and good_steps() read them (checkpoints, tests).
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
  at::Tensor unscale(const std::vector<NamedParameter>& parameters);
  // Adjusts the scale after a step, on the device: `found_inf` is what unscale returned.
  void update(const at::Tensor& found_inf);

  double scale() const;
  int64_t good_steps() const;
  bool enabled() const { return options_.enabled; }
  // For checkpoints.
  void restore(double scale, int64_t good_steps);

 private:
  // The state on `device` (moved there once, when the gradients are first seen there).
  void place(const at::Device& device);

  LossScalerOptions options_;
  at::Tensor scale_;       // float32 [1]; powers of two, exact in float32
  at::Tensor good_steps_;  // int32 [1]: finite steps in a row since the last change
};

}  // namespace mrcnn::train
