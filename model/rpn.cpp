#include "model/rpn.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <limits>
#include <stdexcept>

#include "model/init.h"
#include "model/ops/anchor_generator.h"
#include "model/ops/box_coder.h"
#include "model/ops/boxes.h"
#include "model/ops/matcher.h"
#include "model/ops/sampler.h"
#include "model/precision.h"

namespace mrcnn::model {

RPNHeadImpl::RPNHeadImpl(int64_t channels, int64_t num_anchors) {
  using torch::nn::Conv2d;
  using torch::nn::Conv2dOptions;
  conv = register_module("conv", Conv2d(Conv2dOptions(channels, channels, 3).padding(1)));
  cls_logits = register_module("cls_logits", Conv2d(Conv2dOptions(channels, num_anchors, 1)));
  bbox_pred = register_module("bbox_pred", Conv2d(Conv2dOptions(channels, 4 * num_anchors, 1)));
}

std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> RPNHeadImpl::forward(
    const std::vector<at::Tensor>& features) {
  std::vector<at::Tensor> logits, deltas;
  logits.reserve(features.size());
  deltas.reserve(features.size());
  for (const at::Tensor& f : features) {
    const at::Tensor t = conv->forward(f).relu_();
    logits.push_back(cls_logits->forward(t));
    deltas.push_back(bbox_pred->forward(t));
  }
  return {logits, deltas};
}

void RPNHeadImpl::init_weights(at::Generator gen) {
  for (auto* c : {&conv, &cls_logits, &bbox_pred}) {
    init::normal((*c)->weight, 0.01, gen);
    init::zeros((*c)->bias);
  }
}

RPNImpl::RPNImpl(const RPNOptions& options, int64_t channels)
    : options_(options), num_anchors_(static_cast<int64_t>(options.aspect_ratios.size())) {
  head = register_module("head", RPNHead(channels, num_anchors_));
}

std::vector<std::array<int64_t, 2>> RPNImpl::anchor_strides(
    const std::vector<at::Tensor>& features) const {
  std::vector<std::array<int64_t, 2>> out;
  for (size_t l = 0; l < features.size(); ++l) {
    if (options_.anchor_strides.empty()) {
      // torchvision: padded size / grid size in integer division; P2 is a quarter of the
      // padded size.
      out.push_back({features[0].size(2) * 4 / features[l].size(2),
                     features[0].size(3) * 4 / features[l].size(3)});
    } else {
      out.push_back({options_.anchor_strides[l], options_.anchor_strides[l]});
    }
  }
  return out;
}

std::vector<at::Tensor> RPNImpl::anchors(const std::vector<at::Tensor>& features) const {
  const auto options =
      at::TensorOptions().dtype(full_precision_type(features[0])).device(features[0].device());
  const std::vector<std::array<int64_t, 2>> strides = anchor_strides(features);
  std::vector<at::Tensor> out;
  for (size_t l = 0; l < features.size(); ++l) {
    // One level at a time, with the image size that gives exactly this level's stride.
    const ops::AnchorGenerator generator({{options_.anchor_sizes[l]}}, options_.aspect_ratios);
    const int64_t h = features[l].size(2), w = features[l].size(3);
    // The generator makes float32 anchors (integral values: exact in any floating dtype).
    out.push_back(generator({{h, w}}, {h * strides[l][0], w * strides[l][1]}, options)[0].to(
        options.dtype()));
  }
  return out;
}

RPNOutput RPNImpl::forward(const std::vector<at::Tensor>& features, const at::Tensor& image_sizes,
                           bool training, const std::vector<ImageTargets>* targets,
                           SampleStreams* streams) {
  if (features.size() != options_.anchor_sizes.size())
    throw std::invalid_argument("RPN: expected " + std::to_string(options_.anchor_sizes.size()) +
                                " feature levels, got " + std::to_string(features.size()));
  RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
  auto [objectness, deltas] = head->forward(features);
  const std::vector<at::Tensor> level_anchors = anchors(features);
  const std::vector<std::array<int64_t, 2>> strides = anchor_strides(features);

  // Proposals are constants for the rest of the network: no gradient flows through them.
  std::vector<at::Tensor> obj_in, deltas_in;
  const at::Tensor sizes_cpu = image_sizes.cpu();
  for (size_t l = 0; l < features.size(); ++l) {
    at::Tensor o = full_precision(objectness[l].detach());
    if (options_.proposals_inside_image) {
      // Only cells whose anchor centre (x * stride, y * stride) lies inside the true image
      // propose; the others get -inf logits, rank last and fall under the score threshold below.
      const int64_t h = o.size(2), w = o.size(3);
      const auto [stride_h, stride_w] = strides[l];
      const auto dev = at::TensorOptions().dtype(at::kDouble).device(o.device());
      const at::Tensor sz = sizes_cpu.to(o.device(), at::kDouble);
      const at::Tensor rows = at::arange(h, dev).mul_(static_cast<double>(stride_h)).view({1, h, 1}) <
                              sz.select(1, 0).view({-1, 1, 1});
      const at::Tensor cols = at::arange(w, dev).mul_(static_cast<double>(stride_w)).view({1, 1, w}) <
                              sz.select(1, 1).view({-1, 1, 1});
      o = o.masked_fill(at::logical_not(rows.logical_and(cols)).unsqueeze(1),
                        -std::numeric_limits<float>::infinity());
    }
    obj_in.push_back(o);
    deltas_in.push_back(full_precision(deltas[l].detach()));
  }
  ops::ProposalOptions po;
  po.pre_nms_top_n = training ? options_.pre_nms_top_n_train : options_.pre_nms_top_n_test;
  po.post_nms_top_n = training ? options_.post_nms_top_n_train : options_.post_nms_top_n_test;
  po.per_batch_post_nms = training && options_.post_nms_per_batch_train;
  po.nms_threshold = options_.nms_threshold;
  po.min_size = options_.min_size;
  // sigmoid(-inf) = 0 < FLT_MIN; every real logit above -87 passes.
  po.score_threshold =
      options_.proposals_inside_image ? static_cast<double>(std::numeric_limits<float>::min()) : 0.0;

  RPNOutput out;
  {
    RECORD_FUNCTION("mrcnn::rpn_proposals", std::vector<c10::IValue>());
    out.proposals = ops::generate_proposals(obj_in, deltas_in, level_anchors, sizes_cpu, po);
  }
  if (training && targets != nullptr) {
    if (streams == nullptr) throw std::invalid_argument("RPN: training losses need sample streams");
    RECORD_FUNCTION("mrcnn::rpn_loss", std::vector<c10::IValue>());
    auto [obj_loss, box_loss] =
        losses(objectness, deltas, level_anchors, *targets, *streams, &out.num_sampled);
    out.losses["loss_objectness"] = obj_loss;
    out.losses["loss_rpn_box_reg"] = box_loss;
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> RPNImpl::losses(const std::vector<at::Tensor>& objectness,
                                                  const std::vector<at::Tensor>& deltas,
                                                  const std::vector<at::Tensor>& anchors,
                                                  const std::vector<ImageTargets>& targets,
                                                  SampleStreams& streams,
                                                  at::Tensor* num_sampled) const {
  const int64_t n = objectness[0].size(0);
  // Flatten every level in the anchors' order: location (y, x), then anchor. With channels-last
  // outputs these permutes are free views.
  std::vector<at::Tensor> obj_levels, delta_levels;
  for (size_t l = 0; l < objectness.size(); ++l) {
    const at::Tensor& o = objectness[l];
    const at::Tensor& d = deltas[l];
    const int64_t a = o.size(1), h = o.size(2), w = o.size(3);
    obj_levels.push_back(o.permute({0, 2, 3, 1}).reshape({n, -1}));
    delta_levels.push_back(
        d.view({n, a, 4, h, w}).permute({0, 3, 4, 1, 2}).reshape({n, -1, 4}));
  }
  const at::Tensor obj_flat = at::cat(obj_levels, 1).reshape({-1});
  const at::Tensor delta_flat = at::cat(delta_levels, 1).reshape({-1, 4});
  const at::Tensor all_anchors = at::cat(anchors, 0);
  const int64_t total = all_anchors.size(0);

  const ops::Matcher matcher(options_.fg_iou_threshold, options_.bg_iou_threshold,
                             /*allow_low_quality_matches=*/true);
  const ops::BalancedPositiveNegativeSampler sampler(options_.batch_size_per_image,
                                                     options_.positive_fraction);
  const ops::BoxCoder coder({1.0, 1.0, 1.0, 1.0});

  std::vector<at::Tensor> pos_index, neg_index, box_targets;
  for (int64_t i = 0; i < n; ++i) {
    const ImageTargets& t = targets[static_cast<size_t>(i)];
    const at::Tensor matched = matcher(ops::box_iou(t.boxes, all_anchors));
    at::Tensor labels = (matched >= 0).to(at::kLong);
    labels.masked_fill_(matched == ops::Matcher::kBetweenThresholds, -1);
    if (options_.straddle_threshold >= 0) {
      const double s = options_.straddle_threshold;
      const at::Tensor visible = (all_anchors.select(1, 0) >= -s)
                                     .logical_and_(all_anchors.select(1, 1) >= -s)
                                     .logical_and_(all_anchors.select(1, 2) < t.width + s)
                                     .logical_and_(all_anchors.select(1, 3) < t.height + s);
      labels.masked_fill_(visible.logical_not(), -1);
    }
    auto [pos, neg] = sampler(labels, streams.for_image(i));
    const at::Tensor pos_i = pos.nonzero().squeeze(1);
    const at::Tensor neg_i = neg.nonzero().squeeze(1);
    if (pos_i.numel() > 0)
      box_targets.push_back(coder.encode(t.boxes.index_select(0, matched.index_select(0, pos_i)),
                                         all_anchors.index_select(0, pos_i)));
    pos_index.push_back(pos_i + i * total);
    neg_index.push_back(neg_i + i * total);
  }
  const at::Tensor pos_all = at::cat(pos_index);
  const at::Tensor sampled = at::cat({pos_all, at::cat(neg_index)});
  *num_sampled = at::scalar_tensor(sampled.numel(), at::TensorOptions().dtype(at::kLong));
  if (sampled.numel() == 0) {
    const at::Tensor zero = full_precision(obj_flat.sum()) * 0 + full_precision(delta_flat.sum()) * 0;
    return {zero, zero};
  }
  const at::Tensor logits = full_precision(obj_flat.index_select(0, sampled));
  at::Tensor labels = at::zeros({sampled.numel()}, logits.options());
  labels.slice(0, 0, pos_all.numel()).fill_(1.0);
  const at::Tensor obj_loss = at::binary_cross_entropy_with_logits(logits, labels);
  at::Tensor box_loss;
  if (pos_all.numel() > 0) {
    const at::Tensor pred = full_precision(delta_flat.index_select(0, pos_all));
    box_loss = at::smooth_l1_loss(pred, at::cat(box_targets).to(pred.scalar_type()),
                                  at::Reduction::Sum,
                                  options_.box_loss_beta) /
               static_cast<double>(sampled.numel());
  } else {
    box_loss = full_precision(delta_flat.sum()) * 0;
  }
  return {obj_loss, box_loss};
}

}  // namespace mrcnn::model
