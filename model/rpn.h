// Region Proposal Network: a head shared by the pyramid levels (3x3 convolution + ReLU, then 1x1
// convolutions to A objectness logits and 4A box deltas per location), the fused proposal op
// (ops::generate_proposals: top-k per level, decode, clip, NMS, post-NMS selection), and in
// training the anchor matching, balanced sampling and loss:
//   loss_objectness  = binary cross-entropy over the sampled anchors (mean),
//   loss_rpn_box_reg = smooth-L1 (beta) over the sampled positives / number sampled.
// The head is evaluated twice: on the full maps without a graph (for the proposals), and at the
// sampled anchors' cells only for the losses (3x3 patches times the convolution's weights): the
// same values and gradients, but backward keeps no map of the head and computes no full-map
// convolution gradient (the loss reads a few hundred cells of maps of up to 134,400 cells).
//
// Parameter names: head.conv.*, head.cls_logits.*, head.bbox_pred.*.
// Thread-safety: as any torch::nn::Module; losses() and forward_train() draw from (mutate) the
// sample streams they are given.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/ops/proposals.h"
#include "model/ops/box/sampler.h"
#include "model/options.h"
#include "model/stage_losses.h"
#include "model/targets.h"

namespace mrcnn::model {

class RPNHeadImpl : public torch::nn::Module {
 public:
  RPNHeadImpl(int64_t channels, int64_t num_anchors);

  // Per level: objectness [N, A, H, W] and deltas [N, 4A, H, W] (RPN calls it without a graph:
  // its losses evaluate the same layers at the sampled anchors). See RPNHeadMaps.
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> forward(
      const std::vector<at::Tensor>& features);

  // Normal(0, 0.01) weights, zero biases.
  void init_weights(at::Generator gen);

  torch::nn::Conv2d conv{nullptr}, cls_logits{nullptr}, bbox_pred{nullptr};
};
TORCH_MODULE(RPNHead);

// The training targets of a batch's anchors before the draw (RPNImpl::label).
struct RPNLabels {
  at::Tensor anchors;               // [sum of H*W*A, 4]: every level's anchors, level after level
  at::Tensor matches;               // int64 [N, anchors]: each anchor's ground truth (or Matcher code)
  ops::BalancedPositiveNegativeSampler::Pending draw;  // its candidates, counted on the device
};

// The head's maps of every level: objectness [N, A, H, W] and deltas [N, 4A, H, W].
using RPNHeadMaps = std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>>;

// Which proposal counts propose() keeps: training's (pre_nms_top_n_train, post_nms_top_n_train,
// per batch where post_nms_per_batch_train says so) or the test's.
enum class ProposalCounts { kTraining, kTest };

// The stage's contract is the RoI heads': propose() for the proposals, label() and losses() for
// training in two halves, forward_train() as the sequence of those two with the read between.
class RPNImpl : public torch::nn::Module {
 public:
  RPNImpl(const RPNOptions& options, int64_t channels);

  // The head on the full maps of P2..P6, without a graph: the proposals need every location but
  // no gradient. The losses evaluate the head again at the sampled cells alone (losses()), so
  // backward keeps no map of the head and does no full-map convolution backward.
  RPNHeadMaps head_maps(const std::vector<at::Tensor>& features);
  // Proposals of a batch (constants for the rest of the network): features P2..P6 [N, C, H_l, W_l];
  // image_sizes int64 [N, 2], the true sizes (CPU); maps: head_maps(features), or the same maps
  // computed by the caller (MaskRCNN's CUDA graphs).
  ops::Proposals propose(const std::vector<at::Tensor>& features, const at::Tensor& image_sizes,
                         const RPNHeadMaps& maps, ProposalCounts counts) const;

