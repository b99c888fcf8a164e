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

bool LossScaler::unscale_and_check(const std::vector<NamedParameter>& parameters) const {
  at::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& p : parameters) {
    at::Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    if (options_.enabled) g.mul_(1.0 / scale_);
    if (finite && !g.isfinite().all().item<bool>()) finite = false;
  }
  return finite;
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
