#include "benchmark/train/loss_scaler.h"

#include <cmath>
#include <stdexcept>

namespace mrcnn::train {

LossScaler::LossScaler(LossScalerOptions options) : options_(options) {
  if (options_.enabled && !(options_.init_scale > 0 && std::isfinite(options_.init_scale)))
    throw std::invalid_argument("loss scaler: init_scale must be a positive number");
  if (!(options_.growth_factor >= 1) || !(options_.backoff_factor > 0 && options_.backoff_factor < 1) ||
      options_.growth_interval < 1)
    throw std::invalid_argument("loss scaler: need growth_factor >= 1, 0 < backoff_factor < 1, growth_interval >= 1");
  scale_ = options_.enabled ? options_.init_scale : 1.0;
}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const {
  return options_.enabled ? loss * scale_ : loss;
}

at::Tensor LossScaler::unscale(const std::vector<NamedParameter>& parameters) const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.tensor.grad().defined()) grads.push_back(p.tensor.grad());
  const at::TensorOptions opts =
      at::TensorOptions().dtype(at::kFloat).device(grads.empty() ? at::Device(at::kCPU) : grads[0].device());
  at::Tensor found_inf = at::zeros({1}, opts);
  if (grads.empty()) return found_inf;
  // A power of two: dividing by it and multiplying by its inverse give the same values.
  const at::Tensor inv_scale = at::full({1}, options_.enabled ? 1.0 / scale_ : 1.0, opts);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  return found_inf;
}

void LossScaler::update(bool found_non_finite) {
  if (!options_.enabled) return;
  if (found_non_finite) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t good_steps) {
  if (!(scale > 0) || good_steps < 0) throw std::runtime_error("loss scaler state is invalid");
  scale_ = scale;
  good_steps_ = good_steps;
}

}  // namespace mrcnn::train