  // Anchors of every level for the features of a padded batch (one [H*W*A, 4] per level), on the
  // features' device, built there. Kept for the last few batch shapes (grids, strides, dtype,
  // device and, on a GPU, the current stream, on which they were built without blocking): a batch
  // of a shape seen recently reuses them. The tensors are shared between calls: read them, never
  // write to them.
  std::vector<at::Tensor> anchors(const std::vector<at::Tensor>& features) const;
  // (stride_h, stride_w) of every level: the fixed anchor_strides, or torchvision's inference.
  std::vector<std::array<int64_t, 2>> anchor_strides(const std::vector<at::Tensor>& features) const;

  // Training in two halves, so that a caller can read the RPN's sample counts in the copy that
  // reads other ones (MaskRCNN reads the RoI heads' with them): label() matches every anchor to
  // the targets and counts the candidates without reading the device; losses() draws the sample
  // from those counts on the host (`host_counts`: labels.draw.counts on the CPU) and evaluates
  // the head at the sampled anchors: loss_objectness and loss_rpn_box_reg, over
  // counts.sampled anchors of which counts.positive are positives. forward_train() is label(),
  // the read, then losses().
  RPNLabels label(const std::vector<at::Tensor>& features,
                  const std::vector<ImageTargets>& targets) const;
  StageLosses losses(const std::vector<at::Tensor>& features, const RPNLabels& labels,
                     const at::Tensor& host_counts, const std::vector<ImageTargets>& targets,
                     SampleStreams& streams) const;
  StageLosses forward_train(const std::vector<at::Tensor>& features,
                            const std::vector<ImageTargets>& targets, SampleStreams& streams) const;

  // How losses() evaluates the head at the sampled anchors. kPerLevel groups them by level,
  // which needs each level's number of samples on the host (one read), and multiplies level by
  // level. kAllLevels gathers every sampled anchor's patch from every level (clamped into its
  // grid), keeps its own level's and multiplies once: L gathers of a few thousand patches and no
  // read. The same values up to the order of float sums. kAuto: per level on the CPU (where the
  // read costs nothing; the results of earlier releases, bit for bit), all levels elsewhere.
  enum class LossGather { kAuto, kPerLevel, kAllLevels };
  void set_loss_gather(LossGather gather) { loss_gather_ = gather; }

  // label() matches the anchors of several images at once: their IoUs as one [n, G, A] tensor (G
  // the images' most ground truth boxes, the others padded), as many images as keep n * G * A
  // within this many elements; an image alone where even two would not fit (the anchors of an
  // 800x1344 image number 268,569: at the default, about five images of 20 boxes). The same
  // matches whatever the budget (each image's IoUs and matches are the same operators,
  // elementwise); 0 matches image by image.
  void set_iou_batch_elements(int64_t elements) { iou_batch_elements_ = elements; }

  const RPNOptions& options() const { return options_; }
  RPNHead head{nullptr};

 private:
  // The sampled anchors of a batch (see rpn.cpp) and the head's predictions at them.
  struct Sample;
  struct SampledPredictions;
  ops::BalancedPositiveNegativeSampler sampler() const;
  // Draws every image's sample from its stream, image after image.
  Sample draw(const RPNLabels& labels, const at::Tensor& host_counts,
              const std::vector<ImageTargets>& targets, SampleStreams& streams) const;
  // The head at the sampled anchors, all levels gathered at once or level by level (LossGather).
  SampledPredictions predict_all_levels(const std::vector<at::Tensor>& features, const Sample& s) const;
  SampledPredictions predict_per_level(const std::vector<at::Tensor>& features, const Sample& s) const;
  // Throws std::invalid_argument unless there is one feature level per anchor size.
  void check_levels(const std::vector<at::Tensor>& features) const;

  RPNOptions options_;
  int64_t num_anchors_;
  LossGather loss_gather_ = LossGather::kAuto;
  int64_t iou_batch_elements_ = int64_t{1} << 25;
  struct AnchorCache;  // shared by clones of the module; thread-safe
  std::shared_ptr<AnchorCache> anchor_cache_;
};
TORCH_MODULE(RPN);

}  // namespace mrcnn::model
