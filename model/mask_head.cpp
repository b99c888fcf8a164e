#include "model/mask_head.h"

#include <ATen/ATen.h>

#include <string>

#include "model/backbone/conv_norm.h"
#include "model/init.h"

namespace mrcnn::model {

MaskHeadImpl::MaskHeadImpl(int64_t in_channels, int64_t channels, int64_t num_convs) {
  int64_t in = in_channels;
  for (int64_t i = 0; i < num_convs; ++i) {
    fcn.push_back(register_module(
        "fcn" + std::to_string(i + 1),
        torch::nn::Conv2d(torch::nn::Conv2dOptions(in, channels, 3).padding(1))));
    in = channels;
  }
}

at::Tensor MaskHeadImpl::forward(const at::Tensor& pooled) {
  at::Tensor x = pooled;
  for (auto& conv : fcn) x = conv2d_train(x, conv->weight, conv->bias, 1, 1, own_weight_grad).relu_();
  return x;
}

void MaskHeadImpl::init_weights(at::Generator gen) {
  for (auto& conv : fcn) {
    init::kaiming_normal_relu(conv->weight, init::FanMode::kFanOut, gen);
    init::zeros(conv->bias);
  }
}

MaskPredictorImpl::MaskPredictorImpl(int64_t channels, int64_t num_classes) {
  conv5_mask = register_module(
      "conv5_mask",
      torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(channels, channels, 2).stride(2)));
  mask_fcn_logits = register_module(
      "mask_fcn_logits", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, num_classes, 1)));
}

at::Tensor MaskPredictorImpl::forward_all(const at::Tensor& x) {
  return mask_fcn_logits->forward(conv5_mask->forward(x).relu_());
}

at::Tensor MaskPredictorImpl::forward(const at::Tensor& x, const at::Tensor& labels) {
  const at::Tensor h = conv5_mask->forward(x).relu_();  // [K, D, M, M]
  const int64_t k = h.size(0), d = h.size(1), rows = h.size(2), cols = h.size(3);
  const at::Tensor w = mask_fcn_logits->weight.reshape({-1, d}).index_select(0, labels);  // [K, D]
  const at::Tensor b = mask_fcn_logits->bias.index_select(0, labels).view({k, 1, 1});
  if (h.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    // NHWC memory is [K, M*M, D] already: no copy.
    return at::baddbmm(b, h.permute({0, 2, 3, 1}).reshape({k, rows * cols, d}), w.unsqueeze(2))
        .view({k, rows, cols});
  }
  return at::baddbmm(b, w.unsqueeze(1), h.reshape({k, d, rows * cols})).view({k, rows, cols});
}

void MaskPredictorImpl::init_weights(at::Generator gen) {
  init::kaiming_normal_relu(conv5_mask->weight, init::FanMode::kFanOut, gen);
  init::zeros(conv5_mask->bias);
  init::kaiming_normal_relu(mask_fcn_logits->weight, init::FanMode::kFanOut, gen);
  init::zeros(mask_fcn_logits->bias);
}

}  // namespace mrcnn::model
