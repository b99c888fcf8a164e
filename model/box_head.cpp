#include "model/box_head.h"

#include <ATen/ATen.h>

#include "model/init.h"

namespace mrcnn::model {

BoxHeadImpl::BoxHeadImpl(int64_t in_features, int64_t representation_size) {
  fc6 = register_module("fc6", torch::nn::Linear(in_features, representation_size));
  fc7 = register_module("fc7", torch::nn::Linear(representation_size, representation_size));
}

at::Tensor BoxHeadImpl::forward(const at::Tensor& pooled) {
  // flatten(1) reads channels, then rows, then columns whatever the memory format, as the
  // weights expect; a channels-last input is copied here.
  at::Tensor x = fc6->forward(pooled.flatten(1)).relu_();
  return fc7->forward(x).relu_();
}

void BoxHeadImpl::init_weights(at::Generator gen) {
  for (auto* fc : {&fc6, &fc7}) {
    init::kaiming_uniform((*fc)->weight, 1.0, init::FanMode::kFanIn, gen);
    init::zeros((*fc)->bias);
  }
}

BoxPredictorImpl::BoxPredictorImpl(int64_t in_features, int64_t num_classes) {
  cls_score = register_module("cls_score", torch::nn::Linear(in_features, num_classes));
  bbox_pred = register_module("bbox_pred", torch::nn::Linear(in_features, 4 * num_classes));
}

std::pair<at::Tensor, at::Tensor> BoxPredictorImpl::forward(const at::Tensor& x) {
  return {cls_score->forward(x), bbox_pred->forward(x)};
}

void BoxPredictorImpl::init_weights(at::Generator gen) {
  init::normal(cls_score->weight, 0.01, gen);
  init::zeros(cls_score->bias);
  init::normal(bbox_pred->weight, 0.001, gen);
  init::zeros(bbox_pred->bias);
}

}  // namespace mrcnn::model
