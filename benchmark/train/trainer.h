// One training step, the reference's way: forward (under autocast when the precision asks),
// sum of the named losses, backward (loss-scaled for float16), gradient all-reduce over ranks,
// unscale, finite-gradient check and optional clipping by global norm (all on the device), then
// the step's one read back to the host (losses, the gradient check, the norm, GPU kernel faults):
// a non-finite loss ends the run, a non-finite gradient skips the update. Then SGD with the
// scheduled learning rate.
//
// The trainer sees the network only through TrainableModel, so the same loop drives Mask R-CNN
// and the small models its tests use. Not thread-safe; one trainer per training thread.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/train/gradient_reducer.h"
#include "benchmark/train/loss_scaler.h"
#include "benchmark/train/lr_schedule.h"
#include "benchmark/train/sgd.h"
#include "model/options.h"
#include "model/structures.h"

namespace mrcnn::train {

// What the trainer and the timed run need from a network.
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  // Training-mode forward: named scalar losses (float32) for one batch.
  virtual std::map<std::string, at::Tensor> losses(const model::Batch& batch) = 0;
  // Inference on one batch: detections per image, in original image coordinates.
  virtual std::vector<model::Detections> detect(const model::Batch& batch) = 0;
  // Parameters the optimizer updates (requires_grad), with stable names.
  virtual std::vector<NamedParameter> trainable_parameters() = 0;
  // Everything a checkpoint must hold to restore the network bit for bit, by name.
  virtual std::map<std::string, at::Tensor> state_dict() = 0;
  // Restores state_dict(); throws naming the first missing, unexpected or mis-shaped entry.
  virtual void load_state_dict(const std::map<std::string, at::Tensor>& state) = 0;
  virtual void set_training(bool training) = 0;
  // Seeds every random draw of the next forward (anchor and RoI sampling). The trainer calls it
  // before each step with a seed derived from (run seed, step), so a resumed run draws what the
  // uninterrupted run drew without saving generator state.
  virtual void set_step_seed(uint64_t seed) = 0;
};

using model::Precision;

struct TrainerOptions {
  LrScheduleOptions schedule;
  SgdOptions sgd;
  Precision precision = Precision::kFloat32;
  // Clip gradients to this global L2 norm; 0 disables clipping.
  double gradient_clip_norm = 0.0;
  // The run's seed: step s of rank r draws its samples from seeding::step_seed(seed, r, s).
  uint64_t seed = 0;
  // Every rank draws from rank 0's step stream (for batches that carry image ids): for a model
  // whose samples come from per-image streams keyed by the image (model sampling_streams
  // "per_image"), an image then gets the same samples whichever rank trains it.
  bool same_stream_on_every_rank = false;
  // Several ranks: reduce gradient buckets while the backward pass runs (GradientReducer), or
  // all of them after it.
  bool overlap_allreduce = true;
  at::Device device = at::kCPU;
};

// Thrown when a loss is NaN or infinite: the run ends (run_stop "aborted"), naming the step.
struct NonFiniteLoss : std::runtime_error {
  NonFiniteLoss(int64_t step, const std::string& what)
      : std::runtime_error("loss became " + what + " at step " + std::to_string(step)), step(step) {}
  int64_t step;
};

struct StepResult {
  int64_t step = 0;                      // 0-based index of this optimizer step
  double lr = 0;                         // base learning rate used
  double loss = 0;                       // sum of the losses
  std::map<std::string, double> losses;  // each named loss
  double grad_norm = 0;                  // before clipping (0 unless clipping is on)
  bool skipped = false;                  // float16 overflow: no update this step
  int64_t images = 0;                    // images in this rank's batch
};

struct TrainerState {
  int64_t step = 0;  // optimizer steps taken
  std::map<std::string, at::Tensor> optimizer;  // momentum buffers by parameter name
  double loss_scale = 1.0;
  int64_t scaler_good_steps = 0;
};

class Trainer {
 public:
  // `model` and `comm` must outlive the trainer.
  Trainer(TrainableModel& model, TrainerOptions options, comm::Communicator& comm);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  StepResult step(const model::Batch& batch);

  int64_t global_step() const { return step_; }
  double lr_at(int64_t step) const { return schedule_.lr(step); }
  const TrainerOptions& options() const { return options_; }

  // Everything of the trainer a checkpoint holds (the network's own state is the model's).
  TrainerState state() const;
  // Continues from `state` as if the steps before it had run in this process.
  void load_state(const TrainerState& state);
  const LossScaler& scaler() const { return scaler_; }

 private:
  TrainableModel& model_;
  TrainerOptions options_;
  comm::Communicator& comm_;
  LrSchedule schedule_;
  Sgd sgd_;
  LossScaler scaler_;
  std::unique_ptr<GradientReducer> reducer_;  // several ranks
  int64_t step_ = 0;
};

}  // namespace mrcnn::train
