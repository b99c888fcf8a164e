#include "model/backbone/fpn.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <stdexcept>
#include <string>

#include "model/backbone/conv_norm.h"
#include "model/init.h"

namespace mrcnn::model {

FPNImpl::FPNImpl(const std::vector<int64_t>& in_channels, int64_t out_channels)
    : out_channels_(out_channels) {
  if (in_channels.size() != 4)
    throw std::invalid_argument("FPN: expected the channels of 4 levels C2..C5, got " +
                                std::to_string(in_channels.size()));
  auto inner_list = register_module("inner", torch::nn::ModuleList());
  auto layer_list = register_module("layer", torch::nn::ModuleList());
  for (int64_t c : in_channels) {
    inner.emplace_back(torch::nn::Conv2dOptions(c, out_channels, 1));
    layer.emplace_back(torch::nn::Conv2dOptions(out_channels, out_channels, 3).padding(1));
    inner_list->push_back(inner.back());
    layer_list->push_back(layer.back());
  }
}

std::vector<at::Tensor> FPNImpl::forward(const std::vector<at::Tensor>& c, PaddingMasks* masks) {
  if (c.size() != 4)
    throw std::invalid_argument("FPN: expected 4 feature maps C2..C5, got " +
                                std::to_string(c.size()));
  std::vector<at::Tensor> p(5);
  // Convolution outputs are masked in place: their backward does not keep them.
  auto masked = [masks](at::Tensor t) {
    if (masks) masks->apply_(t);
    return t;
  };
  at::Tensor last = masked(inner[3]->forward(c[3]));
  p[3] = masked(conv2d_train(last, layer[3]->weight, layer[3]->bias, 1, 1, own_weight_grad));
  for (int i = 2; i >= 0; --i) {
    at::Tensor lateral = inner[i]->forward(c[i]);
    // Padded sizes are multiples of 32, so every level is exactly twice the next one. Nearest
    // upsampling is a copy, so it runs in the maps' own precision: autocast would run it in
    // float32 (a full-map cast, twice the bytes written and read, a mixed-dtype add), for the
    // same bits: the add rounds the float32 sum of two float16 values once either way, and the
    // backward sums each cell's four gradients in float32 before one rounding either way (tested
    // bit for bit on the CPU's kernels in float16 and bfloat16; CUDA's wait for a GPU).
    at::Tensor up;
    {
      c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
      up = at::upsample_nearest2d(last, {lateral.size(2), lateral.size(3)});
    }
    lateral.add_(up);
    last = masked(lateral);
    p[i] = masked(conv2d_train(last, layer[i]->weight, layer[i]->bias, 1, 1, own_weight_grad));
  }
  p[4] = at::max_pool2d(p[3], {1, 1}, {2, 2});
  return p;
}

void FPNImpl::init_weights(at::Generator gen) {
  for (auto* list : {&inner, &layer}) {
    for (auto& conv : *list) {
      init::kaiming_uniform(conv->weight, 1.0, init::FanMode::kFanIn, gen);
      init::zeros(conv->bias);
    }
  }
}

}  // namespace mrcnn::model
