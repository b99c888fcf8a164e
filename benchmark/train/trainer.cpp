#include "benchmark/train/trainer.h"

#include <cmath>

namespace mrcnn::train {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFloat32;
  if (name == "bf16") return Precision::kBFloat16;
  if (name == "fp16") return Precision::kFloat16;
  throw std::invalid_argument("precision '" + name + "' (expected fp32, bf16 or fp16)");
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFloat32: return "fp32";
    case Precision::kBFloat16: return "bf16";
    case Precision::kFloat16: return "fp16";
  }
  return "fp32";
}

uint64_t step_seed(uint64_t seed, int64_t step) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(seed) ^ static_cast<uint64_t>(step));
}

Trainer::Trainer(TrainableModel& model, TrainerOptions options, dist::Communicator& comm)
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
}

StepResult Trainer::step(const model::Batch& batch) {
  StepResult r;
  r.step = step_;
  r.lr = schedule_.lr(step_);
  r.images = batch.size();

  model_.set_training(true);
  // Each rank samples anchors and RoIs from its own stream (rank 0's is the single-rank one).
  model_.set_step_seed(step_seed(options_.seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(comm_.rank()), step_));
  sgd_.zero_grad();
  const auto losses = model_.losses(batch);
  if (losses.empty()) throw std::runtime_error("the model returned no losses");
  at::Tensor total;
  for (const auto& [name, value] : losses) {
    const at::Tensor l = value.to(at::kFloat);
    total = total.defined() ? total + l : l;
  }
  // One device-to-host transfer for every loss value.
  std::vector<at::Tensor> parts;
  for (const auto& [name, value] : losses) parts.push_back(value.detach().to(at::kFloat).reshape({1}));
  parts.push_back(total.detach().reshape({1}));
  at::Tensor host = at::cat(parts).to(at::kCPU, at::kDouble);
  if (comm_.world_size() > 1) {
    // Every rank reports, and judges finiteness on, the same global mean losses, so that a
    // non-finite loss on one rank stops all of them at the same step.
    std::vector<at::Tensor> v{host};
    comm_.allreduce_mean(v);
  }
  const double* v = host.data_ptr<double>();
  size_t i = 0;
  for (const auto& [name, value] : losses) r.losses[name] = v[i++];
  r.loss = v[i];
  if (!std::isfinite(r.loss)) {
    std::string which;
    for (const auto& [name, x] : r.losses)
      if (!std::isfinite(x)) which += (which.empty() ? "" : ", ") + name;
    throw NonFiniteLoss(step_, std::string(std::isnan(r.loss) ? "NaN" : "infinite") + " (" + which + ")");
  }

  scaler_.scale_loss(total).backward();

  const auto& params = sgd_.parameters();
  if (comm_.world_size() > 1) {
    std::vector<at::Tensor> grads;
    // Every parameter takes part (a zero gradient where this rank's batch did not reach it), so
    // all ranks reduce the same buckets in the same order.
    for (const auto& p : params) {
      at::Tensor t = p.tensor;
      if (!t.grad().defined()) t.mutable_grad() = at::zeros_like(t);
      grads.push_back(t.grad());
    }
    comm_.allreduce_mean(grads);
  }
  const bool finite = scaler_.unscale_and_check(params);
  if (finite && options_.gradient_clip_norm > 0) r.grad_norm = clip_grad_norm(params, options_.gradient_clip_norm);
  scaler_.update(!finite);
  if (finite) {
    sgd_.step(r.lr);
  } else {
    r.skipped = true;
    if (!scaler_.enabled())  // without loss scaling there is nothing to back off: a real divergence
      throw NonFiniteLoss(step_, "a non-finite gradient");
  }
  ++step_;
  return r;
}

void Trainer::restore(int64_t step, const std::map<std::string, at::Tensor>& optimizer_state, double loss_scale,
                      int64_t scaler_good_steps) {
  if (step < 0) throw std::runtime_error("checkpoint step is negative");
  sgd_.load_state(optimizer_state);
  scaler_.restore(loss_scale, scaler_good_steps);
  step_ = step;
}

}  // namespace mrcnn::train
