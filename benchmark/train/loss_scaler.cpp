#include "benchmark/train/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mrcnn::train {

LossScaler::LossScaler(LossScalerOptions options) : options_(options) {
  if (options_.enabled && !(options_.init_scale > 0 && std::isfinite(options_.init_scale)))
    throw std::invalid_argument("loss scaler: init_scale must be a positive number");
  if (!(options_.growth_factor >= 1) || !(options_.backoff_factor > 0 && options_.backoff_factor < 1) ||
      options_.growth_interval < 1 || options_.growth_interval > INT32_MAX)
    throw std::invalid_argument("loss scaler: need growth_factor >= 1, 0 < backoff_factor < 1, growth_interval >= 1");
  restore(options_.enabled ? options_.init_scale : 1.0, 0);
}

void LossScaler::place(const at::Device& device) {
  if (scale_.device() == device) return;
  if (scale_.is_cpu()) {
    // From the host, the state is written on the device by fills: a copy from pageable host
    // memory would synchronise the stream (twice on a CUDA device's first step).
    const float scale = scale_.item<float>();
    const int32_t good_steps = good_steps_.item<int32_t>();
    scale_ = at::full({1}, scale, scale_.options().device(device));
    good_steps_ = at::full({1}, good_steps, good_steps_.options().device(device));
    return;
  }
  scale_ = scale_.to(device);
  good_steps_ = good_steps_.to(device);
}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const {
  if (!options_.enabled) return loss;
  // The scale's device is the gradients' (the loss's, too); on the first step it is still the
  // host's, and a CPU scalar multiplies a tensor on any device.
  return loss * scale_.reshape({});
}

at::Tensor LossScaler::unscale(const std::vector<NamedParameter>& parameters) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.tensor.grad().defined()) grads.push_back(p.tensor.grad());
  const at::TensorOptions opts =
      at::TensorOptions().dtype(at::kFloat).device(grads.empty() ? at::Device(at::kCPU) : grads[0].device());
  at::Tensor found_inf = at::zeros({1}, opts);
  if (grads.empty()) return found_inf;
  place(opts.device());
  // A power of two: dividing by it and multiplying by its inverse give the same values.
  const at::Tensor inv_scale = options_.enabled ? scale_.reciprocal() : at::ones({1}, opts);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  return found_inf;
}

void LossScaler::update(const at::Tensor& found_inf) {
  if (!options_.enabled) return;
  place(found_inf.device());
  // Halves the scale and restarts the count where found_inf is set; else counts, and doubles the
  // scale after growth_interval finite steps in a row.
  at::_amp_update_scale_(scale_, good_steps_, found_inf, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
}

double LossScaler::scale() const { return scale_.item<double>(); }
int64_t LossScaler::good_steps() const { return good_steps_.item<int64_t>(); }

void LossScaler::restore(double scale, int64_t good_steps) {
  if (!(scale > 0) || !std::isfinite(scale) || good_steps < 0 || good_steps > INT32_MAX)
    throw std::runtime_error("loss scaler state is invalid");
  const at::Device device = scale_.defined() ? scale_.device() : at::Device(at::kCPU);
  scale_ = at::full({1}, scale, at::TensorOptions().dtype(at::kFloat).device(device));
  // The scale grows when the count reaches growth_interval exactly: a count saved with a longer
  // interval resumes one finite step short of growing, as it would have grown at its next one.
  good_steps = std::min<int64_t>(good_steps, options_.growth_interval - 1);
  good_steps_ = at::full({1}, good_steps, at::TensorOptions().dtype(at::kInt).device(device));
}

}  // namespace mrcnn::train
