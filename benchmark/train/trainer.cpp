#include "benchmark/train/trainer.h"

#include <ATen/record_function.h>

#include <cmath>

#include "model/ops/device_faults.h"
#include "model/seeding.h"

namespace mrcnn::train {

Trainer::Trainer(TrainableModel& model, TrainerOptions options, comm::Communicator& comm)
    : model_(model),
      options_(std::move(options)),
      comm_(comm),
      schedule_(options_.schedule),
      sgd_(model.trainable_parameters(), options_.sgd),
      // Float16 has too little range for raw gradients; bfloat16 and float32 need no scaling.
      scaler_(LossScalerOptions{.enabled = options_.precision == Precision::kFloat16}) {
  if (options_.gradient_clip_norm < 0 || !std::isfinite(options_.gradient_clip_norm))
    throw std::invalid_argument("gradient_clip_norm must be >= 0 (0 disables clipping)");
  if (sgd_.parameters().empty()) throw std::invalid_argument("the model has no trainable parameters");
  if (comm_.world_size() > 1) {
    std::vector<at::Tensor> tensors;
    for (const auto& p : sgd_.parameters()) tensors.push_back(p.tensor);
    reducer_ = std::make_unique<GradientReducer>(std::move(tensors), comm_, options_.overlap_allreduce);
  }
}

Trainer::~Trainer() = default;

// Each part of a step is a named scope for profiles (`train --profile`): mrcnn::train_step holds
// mrcnn::forward (the model's own stages inside), mrcnn::backward, mrcnn::allreduce and
// mrcnn::optimizer (unscale, clip, SGD).
StepResult Trainer::step(const model::Batch& batch) {
  RECORD_FUNCTION("mrcnn::train_step", std::vector<c10::IValue>());
  StepResult r;
  r.step = step_;
  r.lr = schedule_.lr(step_);
  r.images = batch.size();

  model_.set_training(true);
  // One stream for all ranks only where images carry their own keys (their ids): without ids an
  // image's key is its position in the batch, the same on every rank.
  const bool shared = options_.same_stream_on_every_rank && !batch.image_ids.empty();
  model_.set_step_seed(seeding::step_seed(options_.seed, shared ? 0 : comm_.rank(), step_));
  sgd_.zero_grad();
  const auto losses = [&] {
    RECORD_FUNCTION("mrcnn::forward", std::vector<c10::IValue>());
    return model_.losses(batch);
  }();
  if (losses.empty()) throw std::runtime_error("the model returned no losses");
  at::Tensor total;
  for (const auto& [name, value] : losses) {
    const at::Tensor l = value.to(at::kFloat);
    total = total.defined() ? total + l : l;
  }
  {
    RECORD_FUNCTION("mrcnn::backward", std::vector<c10::IValue>());
    if (reducer_) reducer_->prepare();
    scaler_.scale_loss(total).backward();
  }

  const auto& params = sgd_.parameters();
  if (reducer_) {
    RECORD_FUNCTION("mrcnn::allreduce", std::vector<c10::IValue>());
    reducer_->finish();
  }
  {
    RECORD_FUNCTION("mrcnn::optimizer", std::vector<c10::IValue>());
    // Unscaled and checked on the device; then the step's one device-to-host transfer: every loss
    // value, whether a gradient is non-finite, and on a GPU the kernels' fault word
    // (device_faults.h), which reports invalid values met in this step's forward.
    const at::Tensor found_inf = scaler_.unscale(params);
    const bool clip = options_.gradient_clip_norm > 0;
    const at::Tensor norm = clip ? clip_grad_norm(params, options_.gradient_clip_norm) : at::Tensor();
    std::vector<at::Tensor> parts;
    for (const auto& [name, value] : losses) parts.push_back(value.detach().to(at::kFloat).reshape({1}));
    parts.push_back(total.detach().reshape({1}));
    parts.push_back(found_inf.to(total.device()));
    const bool on_gpu = !total.is_cpu();
    const size_t fault_slot = parts.size();  // on a GPU: this rank's fault bits
    if (on_gpu) parts.push_back(ops::device_fault_word(total.device()).to(at::kFloat));
    at::Tensor on_device = at::cat(parts).to(at::kDouble);
    if (clip) on_device = at::cat({on_device, norm.reshape({1})});  // the norm, float64 already
    at::Tensor host = on_device.to(at::kCPU);
    const int32_t faults = on_gpu ? static_cast<int32_t>(host.data_ptr<double>()[fault_slot]) : 0;
    // The same on every rank (the gradients are all-reduced); taken before the loss all-reduce.
    const double norm_value = clip ? host.data_ptr<double>()[host.numel() - 1] : 0.0;
    if (comm_.world_size() > 1) {
      // Every rank reports, and judges finiteness on, the same global mean losses, so that a
      // non-finite loss on one rank stops all of them at the same step; likewise a fault.
      std::vector<at::Tensor> v{host};
      comm_.allreduce_mean(v);
    }
    const double* v = host.data_ptr<double>();
    size_t i = 0;
    for (const auto& [name, value] : losses) r.losses[name] = v[i++];
    r.loss = v[i++];
    const bool finite = v[i] == 0;
    if (on_gpu && v[fault_slot] != 0) {  // after the all-reduce: a fault on any rank
      ops::device_fault_word(total.device()).zero_();
      const std::string context = "step " + std::to_string(step_);
      if (faults == 0) throw std::runtime_error(context + ": another rank's GPU kernels reported invalid inputs");
      ops::throw_device_faults(faults, context);
    }
    if (!std::isfinite(r.loss)) {
      std::string which;
      for (const auto& [name, x] : r.losses)
        if (!std::isfinite(x)) which += (which.empty() ? "" : ", ") + name;
      throw NonFiniteLoss(step_, std::string(std::isnan(r.loss) ? "NaN" : "infinite") + " (" + which + ")");
    }
    if (finite && clip) r.grad_norm = norm_value;
    scaler_.update(!finite);
    if (finite) {
      sgd_.step(r.lr);
    } else {
      r.skipped = true;
      if (!scaler_.enabled())  // without loss scaling there is nothing to back off: a real divergence
        throw NonFiniteLoss(step_, "a non-finite gradient");
    }
  }
  ++step_;
  return r;
}

TrainerState Trainer::state() const {
  return {.step = step_, .optimizer = sgd_.state(), .loss_scale = scaler_.scale(), .scaler_good_steps = scaler_.good_steps()};
}

void Trainer::load_state(const TrainerState& state) {
  if (state.step < 0) throw std::runtime_error("checkpoint step is negative");
  sgd_.load_state(state.optimizer);
  scaler_.restore(state.loss_scale, state.scaler_good_steps);
  step_ = state.step;
}

}  // namespace mrcnn::train
