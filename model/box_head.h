// The box branch's layers: the two-layer MLP feature extractor on 7x7 pooled RoIs (fc6, fc7 with
// ReLU, the reference's FPN2MLPFeatureExtractor) and the predictor (class logits and
// class-specific box deltas, FPNPredictor).
//
// Parameter names: box_head.fc6.*, box_head.fc7.*, box_predictor.cls_score.*,
// box_predictor.bbox_pred.* (under roi_heads.).
// Thread-safety: as any torch::nn::Module.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <utility>

namespace mrcnn::model {

class BoxHeadImpl : public torch::nn::Module {
 public:
  // in_features = channels * resolution^2 of the pooled RoIs.
  BoxHeadImpl(int64_t in_features, int64_t representation_size);

  // [K, C, R, R] -> [K, representation_size].
  at::Tensor forward(const at::Tensor& pooled);

  // Kaiming-uniform (a = 1) weights, zero biases (the reference's make_fc).
  void init_weights(at::Generator gen);

  torch::nn::Linear fc6{nullptr}, fc7{nullptr};
};
TORCH_MODULE(BoxHead);

class BoxPredictorImpl : public torch::nn::Module {
 public:
  BoxPredictorImpl(int64_t in_features, int64_t num_classes);

  // [K, F] -> (class logits [K, num_classes], box deltas [K, 4 * num_classes]).
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x);

  // Normal(0, 0.01) class weights, Normal(0, 0.001) box weights, zero biases.
  void init_weights(at::Generator gen);

  torch::nn::Linear cls_score{nullptr}, bbox_pred{nullptr};
};
TORCH_MODULE(BoxPredictor);

}  // namespace mrcnn::model
