#include "benchmark/train/sgd.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include "model/ops/implementation.h"

namespace mrcnn::train {

Sgd::Sgd(std::vector<NamedParameter> parameters, SgdOptions options) : options_(options) {
  if (!(options_.momentum >= 0 && options_.momentum < 1))
    throw std::invalid_argument("SGD: momentum must be in [0, 1), got " + std::to_string(options_.momentum));
  if (options_.weight_decay < 0 || options_.bias_weight_decay < 0)
    throw std::invalid_argument("SGD: weight decay must be >= 0");
  if (!(options_.bias_lr_factor > 0)) throw std::invalid_argument("SGD: bias_lr_factor must be > 0");
  for (auto& p : parameters)
    if (p.tensor.requires_grad()) params_.push_back(std::move(p));
  momentum_.resize(params_.size());
}

bool Sgd::is_bias(const std::string& name) { return name.ends_with("bias"); }

bool Sgd::same_flat_layout(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || !a.is_non_overlapping_and_dense() || !b.is_non_overlapping_and_dense())
    return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// The update over each group of parameters that share a learning rate and weight decay:
//  - kFused: LibTorch's fused SGD, a launch or two for the whole model instead of three or four
//    per parameter, skipped on the device where `found_inf` is set. A momentum buffer starts as
//    zeros the first time its parameter has a gradient (momentum * 0 + d is d exactly,
//    torch.optim.SGD's first step); a skipped first step leaves it zeros, so the next one starts
//    it again (the kernel's own first-step switch would copy d even when skipped).
//  - kForeach: multi-tensor operations with the per-tensor arithmetic, a buffer starting as a
//    copy of d; the flag read on the host.
void Sgd::step(double lr, const at::Tensor& found_inf) {
  at::NoGradGuard no_grad;
  bool fused = kernel_ == Kernel::kFused;
  // Auto: fused where LibTorch's fused SGD is known to run (CUDA); multi-tensor ops elsewhere
  // (the CPU, and hpu/xpu/mps, whose bridges may lack the fused kernel).
  if (kernel_ == Kernel::kAuto && !params_.empty()) fused = params_.front().tensor.is_cuda();
  if (!fused && found_inf.defined() && found_inf.item<float>() != 0) return;
  layout_copies_ = 0;
  std::optional<at::Tensor> skip;
  if (found_inf.defined()) skip = found_inf;
  for (const bool bias : {false, true}) {
    const double wd = bias ? options_.bias_weight_decay : options_.weight_decay;
    const double lr_p = bias ? lr * options_.bias_lr_factor : lr;
    std::vector<at::Tensor> params, grads, bufs, fresh_params, fresh_grads;
    std::vector<size_t> fresh;  // kForeach: parameters whose momentum buffer starts this step
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& p = params_[i].tensor;
      if (!p.grad().defined() || is_bias(params_[i].name) != bias) continue;
      const at::Tensor& g = p.grad();
      if (fused) {
        params.push_back(p);
        // The fused kernel walks parameter, gradient and buffer as one flat array each: a
        // gradient laid out otherwise than its parameter is copied into the parameter's layout
        // first. Autograd lays them out alike up to the strides of size-1 dimensions, which it
        // ignores (a 1x1 convolution's channels-last weight gets a contiguous gradient): the
        // same flat order, so no copy.
        if (same_flat_layout(g, p)) {
          grads.push_back(g);
        } else {
          grads.push_back(at::empty_like(p, at::MemoryFormat::Preserve).copy_(g));
          ++layout_copies_;
        }
        if (options_.momentum == 0) continue;
        if (!momentum_[i].defined()) momentum_[i] = at::zeros_like(p, at::MemoryFormat::Preserve);
        bufs.push_back(momentum_[i]);
      } else if (options_.momentum != 0 && !momentum_[i].defined()) {
        fresh.push_back(i);
        fresh_params.push_back(p);
        fresh_grads.push_back(g);
      } else {
        params.push_back(p);
        grads.push_back(g);
        if (options_.momentum != 0) bufs.push_back(momentum_[i]);
      }
    }
    if (fused) {
      if (!params.empty())
        at::_fused_sgd_(params, grads, bufs, wd, options_.momentum, lr_p, /*dampening=*/0.0, /*nesterov=*/false,
                        /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/std::nullopt, skip);
      continue;
    }
    if (!params.empty()) {
      const std::vector<at::Tensor> d = wd != 0 ? at::_foreach_add(grads, params, wd) : grads;
      if (options_.momentum == 0) {
        at::_foreach_add_(params, d, -lr_p);
      } else {
        at::_foreach_mul_(bufs, options_.momentum);
        at::_foreach_add_(bufs, d);
        at::_foreach_add_(params, bufs, -lr_p);
      }
    }
    if (!fresh.empty()) {  // first step of these parameters: buf = d
      std::vector<at::Tensor> d = wd != 0 ? at::_foreach_add(fresh_grads, fresh_params, wd)
                                          : std::vector<at::Tensor>{};
      if (wd == 0)
        for (const at::Tensor& g : fresh_grads) d.push_back(g.detach().clone());
      for (size_t j = 0; j < fresh.size(); ++j) momentum_[fresh[j]] = d[j];
      at::_foreach_add_(fresh_params, d, -lr_p);
    }
  }
}

