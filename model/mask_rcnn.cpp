#include "model/mask_rcnn.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include "model/autocast.h"
#include "model/backbone/conv_norm.h"
#include "model/backbone/padding_masks.h"
#include "model/ops/host_copy.h"
#include "model/ops/paste_masks.h"
#include "model/targets.h"

namespace mrcnn::model {

at::Tensor TrainOutput::total() const {
  at::Tensor sum;
  for (const auto& [name, loss] : losses) sum = sum.defined() ? sum + loss : loss;
  return sum;
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

TrainOutput MaskRCNNImpl::forward_train(const Batch& batch, at::Generator& generator) {
  check_batch(batch, options_.num_classes, /*need_targets=*/true);
  const c10::Device dev = device();
  const std::vector<ImageTargets> targets = slice_targets(batch, dev, dtype());
  SampleStreams streams(options_.sampling_streams, generator, image_keys(batch));

  TrainOutput out;
  {
    AutocastGuard autocast(options_.precision, dev.type());
    const std::optional<FeatureGraphs::Outputs> graphed = graphed_features(batch);
    const std::vector<at::Tensor> feats = graphed ? graphed->features : features(batch);
    RPNOutput proposals = rpn->forward(feats, batch.image_sizes, /*training=*/true, nullptr, nullptr,
                                       graphed ? &graphed->head : nullptr);
    // Both heads label their candidates before either draws, so that the counts the draws need
    // come to the host in one read. The RPN still draws first: the streams give the same samples.
    // The RPN's labels and losses are profiled as its stage, as when forward() computed them.
    const RPNLabels anchor_labels = [&] {
      RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
      return rpn->label(feats, targets);
    }();
    const RoICandidates candidates = roi_heads->label(proposals.proposals, targets);
    std::vector<at::Tensor> counts;
    {
      RECORD_FUNCTION("mrcnn::roi_sampling", std::vector<c10::IValue>());
      counts = ops::BalancedPositiveNegativeSampler::read_counts({&anchor_labels.draw, &candidates.draw});
    }
    {
      RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
      auto [objectness, box_reg] =
          rpn->losses(feats, anchor_labels, counts[0], targets, streams, &proposals.num_sampled);
      out.losses["loss_objectness"] = objectness;
      out.losses["loss_rpn_box_reg"] = box_reg;
    }
    RoIHeadsTrainOutput heads = roi_heads->forward_train(feats, candidates, counts[1], targets, streams);
    out.losses.merge(heads.losses);
    out.counts["rpn_sampled"] = proposals.num_sampled;
    out.counts["roi_sampled"] = heads.num_sampled;
    out.counts["roi_positive"] = heads.num_positive;
  }
  return out;
}

std::vector<Detections> MaskRCNNImpl::inference(const Batch& batch) {
  check_batch(batch, options_.num_classes, /*need_targets=*/false);
  c10::NoGradGuard no_grad;
  const c10::Device dev = device();
  std::vector<RawDetections> raw;
  {
    AutocastGuard autocast(options_.precision, dev.type());
    const std::vector<at::Tensor> feats = features(batch);
    RPNOutput proposals = rpn->forward(feats, batch.image_sizes, /*training=*/false);
    raw = roi_heads->inference(feats, proposals.proposals, batch.image_sizes);
  }

  RECORD_FUNCTION("mrcnn::postprocess", std::vector<c10::IValue>());
  const at::Tensor sizes = batch.image_sizes.cpu();
  const at::Tensor originals =
      batch.original_sizes.defined() ? batch.original_sizes.cpu() : sizes;
  std::vector<Detections> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const int64_t h = sizes[i][0].item<int64_t>(), w = sizes[i][1].item<int64_t>();
    const int64_t oh = originals[i][0].item<int64_t>(), ow = originals[i][1].item<int64_t>();
    // Ratios in float32, as torchvision's resize_boxes computes them.
    const float rh = static_cast<float>(oh) / static_cast<float>(h);
    const float rw = static_cast<float>(ow) / static_cast<float>(w);
    const at::Tensor scale = ops::copy_to_device_async(
        at::tensor({rw, rh, rw, rh}, at::TensorOptions().dtype(at::kFloat)).to(raw[i].boxes.scalar_type()), dev);
    const at::Tensor boxes = raw[i].boxes * scale;
    Detections& d = out[i];
    d.masks = ops::paste_masks_in_image_binary(raw[i].mask_probs, boxes, oh, ow, /*padding=*/1,
                                               options_.mask_head.mask_threshold);
    d.boxes = boxes.to(at::kFloat);
    d.scores = raw[i].scores.to(at::kFloat);
    d.labels = raw[i].labels;
    if (!batch.image_ids.empty()) d.image_id = batch.image_ids[i];
  }
  return out;
}

}  // namespace mrcnn::model
