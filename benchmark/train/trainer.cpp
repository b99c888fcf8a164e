#include "benchmark/train/trainer.h"

#include <ATen/record_function.h>

#include <cmath>
#include <optional>

#include "model/ops/device_faults.h"
#include "model/ops/implementation.h"
#include "model/seeding.h"
#include "model/stage_losses.h"

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
  if (options_.results_every < 1)
    throw std::invalid_argument("results_every must be >= 1, got " + std::to_string(options_.results_every));
  if (comm_.world_size() > 1) {
    std::vector<at::Tensor> tensors;
    for (const auto& p : sgd_.parameters()) tensors.push_back(p.tensor);
    reducer_ = std::make_unique<GradientReducer>(std::move(tensors), comm_, options_.overlap_allreduce);
  }
}

Trainer::~Trainer() = default;

// Each part of a step is a named scope for profiles (`train --profile`): mrcnn::train_step holds
// mrcnn::forward (the model's own stages inside), mrcnn::backward, mrcnn::allreduce,
// mrcnn::optimizer (unscale, clip, scale update, SGD) and, on the steps that read, mrcnn::read_results.
void Trainer::step(const model::Batch& batch, const ResultSink& done) {
  RECORD_FUNCTION("mrcnn::train_step", std::vector<c10::IValue>());
  StepResult r;
  r.step = step_;
  r.lr = schedule_.lr(step_);
  r.images = batch.size();

  model_.set_training(true);
  // One stream for all ranks only where images carry their own keys (their ids): without ids an
  // image's key is its position in the batch, the same on every rank.
  const bool shared = model_.samples_keyed_by_image() && !batch.image_ids.empty();
  model_.set_step_seed(seeding::step_seed(options_.seed, shared ? 0 : comm_.rank(), step_));
  sgd_.zero_grad();
  const at::Device device = sgd_.parameters().front().tensor.device();
  auto start = clock_.mark(device);
  const auto losses = [&] {
    RECORD_FUNCTION("mrcnn::forward", std::vector<c10::IValue>());
    return model_.losses(batch);
  }();
  if (losses.empty()) throw std::runtime_error("the model returned no losses");
  const at::Tensor total = model::total_loss(losses);
  {
    RECORD_FUNCTION("mrcnn::backward", std::vector<c10::IValue>());
    if (reducer_) reducer_->prepare();
    scaler_.scale_loss(total).backward();
  }
  auto reduce = clock_.mark(device);

  const auto& params = sgd_.parameters();
  if (reducer_) {
    RECORD_FUNCTION("mrcnn::allreduce", std::vector<c10::IValue>());
    reducer_->finish();
  }
  {
    RECORD_FUNCTION("mrcnn::optimizer", std::vector<c10::IValue>());
    // Unscaled, checked, clipped and applied on the device: where found_inf is set, the scale
    // backs off and SGD changes nothing.
    // A non-finite loss whose gradients came out finite (say a mean over nothing) is no update either.
    const at::Tensor found_inf =
        at::maximum(scaler_.unscale(params), total.detach().isfinite().logical_not().to(at::kFloat).reshape({1}));
    const bool clip = options_.gradient_clip_norm > 0;
    const at::Tensor norm = clip ? clip_grad_norm(params, options_.gradient_clip_norm) : at::Tensor();
    scaler_.update(found_inf);
    sgd_.step(r.lr, found_inf);
    // The step's results, kept on the device until they are read: every loss value, their sum,
    // whether a gradient is non-finite, and on a GPU the kernels' fault word (device_faults.h),
    // which reports invalid values met in this step's forward.
    std::vector<at::Tensor> parts;
    for (const auto& [name, value] : losses) {
      parts.push_back(value.detach().to(at::kFloat).reshape({1}));
      r.losses[name] = 0;
    }
    parts.push_back(total.detach().reshape({1}));
    parts.push_back(found_inf.to(total.device()));
    if (!total.is_cpu()) parts.push_back(ops::device_fault_word(total.device()).to(at::kFloat));
    // float64 where the device has it (MPS and HPU do not: float32 there, widened on the host).
    const at::ScalarType wide = ops::supports_float64(total.device().type()) ? at::kDouble : at::kFloat;
    at::Tensor values = at::cat(parts).to(wide);
    if (clip) values = at::cat({values, norm.reshape({1}).to(wide)});
    r.queued = std::chrono::steady_clock::now();
    if (device.is_cpu()) r.compute_seconds = StepClock::seconds(start, reduce), start.reset(), reduce.reset();
    unread_.push_back({std::move(r), std::move(values), std::move(start), std::move(reduce)});
  }
  ++step_;
  if (static_cast<int64_t>(unread_.size()) >= options_.results_every) read_results(done);
}