void Sgd::zero_grad() {
  for (auto& p : params_) {
    // Drop the gradient tensor (set_to_none semantics): the next backward allocates it afresh.
    if (p.tensor.grad().defined()) p.tensor.mutable_grad() = at::Tensor();
  }
}

std::map<std::string, at::Tensor> Sgd::state() const {
  std::map<std::string, at::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined()) out.emplace(params_[i].name, momentum_[i]);
  return out;
}

void Sgd::load_state(const std::map<std::string, at::Tensor>& state) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index.emplace(params_[i].name, i);
  for (auto& m : momentum_) m = at::Tensor();
  for (const auto& [name, t] : state) {
    auto it = index.find(name);
    if (it == index.end())
      throw std::runtime_error("optimizer state names parameter '" + name + "', which the model does not train");
    const at::Tensor& p = params_[it->second].tensor;
    if (t.sizes() != p.sizes())
      throw std::runtime_error("optimizer state for '" + name + "' has shape " + c10::str(t.sizes()) +
                               ", the parameter " + c10::str(p.sizes()));
    // In the parameter's layout (a checkpoint holds it contiguous): the fused update needs them alike.
    momentum_[it->second] = at::empty_like(p.detach(), at::MemoryFormat::Preserve).copy_(t);
  }
}

at::Tensor clip_grad_norm(const std::vector<NamedParameter>& parameters, double max_norm) {
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters)
    if (p.tensor.grad().defined()) grads.push_back(p.tensor.grad().detach());
  const c10::Device device = parameters.empty() ? c10::Device(c10::kCPU) : parameters.front().tensor.device();
  // float64 where the device has it (MPS and HPU do not: float32 there).
  const at::ScalarType wide = ops::supports_float64(device.type()) ? at::kDouble : at::kFloat;
  if (grads.empty()) return at::zeros({}, at::TensorOptions().dtype(wide).device(device));
  at::NoGradGuard no_grad;
  // Per-tensor norms in the gradients' type, then the sum of their squares in float64: cumsum is
  // a sequential scan on the CPU (the order of a plain loop); its last element is the sum.
  const at::Tensor norms = at::stack(at::_foreach_norm(grads, 2)).to(wide);
  const at::Tensor sum_sq = norms.mul(norms).cumsum(0)[-1];
  // A correctly rounded square root on either device: CUDA's is; the CPU's vectorized one (MKL or
  // Sleef) is up to an ulp off, and on the CPU reading the value costs nothing.
  const at::Tensor total =
      sum_sq.is_cpu() ? at::scalar_tensor(std::sqrt(sum_sq.item<double>()), sum_sq.options()) : sum_sq.sqrt();
  if (max_norm > 0) {
    const at::Tensor coef = at::full({}, max_norm, total.options()).div(total + 1e-6).clamp_max(1.0);
    // Multiplying by exactly 1 changes nothing: unclipped and non-finite cases are this multiply.
    const at::Tensor applied = at::where(total.isfinite(), coef, at::ones_like(coef)).to(grads.front().scalar_type());
    at::_foreach_mul_(grads, applied);
  }
  return total;
}

}  // namespace mrcnn::train
