// The RoI heads of Mask R-CNN: the box branch (multi-level RoIAlign 7x7 -> BoxHead ->
// BoxPredictor) and the mask branch (multi-level RoIAlign 14x14 -> MaskHead -> MaskPredictor),
// with training and inference as separate entry points.
//
// Training (per image: proposals + ground-truth boxes, matched at IoU fg/bg, sampled
// batch_size_per_image at positive_fraction; then batched over the whole batch):
//   loss_classifier = cross-entropy over the sampled RoIs (mean);
//   loss_box_reg    = smooth-L1 (beta) of the positives' class-specific deltas / sampled RoIs;
//   loss_mask       = binary cross-entropy of the positives' mask logits of their class against
//                     ops::mask_targets (the ground-truth polygons cropped to the RoI), mean.
// Inference: softmax scores, class-specific boxes decoded and clipped, score > threshold,
// per-class NMS, the best detections_per_image, then the mask probabilities of each detection's
// class. Each image's result is its own, but the filters and NMS run once for the batch
// (categories: image x class), so that a GPU reads the device a few times per batch.
//
// Parameter names: box_head.*, box_predictor.*, mask_head.*, mask_predictor.*.
// Thread-safety: as any torch::nn::Module; forward_train mutates the sample streams.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/box_head.h"
#include "model/head_streams.h"
#include "model/mask_head.h"
#include "model/ops/proposals.h"
#include "model/ops/box/sampler.h"
#include "model/options.h"
#include "model/stage_losses.h"
#include "model/targets.h"

namespace mrcnn::model {

// Detections of one image in the coordinates of the resized image the network saw.
struct RawDetections {
  at::Tensor boxes;       // float32 [D, 4] XYXY
  at::Tensor scores;      // float32 [D]
  at::Tensor labels;      // int64 [D]
  at::Tensor mask_probs;  // float32 [D, M, M]: sigmoid of the mask logits of the label's class
};

// The training candidates of a batch before the draw (RoIHeadsImpl::label).
// The candidates of a batch, one row per image: its padded proposals, then its ground truth
// padded to the batch's most (C = proposal slots + that most). Padding is labelled -1, so an
// image's draw is the draw of its own proposals and ground truth.
struct RoICandidates {
  at::Tensor boxes;     // [N, C, 4]
  at::Tensor gt_index;  // int64 [N, C]: each candidate's matched ground truth (>= 0)
  at::Tensor classes;   // int64 [N, C]: its class, 0 background, -1 not sampled
  at::Tensor gt_boxes;  // [N, G, 4]: the ground truth, padded (the candidates' dtype)
  ops::BalancedPositiveNegativeSampler::Pending draw;  // counted on the device
};

class RoIHeadsImpl : public torch::nn::Module {
 public:
  explicit RoIHeadsImpl(const ModelOptions& options);

  // features: P2..P6 (P6 is not pooled from); proposals as the RPN returns them. The losses
  // loss_classifier, loss_box_reg and loss_mask, over counts.sampled RoIs of which
  // counts.positive are positives (the box regression's and the mask loss's).
  StageLosses forward_train(const std::vector<at::Tensor>& features,
                            const ops::Proposals& proposals,
                            const std::vector<ImageTargets>& targets, SampleStreams& streams);
  // The same in two halves, as RPNImpl::label and losses: label() matches the candidates and
  // counts them without reading the device; forward_train draws from those counts on the host
  // (`host_counts`: candidates.draw.counts on the CPU). The first overload is label(), the read,
  // then the second.
  RoICandidates label(const ops::Proposals& proposals, const std::vector<ImageTargets>& targets) const;
  // The box head and the mask head run on `heads`' streams (head_streams.h): their losses are
  // ready on the step's stream after heads.join().
  StageLosses forward_train(const std::vector<at::Tensor>& features, const RoICandidates& candidates,
                            const at::Tensor& host_counts, const std::vector<ImageTargets>& targets,
                            SampleStreams& streams, HeadStreams& heads);

  // image_sizes: int64 [N, 2] true sizes (CPU). One RawDetections per image: the box branch's
  // detections (select_detections), then the mask branch's probabilities for them.
  std::vector<RawDetections> inference(const std::vector<at::Tensor>& features,
                                       const ops::Proposals& proposals,
                                       const at::Tensor& image_sizes);

  void init_weights(at::Generator gen);

  // The mask branch's logits of each RoI's own class: rois [K, 5] pooled from P2..P5, padded to
  // mask_head.roi_bucket rows as training pads them, [K, 2R, 2R] (what the mask loss reads).
  at::Tensor mask_logits(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                         const at::Tensor& labels);

  BoxHead box_head{nullptr};
  BoxPredictor box_predictor{nullptr};
  MaskHead mask_head{nullptr};
  MaskPredictor mask_predictor{nullptr};

 private:
  // The RoIs a training step learns from, over the whole batch: every sampled RoI with its class
  // (0: background), and the positives' rows, classes, box regression targets and mask targets.
  struct SampledRoIs {
    at::Tensor rois;          // [K, 5]
    at::Tensor labels;        // int64 [K]
    at::Tensor positives;     // int64 [Kp]: rows of rois
    at::Tensor pos_labels;    // int64 [Kp]
    at::Tensor box_targets;   // [Kp, 4]
    at::Tensor mask_targets;  // float [Kp, M, M]
  };
  // Samples each image's RoIs from its stream among the labelled candidates.
  SampledRoIs sample(const RoICandidates& candidates, const at::Tensor& host_counts,
                     const std::vector<ImageTargets>& targets, SampleStreams& streams) const;
  ops::BalancedPositiveNegativeSampler sampler() const;
  // The box part: loss_classifier and loss_box_reg into `losses`.
  void box_losses(const std::vector<at::Tensor>& features, const SampledRoIs& s,
                  std::map<std::string, at::Tensor>& losses);
  // The mask part, on the positive RoIs only: loss_mask into `losses`.
  void mask_loss(const std::vector<at::Tensor>& features, const SampledRoIs& s,
                 std::map<std::string, at::Tensor>& losses);

  // Inference's box branch on rois [P, 5]: every class's decoded box [P, C, 4] and the class
  // scores [P, C] (softmax).
  std::pair<at::Tensor, at::Tensor> box_predictions(const std::vector<at::Tensor>& features,
                                                    const at::Tensor& rois);
  // The detections of each image (per_image[i] proposals, image i's true size in sizes [N, 2]):
  // score filter, size filter, class-wise NMS, the best detections_per_image; no masks yet.
  std::vector<RawDetections> select_detections(const at::Tensor& boxes, const at::Tensor& scores,
                                               const std::vector<int64_t>& per_image,
                                               const at::Tensor& sizes) const;
  // Fills each detection's mask_probs: the mask branch at its box, of its label's class.
  void predict_masks(const std::vector<at::Tensor>& features, std::vector<RawDetections>& detections);

  // Pools rois [K, 5] from P2..P5.
  at::Tensor pool(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                  int64_t resolution, int64_t sampling_ratio, bool aligned) const;

  int64_t num_classes_;
  BoxHeadOptions box_options_;
  MaskHeadOptions mask_options_;
};
TORCH_MODULE(RoIHeads);

}  // namespace mrcnn::model
