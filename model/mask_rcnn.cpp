#include "model/mask_rcnn.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "model/autocast.h"
#include "model/backbone/conv_norm.h"
#include "model/backbone/padding_masks.h"
#include "model/inverse_transform.h"
#include "model/targets.h"

namespace mrcnn::model {

std::map<std::string, at::Tensor> TrainOutput::counts() const {
  return {{"rpn_sampled", rpn.sampled},
          {"rpn_positive", rpn.positive},
          {"roi_sampled", roi.sampled},
          {"roi_positive", roi.positive}};
}

MaskRCNNImpl::MaskRCNNImpl(const ModelOptions& options, std::optional<at::Generator> init_generator)
    : options_(options) {
  options_.validate();
  backbone = register_module("backbone", ResNet(options_.backbone));
  fpn = register_module("fpn", FPN(backbone->out_channels(), options_.fpn.out_channels));
  rpn = register_module("rpn", RPN(options_.rpn, options_.fpn.out_channels));
  roi_heads = register_module("roi_heads", RoIHeads(options_));
  init_weights(init_generator ? *init_generator : at::detail::getDefaultCPUGenerator());
  if (options_.channels_last) {
    c10::NoGradGuard no_grad;
    for (auto& p : parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
  const bool own_weight_grad = options_.channels_last && options_.cpu_own_weight_grad && cpu_below_avx512();
  for (const auto& m : modules(/*include_self=*/false))
    if (auto* conv = m->as<ConvNormImpl>()) conv->own_weight_grad = own_weight_grad;
  fpn->own_weight_grad = own_weight_grad;
  roi_heads->mask_head->own_weight_grad = own_weight_grad;
}

void MaskRCNNImpl::init_weights(at::Generator gen) {
  // A fixed order, so that one seed gives one set of weights.
  backbone->init_weights(gen);
  fpn->init_weights(gen);
  rpn->head->init_weights(gen);
  roi_heads->init_weights(gen);
}

c10::Device MaskRCNNImpl::device() const { return parameters().front().device(); }

at::ScalarType MaskRCNNImpl::dtype() const { return parameters().front().scalar_type(); }

at::Tensor MaskRCNNImpl::device_images(const Batch& batch) {
  at::Tensor images = batch.images.to(device(), dtype());
  if (options_.channels_last) images = images.contiguous(at::MemoryFormat::ChannelsLast);
  return images;
}

void MaskRCNNImpl::use_feature_graphs(int64_t max_shapes, FeatureGraphs::Replay replay) {
  // The RPN head's maps feed the proposals only (no gradient): its losses evaluate it again.
  std::vector<at::Tensor> trainable, watched;
  auto add = [&](const torch::nn::Module& m, bool with_gradient) {
    for (const at::Tensor& p : m.parameters()) {
      watched.push_back(p);
      if (with_gradient && p.requires_grad()) trainable.push_back(p);
    }
    for (const at::Tensor& b : m.buffers()) watched.push_back(b);  // frozen norms' scales and biases
  };
  add(*backbone, true);
  add(*fpn, true);
  add(*rpn->head, false);
  auto body = [this](const at::Tensor& images, PaddingMasks* masks) {
    FeatureGraphs::Outputs out;
    out.features = pyramid(images, masks);
    const c10::NoGradGuard no_grad;
    out.head = rpn->head->forward(out.features);
    return out;
  };
  graphs_ = std::make_shared<FeatureGraphs>(std::move(body), std::move(trainable), std::move(watched),
                                            options_.mask_padding, max_shapes, replay);
}

std::optional<FeatureGraphs::Outputs> MaskRCNNImpl::graphed_features(const Batch& batch) {
  if (!graphs_ && options_.cuda_graph_shapes > 0 && device().is_cuda())
    use_feature_graphs(options_.cuda_graph_shapes, FeatureGraphs::Replay::kCudaGraph);
  if (!graphs_) return std::nullopt;
  RECORD_FUNCTION("mrcnn::feature_graphs", std::vector<c10::IValue>());
  return graphs_->run(device_images(batch), batch.image_sizes);
}

std::vector<at::Tensor> MaskRCNNImpl::level_shapes(const Batch& batch) const {
  const int64_t n = batch.images.size(0);
  int64_t h = batch.images.size(2), w = batch.images.size(3);
  const auto options = at::TensorOptions().dtype(dtype()).device(device());
  std::vector<at::Tensor> out;
  h = (h + 3) / 4, w = (w + 3) / 4;  // P2: the stem's stride-2 convolution and max pooling
  for (size_t l = 0; l < rpn->options().anchor_sizes.size(); ++l) {
    out.push_back(at::empty({n, 0, h, w}, options));
    h = (h + 1) / 2, w = (w + 1) / 2;
  }
  return out;
}

std::vector<at::Tensor> MaskRCNNImpl::features(const Batch& batch) {
  const at::Tensor images = device_images(batch);
  std::optional<PaddingMasks> masks;
  if (options_.mask_padding)
    masks.emplace(batch.image_sizes, images.size(2), images.size(3), images.device());
  return pyramid(images, masks ? &*masks : nullptr);
}

std::vector<at::Tensor> MaskRCNNImpl::pyramid(const at::Tensor& images, PaddingMasks* masks) {
  std::vector<at::Tensor> c;
  {
    RECORD_FUNCTION("mrcnn::backbone", std::vector<c10::IValue>());
    c = backbone->forward(images, masks);
  }
  RECORD_FUNCTION("mrcnn::fpn", std::vector<c10::IValue>());
  return fpn->forward(c, masks);
}

namespace {

// MRCNN_RPN_LABELS_AFTER_FRONT=1: the RPN labels after the front, both heads' counts in one read
// (the order before the RPN labelled first), for A/B timings. Read once per process.
bool rpn_labels_after_front() {
  static const bool after = [] {
    const char* v = std::getenv("MRCNN_RPN_LABELS_AFTER_FRONT");
    return v != nullptr && std::string(v) == "1";
  }();
  return after;
}

// What the RPN's loss reads of the step's tensors (its stream marks them as used).
std::vector<at::Tensor> rpn_loss_reads(const std::vector<at::Tensor>& feats, const RPNLabels& labels,
                                       const std::vector<ImageTargets>& targets) {
  std::vector<at::Tensor> v = feats;
  const auto& draw = labels.draw;
  v.insert(v.end(), {labels.anchors, labels.matches, draw.counts, draw.positive_batch, draw.negative_batch});
  v.insert(v.end(), draw.positive.begin(), draw.positive.end());
  v.insert(v.end(), draw.negative.begin(), draw.negative.end());
  for (const ImageTargets& t : targets) v.insert(v.end(), {t.boxes, t.labels});
  return v;
}

}  // namespace

TrainOutput MaskRCNNImpl::forward_train(const Batch& batch, at::Generator& generator) {
  check_batch(batch, options_.num_classes, /*need_targets=*/true);
  const c10::Device dev = device();
  const std::vector<ImageTargets> targets = slice_targets(batch, dev, dtype());
  SampleStreams streams(options_.sampling_streams, generator, image_keys(batch));

  AutocastGuard autocast(options_.precision, dev.type());
  // The RPN labels its anchors before the front is queued: they need only the levels' sizes and
  // the ground truth. Their counts come to the host without blocking it, so that on a GPU the
  // host queues the front, the proposals and then the RPN's draw and loss while the front runs;
  // the RoI heads alone wait for the front (their read). The RPN still draws first, from the same
  // streams: the same samples as when both counts came in one read after the front
  // (MRCNN_RPN_LABELS_AFTER_FRONT=1, for A/B timings; also taken where the levels' sizes are not
  // the strides' ceilings).
  using Sampler = ops::BalancedPositiveNegativeSampler;
  const std::vector<at::Tensor> shapes = rpn_labels_after_front() ? std::vector<at::Tensor>{} : level_shapes(batch);
  RPNLabels anchor_labels;
  std::optional<Sampler::CountsRead> rpn_read;
  if (!shapes.empty()) {
    RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
    anchor_labels = rpn->label(shapes, targets);
    rpn_read.emplace(std::vector<const Sampler::Pending*>{&anchor_labels.draw});
  }
  const std::optional<FeatureGraphs::Outputs> graphed = graphed_features(batch);
  const std::vector<at::Tensor> feats = graphed ? graphed->features : features(batch);
  const ops::Proposals proposals = rpn->propose(feats, batch.image_sizes,
                                                graphed ? graphed->head : rpn->head_maps(feats),
                                                ProposalCounts::kTraining);
  bool same_shapes = feats.size() == shapes.size();
  for (size_t l = 0; same_shapes && l < feats.size(); ++l)
    same_shapes = feats[l].size(2) == shapes[l].size(2) && feats[l].size(3) == shapes[l].size(3);
  if (!same_shapes) {
    rpn_read.reset();
    RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
    anchor_labels = rpn->label(feats, targets);
  }
  // The three loss heads, each on its own stream when head_streams is on (the host draws in the
  // same order either way: the RPN's, then the RoIs').
  if (!heads_ || heads_device_ != dev) {
    heads_ = std::make_unique<HeadStreams>(options_.head_streams, dev);
    heads_device_ = dev;
  }
  StageLosses anchors;
  const auto rpn_losses = [&](const at::Tensor& counts) {
    const std::vector<at::Tensor> reads =
        heads_->on() ? rpn_loss_reads(feats, anchor_labels, targets) : std::vector<at::Tensor>{};
    heads_->run(HeadStreams::Head::kRpn, reads,
                [&] { anchors = rpn->losses(feats, anchor_labels, counts, targets, streams); });
  };
  // Each read of counts is a scope of its own (the RoI sampling's, as before the reads split).
  const auto read = [](const std::vector<const Sampler::Pending*>& pending, std::optional<Sampler::CountsRead>* queued) {
    RECORD_FUNCTION("mrcnn::roi_sampling", std::vector<c10::IValue>());
    {
      RECORD_FUNCTION("mrcnn::read", std::vector<c10::IValue>());
      return queued && *queued ? (*queued)->wait() : Sampler::read_counts(pending);
    }
  };
  std::optional<RoICandidates> candidates;
  at::Tensor roi_counts;
  if (rpn_read) {
    rpn_losses(read({}, &rpn_read).front());
    candidates = roi_heads->label(proposals, targets);
    roi_counts = read({&candidates->draw}, nullptr).front();
  } else {
    candidates = roi_heads->label(proposals, targets);
    const std::vector<at::Tensor> counts = read({&anchor_labels.draw, &candidates->draw}, nullptr);
    rpn_losses(counts[0]);
    roi_counts = counts[1];
  }
  StageLosses rois = roi_heads->forward_train(feats, *candidates, roi_counts, targets, streams, *heads_);
  TrainOutput out{.losses = std::move(anchors.losses), .rpn = anchors.counts, .roi = rois.counts};
  out.losses.merge(rois.losses);
  if (heads_->on()) {  // the losses, read by the step's stream from here (the counts are host tensors)
    std::vector<at::Tensor> ready;
    for (const auto& [name, loss] : out.losses) ready.push_back(loss);
    heads_->join(ready);
  }
  return out;
}

void MaskRCNNImpl::warm_up_mask_head(const Batch& batch, const std::vector<int64_t>& roi_counts) {
  check_batch(batch, options_.num_classes, /*need_targets=*/false);
  const c10::Device dev = device();
  AutocastGuard autocast(options_.precision, dev.type());
  std::vector<at::Tensor> feats;
  {
    c10::NoGradGuard no_grad;
    feats = features(batch);
  }
  // Leaves of their own, so that the pooling's backward runs as in a step (into nothing kept).
  for (at::Tensor& f : feats) f = f.detach().requires_grad_(true);
  const int64_t images = batch.images.size(0);
  const double h = static_cast<double>(batch.images.size(2)), w = static_cast<double>(batch.images.size(3));
  const double smallest = std::min(h, w);
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(dev);
  for (const int64_t k : roi_counts) {
    if (k <= 0) continue;
    // k centred squares over the batch's images, 16 pixels to the image's short side (every
    // pyramid level pooled from), one class each in turn.
    const at::Tensor i = at::arange(k, f32);
    const at::Tensor side = i.remainder(32).mul((smallest - 16) / 32).add(16);
    const at::Tensor x1 = side.mul(-0.5).add(w / 2), y1 = side.mul(-0.5).add(h / 2);
    const at::Tensor rois = at::stack({i.remainder(images), x1, y1, x1 + side, y1 + side}, 1);
    const at::Tensor labels =
        at::arange(k, at::TensorOptions().dtype(at::kLong).device(dev)).remainder(options_.num_classes - 1).add(1);
    roi_heads->mask_logits(feats, rois, labels).to(at::kFloat).sum().backward();
  }
}

std::vector<Detections> MaskRCNNImpl::inference(const Batch& batch) {
  check_batch(batch, options_.num_classes, /*need_targets=*/false);
  c10::NoGradGuard no_grad;
  std::vector<RawDetections> raw;
  {
    AutocastGuard autocast(options_.precision, device().type());
    const std::vector<at::Tensor> feats = features(batch);
    const ops::Proposals proposals =
        rpn->propose(feats, batch.image_sizes, rpn->head_maps(feats), ProposalCounts::kTest);
    raw = roi_heads->inference(feats, proposals, batch.image_sizes);
  }
  return to_original_image(raw, batch, options_.mask_head.mask_threshold);
}

}  // namespace mrcnn::model
