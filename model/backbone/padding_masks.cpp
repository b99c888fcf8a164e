#include "model/backbone/padding_masks.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <stdexcept>
#include <string>

#include "model/ops/host_copy.h"

namespace mrcnn::model {

namespace {

// Zeroes x's padding in place: one masked fill in x's own dtype and layout. Its backward zeroes the
// gradient there into a tensor of the gradient's own layout: ATen's masked_fill backward returns a
// contiguous gradient for a channels-last one, and every layer before would then run its backward
// in the other layout (other kernels, other rounding than where nothing is masked).
struct ZeroPadding : torch::autograd::Function<ZeroPadding> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor x, const at::Tensor& padding) {
    ctx->mark_dirty({x});
    ctx->saved_data["padding"] = padding;
    x.masked_fill_(padding, 0);
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor padding = ctx->saved_data["padding"].toTensor();
    const at::Tensor& g = grads[0];
    at::Tensor out = at::empty_like(g, at::MemoryFormat::Preserve);
    at::where_out(out, padding, at::zeros({}, g.options()), g);
    return {out, at::Tensor()};
  }
};

}  // namespace

PaddingMasks::PaddingMasks(const at::Tensor& image_sizes, int64_t padded_h, int64_t padded_w,
                           c10::Device device)
    : sizes_(image_sizes.to(at::kCPU, at::kLong).contiguous()),
      padded_h_(padded_h),
      padded_w_(padded_w),
      device_(device) {}

PaddingMasks PaddingMasks::from_device_sizes(const at::Tensor& device_sizes, int64_t padded_h, int64_t padded_w) {
  PaddingMasks m(at::empty({0, 2}, at::kLong), padded_h, padded_w, device_sizes.device());
  m.sizes_ = at::Tensor();
  m.device_sizes_ = device_sizes;
  return m;
}

const at::Tensor& PaddingMasks::device_sizes() {
  // One copy of the sizes per batch: from page-locked memory without blocking the host on a GPU
  // (the masks are then computed there), the host tensor itself on the CPU.
  if (!device_sizes_.defined()) device_sizes_ = ops::copy_to_device_async(sizes_, device_);
  return device_sizes_;
}

const at::Tensor& PaddingMasks::padding(int64_t h, int64_t w) {
  const auto key = std::make_pair(h, w);
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (h <= 0 || w <= 0 || padded_h_ % h != 0 || padded_w_ % w != 0)
    throw std::invalid_argument("PaddingMasks: a " + std::to_string(h) + "x" + std::to_string(w) +
                                " map does not divide the padded " + std::to_string(padded_h_) +
                                "x" + std::to_string(padded_w_) + " batch");
  // ceil(h_i * H / Hp): the valid extent a stride-Hp/H convolution chain leaves. Whether any
  // image is padded at this size is decided on the host copy (no device read); the mask itself
  // is computed where it is used, from the sizes copied there once.
  bool padded = !sizes_.defined();
  if (!padded) {
    const auto s = sizes_.accessor<int64_t, 2>();
    for (int64_t i = 0; i < sizes_.size(0); ++i)
      padded |= (s[i][0] * h + padded_h_ - 1) / padded_h_ < h || (s[i][1] * w + padded_w_ - 1) / padded_w_ < w;
  }
  at::Tensor m;
  if (padded) {
    const at::Tensor& sizes = device_sizes();
    const int64_t n = sizes.size(0);
    const at::Tensor rows = (sizes.select(1, 0) * h + (padded_h_ - 1)).div(padded_h_, "floor");
    const at::Tensor cols = (sizes.select(1, 1) * w + (padded_w_ - 1)).div(padded_w_, "floor");
    const auto i64 = at::TensorOptions().dtype(at::kLong).device(device_);
    const at::Tensor r = at::arange(h, i64).view({1, h, 1}) >= rows.view({n, 1, 1});
    const at::Tensor c = at::arange(w, i64).view({1, 1, w}) >= cols.view({n, 1, 1});
    m = r.logical_or(c).unsqueeze(1);
  }
  return cache_.emplace(key, std::move(m)).first->second;
}

at::Tensor PaddingMasks::mask(int64_t h, int64_t w) {
  const at::Tensor& p = padding(h, w);
  return p.defined() ? p.logical_not().to(at::kFloat) : at::Tensor();
}

void PaddingMasks::apply_(const at::Tensor& x) {
  const at::Tensor& p = padding(x.size(2), x.size(3));
  if (p.defined()) ZeroPadding::apply(x, p);
}

at::Tensor PaddingMasks::applied(const at::Tensor& x) {
  const at::Tensor& p = padding(x.size(2), x.size(3));
  // Not x.masked_fill(p, 0): out of place it returns a contiguous tensor for a channels-last x,
  // and the next layers would then run in the other layout (other kernels, other rounding).
  return p.defined() ? ZeroPadding::apply(x.clone(at::MemoryFormat::Preserve), p) : x;
}

}  // namespace mrcnn::model
