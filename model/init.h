// Seeded weight initializers. Each draws from the generator it is given (never from a hidden
// global), so a model built from the same seed has bit-identical weights on every run. The
// formulas are PyTorch's (torch.nn.init): fan_in = size(1) * receptive field, fan_out = size(0) *
// receptive field (for a transposed convolution's [in, out, k, k] weight that is in * k * k, as
// in PyTorch).
// Thread-safety: the generator is mutated; calls sharing one generator must not run concurrently.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace mrcnn::model::init {

enum class FanMode { kFanIn, kFanOut };

// Uniform(-b, b) with b = gain * sqrt(3 / fan), gain = sqrt(2 / (1 + a^2)) (leaky ReLU slope a).
// kaiming_uniform(w, 1.0, kFanIn, gen) is Detectron's c2_xavier_fill (FPN, box head).
void kaiming_uniform(const at::Tensor& weight, double a, FanMode mode, at::Generator gen);

// Normal(0, gain / sqrt(fan)), ReLU gain sqrt(2) (c2_msra_fill with kFanOut).
void kaiming_normal_relu(const at::Tensor& weight, FanMode mode, at::Generator gen);

// Normal(0, std).
void normal(const at::Tensor& weight, double std, at::Generator gen);

// Zeros (biases); no randomness, here for symmetry of the call sites.
void zeros(const at::Tensor& t);

}  // namespace mrcnn::model::init
