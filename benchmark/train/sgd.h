// SGD with momentum as the MLPerf Mask R-CNN reference configures it (maskrcnn-benchmark's
// make_optimizer over torch.optim.SGD): every parameter whose name ends in "bias" gets
// lr * bias_lr_factor and bias_weight_decay; the others lr and weight_decay.
// Update, per parameter p with gradient g (torch.optim.SGD semantics, dampening 0, no Nesterov):
//   d = g + wd * p;   buf = d on the first step, else momentum * buf + d;   p -= lr_p * buf
// Parameters without a gradient (frozen, or unused this step) are left alone.
//
// The skip of a step whose gradients are not finite (float16 overflow) is decided on a GPU's
// device: step() takes the loss scaler's flag, and where it is set the update changes nothing, so
// that no step has to read the flag before it can go on (on the CPU, where a read is free, it is
// read).
//
// The optimizer keeps references to the parameters it was given (shared tensor storage); the
// module that owns them must outlive it. Not thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mrcnn::train {

struct SgdOptions {
  double momentum = 0.9;          // opt_momentum (fixed by the rules)
  double weight_decay = 1e-4;     // opt_weight_decay (fixed by the rules)
  double bias_lr_factor = 2.0;    // reference SOLVER.BIAS_LR_FACTOR
  double bias_weight_decay = 0.0; // reference SOLVER.WEIGHT_DECAY_BIAS
};

struct NamedParameter {
  std::string name;
  at::Tensor tensor;
};

class Sgd {
 public:
  // Only parameters with requires_grad are kept. Throws std::invalid_argument for momentum
  // outside [0, 1) or a negative weight decay.
  Sgd(std::vector<NamedParameter> parameters, SgdOptions options);

  // One update with base learning rate `lr` (the bias factor is applied here). `found_inf`, when
  // given, is a float32 [1] on the parameters' device holding 0 or 1 (LossScaler::unscale's flag;
  // the fused kernel skips on exactly 1): where it is 1 the parameters and momentum buffers stay
  // as they are, decided on the device.
  void step(double lr, const at::Tensor& found_inf = {});
  // The kernel: kAuto is kFused on CUDA and kForeach elsewhere. kFused is LibTorch's fused SGD,
  // one launch per group, skipping on the device; kForeach is the per-tensor arithmetic as
  // multi-tensor operations, bit-identical to the per-parameter update, reading the flag on the
  // host (free on the CPU). The fused CPU kernel rounds the elements past its last full vector
  // otherwise (a fused multiply-add), hence not the CPU's default. For tests.
  enum class Kernel { kAuto, kForeach, kFused };
  void set_kernel(Kernel kernel) { kernel_ = kernel; }
  void zero_grad();

  const std::vector<NamedParameter>& parameters() const { return params_; }
  // Gradients the last step() copied into their parameter's layout before the fused kernel (0 when
  // every gradient walks in its parameter's flat order, as autograd lays them out; a test counts).
  int64_t layout_copies() const { return layout_copies_; }
  // Whether two tensors of the same sizes hold their elements in the same flat order: both dense,
  // and equal strides on every dimension of size above 1 (a size-1 dimension's stride is never
  // used to address an element).
  static bool same_flat_layout(const at::Tensor& a, const at::Tensor& b);
  const SgdOptions& options() const { return options_; }

  // Momentum buffers by parameter name, for checkpoints (only those that exist yet).
  std::map<std::string, at::Tensor> state() const;
  // Restores buffers saved by state(); throws naming the parameter on a name or shape mismatch.
  void load_state(const std::map<std::string, at::Tensor>& state);

 private:
  static bool is_bias(const std::string& name);
  std::vector<NamedParameter> params_;
  std::vector<at::Tensor> momentum_;  // parallel to params_; undefined until the first update
  SgdOptions options_;
  Kernel kernel_ = Kernel::kAuto;
  int64_t layout_copies_ = 0;
};

// Scales all gradients so that their global L2 norm is at most max_norm (torch's
// clip_grad_norm_ semantics, eps 1e-6), on the gradients' device and without reading it: the
// coefficient min(1, max_norm / (norm + 1e-6)) stays a device scalar and one multi-tensor
// multiply applies it. A non-finite norm leaves the gradients as they are (such a step is skipped).
// Returns the norm before clipping: a float64 scalar on the parameters' device (float32 on a
// device without float64, ops::supports_float64; 0 if no parameter has a gradient). The
// per-tensor norms are summed in that type in parameter order, so the result does not depend on
// the thread count.
at::Tensor clip_grad_norm(const std::vector<NamedParameter>& parameters, double max_norm);

}  // namespace mrcnn::train
