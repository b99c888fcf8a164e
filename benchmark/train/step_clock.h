// The time of a stretch of a training step on the device that runs it: the host's steady clock
// on the CPU (whose work is done when the call returns), a pair of timing events on the current
// stream elsewhere (CUDA, and any device whose LibTorch backend times events), read once both
// have completed, which the step's result read guarantees. A device without timed events gives
// no time (< 0), said once, never a host time that would measure only the queueing.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <memory>

namespace mrcnn::train {

class StepClock {
 public:
  struct Mark;  // a point on the device's stream (or the host's clock)

  // Null where the device cannot be timed.
  std::shared_ptr<Mark> mark(const at::Device& device);
  // Seconds from `from` to `to` (both from mark(), on the same device); < 0 when either is null.
  // Blocks until `to` has completed on the device.
  static double seconds(const std::shared_ptr<Mark>& from, const std::shared_ptr<Mark>& to);

 private:
  bool untimed_ = false;  // the device refused timing events once: not asked again
};

}  // namespace mrcnn::train