// One copy of every unread step's values to the host (and, over several ranks, one all-reduce of
// them), then each step's verdict in step order.
void Trainer::read_results(const ResultSink& done) {
  if (unread_.empty()) return;
  RECORD_FUNCTION("mrcnn::read_results", std::vector<c10::IValue>());
  std::vector<Unread> steps = std::move(unread_);
  unread_.clear();
  // Rows may differ in length (a step may report other losses): one flat copy, with offsets.
  std::vector<at::Tensor> rows;
  std::vector<int64_t> offset{0};
  for (const Unread& u : steps) {
    rows.push_back(u.values);
    offset.push_back(offset.back() + u.values.numel());
  }
  const at::Device device = rows.front().device();
  const at::Tensor own = at::cat(rows).to(at::kCPU).to(at::kDouble);
  // Every rank reports, and judges finiteness on, the same global mean losses, so that a
  // non-finite loss on one rank stops all of them at the same step; likewise a fault. The norm
  // (the same on every rank: the gradients are all-reduced) and this rank's own fault bits are
  // taken from this rank's values: the mean can move the norm's last bit.
  at::Tensor mean = own;
  if (comm_.world_size() > 1) {
    std::vector<at::Tensor> v{own.clone()};
    comm_.allreduce_mean(v);
    mean = v[0];
  }
  const bool on_gpu = !device.is_cpu();
  for (size_t k = 0; k < steps.size(); ++k) {
    StepResult& r = steps[k].known;
    if (steps[k].start) r.compute_seconds = StepClock::seconds(steps[k].start, steps[k].reduce);
    const double* v = mean.data_ptr<double>() + offset[k];
    const double* mine = own.data_ptr<double>() + offset[k];
    int64_t i = 0;
    for (auto& [name, value] : r.losses) value = v[i++];
    r.loss = v[i++];
    const bool finite = v[i++] == 0;
    if (on_gpu && v[i] != 0) {  // the fault word, after the flag; in the mean: a fault on any rank
      ops::device_fault_word(device).zero_();
      const std::string context = "step " + std::to_string(r.step);
      const auto faults = static_cast<int32_t>(mine[i]);
      if (faults == 0) throw std::runtime_error(context + ": another rank's GPU kernels reported invalid inputs");
      ops::throw_device_faults(faults, context);
    }
    if (!std::isfinite(r.loss)) {
      std::string which;
      for (const auto& [name, x] : r.losses)
        if (!std::isfinite(x)) which += (which.empty() ? "" : ", ") + name;
      throw NonFiniteLoss(r.step, std::string(std::isnan(r.loss) ? "NaN" : "infinite") + " (" + which + ")");
    }
    if (finite && options_.gradient_clip_norm > 0) r.grad_norm = own.data_ptr<double>()[offset[k + 1] - 1];
    if (!finite) {
      r.skipped = true;
      if (!scaler_.enabled())  // without loss scaling there is nothing to back off: a real divergence
        throw NonFiniteLoss(r.step, "a non-finite gradient");
    }
    done(r);
  }
}

StepResult Trainer::step(const model::Batch& batch) {
  if (!unread_.empty())
    throw std::logic_error("Trainer::step(batch) with " + std::to_string(unread_.size()) +
                           " steps unread: their results would be lost (read_results first)");
  std::optional<StepResult> last;
  const ResultSink keep = [&](const StepResult& r) { last = r; };
  step(batch, keep);
  read_results(keep);
  return *last;
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
