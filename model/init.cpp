#include "model/init.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <stdexcept>

namespace mrcnn::model::init {
namespace {

double fan(const at::Tensor& w, FanMode mode) {
  if (w.dim() < 2)
    throw std::invalid_argument("init: a weight of at least 2 dimensions is needed, got " +
                                std::to_string(w.dim()));
  const double receptive = w.dim() > 2 ? static_cast<double>(w[0][0].numel()) : 1.0;
  return (mode == FanMode::kFanIn ? static_cast<double>(w.size(1))
                                  : static_cast<double>(w.size(0))) *
         receptive;
}

}  // namespace

void kaiming_uniform(const at::Tensor& weight, double a, FanMode mode, at::Generator gen) {
  c10::NoGradGuard no_grad;
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / fan(weight, mode));
  weight.uniform_(-bound, bound, gen);
}

void kaiming_normal_relu(const at::Tensor& weight, FanMode mode, at::Generator gen) {
  c10::NoGradGuard no_grad;
  weight.normal_(0.0, std::sqrt(2.0) / std::sqrt(fan(weight, mode)), gen);
}

void normal(const at::Tensor& weight, double std, at::Generator gen) {
  c10::NoGradGuard no_grad;
  weight.normal_(0.0, std, gen);
}

void zeros(const at::Tensor& t) {
  c10::NoGradGuard no_grad;
  t.zero_();
}

}  // namespace mrcnn::model::init
