// Mask R-CNN with a ResNet-FPN backbone: backbone -> FPN -> RPN -> RoI heads, with training and
// inference as two entry points (detectron2's forward / inference split):
//
//   forward_train(batch, generator) -> TrainOutput: the five losses (float32 scalars, fixed
//       names: loss_objectness, loss_rpn_box_reg, loss_classifier, loss_box_reg, loss_mask) and
//       the counts that normalize them;
//   inference(batch) -> one Detections per image, in the ORIGINAL image's pixels: boxes mapped
//       back from the resized image, masks pasted at the original size and thresholded
//       (inverse_transform.h).
//
// The module's train()/eval() flag is not consulted: the entry point decides (training or test
// proposal counts). Neither entry point lets padding matter: every loss and detection depends
// only on each image's true size (image_sizes) and ground-truth count (gt_counts) -- see
// README.md for the exact conditions.
//
// Device-generic: the batch is moved to the device of the parameters (model->to(device));
// channels-last and mixed precision follow ModelOptions. Parameter names (the safetensors
// checkpoint's): backbone.*, fpn.*, rpn.head.*, roi_heads.*.
//
// Thread-safety: as any torch::nn::Module: concurrent calls need external synchronization when
// anything may modify the parameters; forward_train mutates the generator it is given.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/backbone/fpn.h"
#include "model/backbone/resnet.h"
#include "model/feature_graphs.h"
#include "model/head_streams.h"
#include "model/options.h"
#include "model/roi_heads.h"
#include "model/rpn.h"
#include "model/stage_losses.h"
#include "model/structures.h"

namespace mrcnn::model {

// The fixed loss names, in the order the reference logs them.
inline constexpr const char* kLossNames[] = {"loss_objectness", "loss_rpn_box_reg",
                                             "loss_classifier", "loss_box_reg", "loss_mask"};

// A training step's losses (their sum, what backward starts from, is total_loss(losses)) and the
// two stages' sample counts.
struct TrainOutput {
  std::map<std::string, at::Tensor> losses;  // float32 scalars, see kLossNames
  SampleCounts rpn;  // anchors in the RPN's losses (sampled: loss_objectness's and loss_rpn_box_reg's denominator)
  SampleCounts roi;  // RoIs: sampled in loss_classifier and loss_box_reg's denominator, positive in loss_mask

  // The counts by name, for logs and tests: rpn_sampled, rpn_positive, roi_sampled, roi_positive.
  std::map<std::string, at::Tensor> counts() const;
};

class MaskRCNNImpl : public torch::nn::Module {
 public:
  // Builds the network on the CPU and initializes every weight from `init_generator` (default:
  // the default CPU generator, seeded by torch::manual_seed). Throws std::invalid_argument on
  // invalid options.
  explicit MaskRCNNImpl(const ModelOptions& options,
                        std::optional<at::Generator> init_generator = std::nullopt);

  // Losses of one training step. Samplers draw from `generator` (see SamplingStreams). Throws
  // std::invalid_argument on a malformed batch (names the field).
  TrainOutput forward_train(const Batch& batch, at::Generator& generator);

  // Detections of every image of the batch (no gradient). Batch::original_sizes gives the
  // coordinates to map back to; when undefined, the resized image is the original.
  std::vector<Detections> inference(const Batch& batch);

  // The mask branch (pooling, head, predictor) forward and backward once for each RoI count of
  // `roi_counts`, on the features of `batch` and under the network's precision, as a training
  // step runs it: so that a device makes its per-shape plans (cuDNN's) for those counts before a
  // timed run meets them. No loss is returned and no random stream is drawn from; the gradients it
  // leaves on the parameters are the caller's to drop.
  void warm_up_mask_head(const Batch& batch, const std::vector<int64_t>& roi_counts);

  // Re-initializes every weight (from scratch; frozen norms become the identity).
  void init_weights(at::Generator gen);

  const ModelOptions& options() const { return options_; }
  // Where and in which dtype the network computes: those of its parameters (model->to(...)).
  // float32 normally; float64 works too (reference checks), with float32 Detections.
  c10::Device device() const;
  at::ScalarType dtype() const;

  // Training runs the backbone, FPN and RPN head from graphs (feature_graphs.h), for up to
  // max_shapes batch shapes. A CUDA model whose options say cuda_graph_shapes > 0 turns CUDA
  // graphs on by itself at its first training step; tests use FeatureGraphs::Replay::kRerun on
  // any device. Inference never uses them.
  void use_feature_graphs(int64_t max_shapes, FeatureGraphs::Replay replay);
  // Null until graphs are in use.
  const FeatureGraphs* feature_graphs() const { return graphs_.get(); }

  ResNet backbone{nullptr};
  FPN fpn{nullptr};
  RPN rpn{nullptr};
  RoIHeads roi_heads{nullptr};

  // Stand-ins for P2..P6 of the batch without their values (no channels: nothing allocated), of
  // the sizes the backbone's stride-2 layers give (each rounds up: ceil(size / 2^(l + 2))), on
  // the model's device and in its dtype: what the RPN's labels need before the front has run.
  std::vector<at::Tensor> level_shapes(const Batch& batch) const;

 private:
  // The batch's images on the model's device, in its dtype and memory format.
  at::Tensor device_images(const Batch& batch);
  // P2..P6 of the batch's images.
  std::vector<at::Tensor> features(const Batch& batch);
  // P2..P6 of images already on the device (backbone, then FPN), with those padding masks.
  std::vector<at::Tensor> pyramid(const at::Tensor& images, PaddingMasks* masks);
  // From the graphs; nullopt when none are in use or the batch's shape is beyond their count.
  std::optional<FeatureGraphs::Outputs> graphed_features(const Batch& batch);

  ModelOptions options_;
  std::shared_ptr<FeatureGraphs> graphs_;
  // The loss heads' streams (options_.head_streams on a GPU), made at the first training step on
  // the model's device of that step.
  std::unique_ptr<HeadStreams> heads_;
  c10::Device heads_device_ = c10::Device(c10::kCPU);
};
TORCH_MODULE(MaskRCNN);

}  // namespace mrcnn::model
