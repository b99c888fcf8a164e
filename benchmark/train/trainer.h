// One training step, the reference's way: the model's losses (it applies its own precision),
// their sum (model::total_loss), backward (loss-scaled for float16), gradient all-reduce over ranks,
// unscale, finite-gradient check, optional clipping by global norm, the loss scale's update and
// SGD, all on the device: where a gradient or the loss is not finite the update changes nothing
// (the float16 skip), decided there. None of this waits for the host (on a GPU the network's
// samplers still read their counts: benchmark/README.md, "The training step on a GPU").
//
// What the host needs to know of a step (every loss, whether it was skipped, the norm, GPU kernel
// faults) is gathered on the device and read back in one copy every `results_every` steps, for all
// the steps since the last read; each read also reads the steps' faults. Then a non-finite loss
// ends the run (NonFiniteLoss, naming its step), as does a non-finite gradient without loss
// scaling; a step with either made no update. With results_every 1 (the default) each step's
// results come back with the step; with N they come back up to N - 1 steps late, in order, and
// the step they name is still the step that met them.
//
// The trainer sees the network only through TrainableModel, so the same loop drives Mask R-CNN
// and the small models its tests use. Not thread-safe; one trainer per training thread.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
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
#include "benchmark/train/step_clock.h"
#include "benchmark/train/trainer_state.h"
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
  // Whether the network draws each image's samples from a stream keyed by the image itself (Mask
  // R-CNN's sampling_streams "per_image"). Then every rank seeds its steps from rank 0's step
  // stream (for batches that carry image ids), so that an image gets the same samples whichever
  // rank trains it.
  virtual bool samples_keyed_by_image() const { return false; }
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
  // Several ranks: reduce gradient buckets while the backward pass runs (GradientReducer), or
  // all of them after it.
  bool overlap_allreduce = true;
  // Steps between reads of the step results from the device (see the top of this file); 1 reads
  // every step. On a GPU a read is a host synchronization: N > 1 leaves the step without one.
  int64_t results_every = 1;
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
  // When the host had queued the step's work. A device's results are read every
  // results_every_steps steps, several at once: the read's time is the last one's, not theirs.
  std::chrono::steady_clock::time_point queued{};
  // This rank's own part of the step: its forward and backward, up to where it waits for the
  // other ranks in the gradient all-reduce (seconds; < 0 where the device cannot time it). On
  // the CPU the host's clock; on a GPU a pair of device events on the step's stream, read with
  // the step's results (no extra wait). What makes the slowest rank of many slower than one
  // (forecast's straggler term).
  double compute_seconds = -1;
};

class Trainer {
 public:
  // `model` and `comm` must outlive the trainer.
  Trainer(TrainableModel& model, TrainerOptions options, comm::Communicator& comm);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // What a trainer hands back of each step, in step order, as the results are read.
  using ResultSink = std::function<void(const StepResult&)>;

  // One step; `done` receives the results read at this step (none, or those of every step since
  // the last read, this one last). Throws NonFiniteLoss or a GPU fault's error after handing the
  // earlier steps' results to `done`.
  void step(const model::Batch& batch, const ResultSink& done);
  // Reads the results of the steps not read yet (at the end of an epoch, before a checkpoint).
  void read_results(const ResultSink& done);
  // One step, its results read at once (tests and tools); throws std::logic_error when earlier
  // steps are unread.
  StepResult step(const model::Batch& batch);
  // Steps taken whose results have not been read.
  int64_t unread_steps() const { return static_cast<int64_t>(unread_.size()); }

  int64_t global_step() const { return step_; }
  double lr_at(int64_t step) const { return schedule_.lr(step); }
  const TrainerOptions& options() const { return options_; }

  // Everything of the trainer a checkpoint holds (the network's own state is the model's). Reads
  // the loss scale from the device; call after read_results.
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
  // Steps not read yet: what the host knows of each (its losses' names, with zeros), and its
  // results on the device, float64 [k] (float32 where the device has no float64): the losses
  // in name order, their sum, the non-finite flag, on a GPU the fault word, with clipping the
  // norm.
  struct Unread {
    StepResult known;
    at::Tensor values;
    std::shared_ptr<StepClock::Mark> start, reduce;  // device events (null on the CPU)
  };
  StepClock clock_;
  std::vector<Unread> unread_;
};

}  // namespace mrcnn::train
