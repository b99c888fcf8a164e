#include "benchmark/train/gradient_reducer.h"

#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <string>

namespace mrcnn::train {

GradientReducer::GradientReducer(std::vector<at::Tensor> params, comm::Communicator& comm, bool overlap,
                                 int64_t bucket_bytes)
    : params_(std::move(params)), comm_(comm) {
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  offset_of_.assign(n, 0);
  arrived_.assign(n, false);
  // Reverse order: the backward pass produces the last layers' gradients first.
  int64_t bytes = 0, elements = 0;
  for (size_t k = n; k-- > 0;) {
    const at::Tensor& p = params_[k];
    const bool fits = !buckets_.empty() && buckets_.back().buffer.scalar_type() == p.scalar_type() &&
                      buckets_.back().buffer.device() == p.device() &&
                      bytes + static_cast<int64_t>(p.nbytes()) <= bucket_bytes;
    if (!fits) {
      if (!buckets_.empty()) buckets_.back().buffer = at::empty({elements}, buckets_.back().buffer.options());
      buckets_.push_back({.buffer = at::empty({0}, p.options().requires_grad(false))});
      bytes = elements = 0;
    }
    buckets_.back().params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    offset_of_[k] = elements;
    bytes += static_cast<int64_t>(p.nbytes());
    elements += p.numel();
  }
  if (!buckets_.empty()) buckets_.back().buffer = at::empty({elements}, buckets_.back().buffer.options());
  overlap_ = overlap && !params_.empty() && comm_.overlaps(params_.front().device());
  if (overlap_)
    for (size_t k = 0; k < n; ++k)
      hooks_.push_back(params_[k].register_hook([this, k](const at::Tensor& grad) { on_gradient(k, grad); }));
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void GradientReducer::prepare() {
  for (auto& b : buckets_) {
    b.missing = static_cast<int64_t>(b.params.size());
    b.sum.reset();
  }
  arrived_.assign(params_.size(), false);
  next_ = 0;
  armed_ = true;
}

void GradientReducer::on_gradient(size_t k, const at::Tensor& grad) {
  if (!armed_) return;          // not the step's backward pass (see the header)
  if (!grad.defined()) return;  // nothing reached it: finish() fills zeros
  if (arrived_[k])
    throw std::logic_error("GradientReducer: parameter " + std::to_string(k) + " received two gradients in one pass");
  arrived_[k] = true;
  Bucket& b = buckets_[bucket_of_[k]];
  at::NoGradGuard no_grad;
  b.buffer.narrow(0, offset_of_[k], params_[k].numel()).copy_(grad.reshape({-1}));
  if (--b.missing == 0) start_ready_buckets();
  comm_.progress();
}

void GradientReducer::start_ready_buckets() {
  while (next_ < buckets_.size() && buckets_[next_].missing == 0) {
    Bucket& b = buckets_[next_++];
    b.sum = comm_.start_allreduce_sum(b.buffer);
  }
}

void GradientReducer::finish() {
  armed_ = false;
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (arrived_[k]) continue;
    Bucket& b = buckets_[bucket_of_[k]];
    at::Tensor slice = b.buffer.narrow(0, offset_of_[k], params_[k].numel());
    // Not overlapped: the gradient autograd accumulated. Overlapped: no gradient reached this
    // parameter on this rank (zero, so that every rank reduces the same buckets).
    const at::Tensor& g = params_[k].grad();
    if (!overlap_ && g.defined()) slice.copy_(g.reshape({-1}));
    else slice.zero_();
    arrived_[k] = true;
    --b.missing;
  }
  start_ready_buckets();
  const double ranks = comm_.world_size();
  for (auto& b : buckets_) {
    if (b.sum) b.sum->wait();
    b.sum.reset();
    b.buffer.div_(ranks);
    for (size_t k : b.params) {
      at::Tensor& p = params_[k];
      const at::Tensor value = b.buffer.narrow(0, offset_of_[k], p.numel()).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(value);
      else p.mutable_grad() = value.clone(p.suggest_memory_format());
    }
  }
}

}  // namespace mrcnn::train
