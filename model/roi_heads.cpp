#include "model/roi_heads.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <stdexcept>

#include "model/ops/box/box_coder.h"
#include "model/ops/box/boxes.h"
#include "model/ops/host_copy.h"
#include "model/ops/mask_targets.h"
#include "model/ops/box/matcher.h"
#include "model/ops/multilevel_roi_align.h"
#include "model/ops/nms.h"
#include "model/ops/box/sampler.h"
#include "model/precision.h"

namespace mrcnn::model {
namespace {

// P2..P5: powers of two the multi-level RoIAlign reads its level range from.
constexpr double kPooledScales[] = {0.25, 0.125, 0.0625, 0.03125};

// [K, 4] boxes of image `index` as [K, 5] RoIs.
at::Tensor as_rois(const at::Tensor& boxes, int64_t index) {
  return at::cat({at::full({boxes.size(0), 1}, static_cast<double>(index), boxes.options()), boxes},
                 1);
}

// A zero that depends on every output, so that every parameter of the branch gets a (zero)
// gradient when a batch has nothing to learn from.
at::Tensor zero_loss(std::initializer_list<at::Tensor> outputs) {
  at::Tensor z;
  for (const at::Tensor& o : outputs) {
    const at::Tensor t = full_precision(o.sum()) * 0.0;
    z = z.defined() ? z + t : t;
  }
  return z;
}

}  // namespace

RoIHeadsImpl::RoIHeadsImpl(const ModelOptions& options)
    : num_classes_(options.num_classes),
      box_options_(options.box_head),
      mask_options_(options.mask_head) {
  const int64_t c = options.fpn.out_channels;
  const int64_t r = options.box_head.pooler_resolution;
  box_head = register_module("box_head",
                             BoxHead(c * r * r, options.box_head.representation_size));
  box_predictor = register_module(
      "box_predictor", BoxPredictor(options.box_head.representation_size, options.num_classes));
  mask_head = register_module("mask_head", MaskHead(c, options.mask_head.conv_channels,
                                                    options.mask_head.num_convs));
  mask_predictor = register_module(
      "mask_predictor", MaskPredictor(options.mask_head.conv_channels, options.num_classes));
}

void RoIHeadsImpl::init_weights(at::Generator gen) {
  box_head->init_weights(gen);
  box_predictor->init_weights(gen);
  mask_head->init_weights(gen);
  mask_predictor->init_weights(gen);
}

at::Tensor RoIHeadsImpl::pool(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                              int64_t resolution, int64_t sampling_ratio, bool aligned) const {
  const std::vector<at::Tensor> levels(features.begin(), features.begin() + 4);
  // RoIs stay in full precision: under autocast the op pools in float32 whatever the features.
  return ops::multilevel_roi_align(levels, rois.to(full_precision_type(levels[0])), resolution,
                                   sampling_ratio, aligned, kPooledScales);
}

at::Tensor RoIHeadsImpl::mask_logits(const std::vector<at::Tensor>& features,
                                     const at::Tensor& rois, const at::Tensor& labels) {
  RECORD_FUNCTION("mrcnn::roi_mask", std::vector<c10::IValue>());
  // MaskHeadOptions::roi_bucket: rows repeated up to a multiple of the bucket, their logits dropped.
  const int64_t n = rois.size(0);
  const int64_t bucket = mask_options_.roi_bucket;
  const int64_t padded = bucket > 1 && n > 0 ? (n + bucket - 1) / bucket * bucket : n;
  at::Tensor head_rois = rois;
  at::Tensor head_labels = labels;
  if (padded != n) {
    const at::Tensor rows = at::arange(padded, rois.options().dtype(at::kLong)).remainder(n);
    head_rois = rois.index_select(0, rows);
    head_labels = labels.index_select(0, rows.to(labels.device()));
  }
  const at::Tensor pooled = pool(features, head_rois, mask_options_.pooler_resolution,
                                 mask_options_.sampling_ratio, mask_options_.aligned);
  const at::Tensor logits = mask_predictor->forward(mask_head->forward(pooled), head_labels);
  return padded == n ? logits : logits.slice(0, 0, n);
}

StageLosses RoIHeadsImpl::forward_train(const std::vector<at::Tensor>& features,
                                        const ops::Proposals& proposals,
                                        const std::vector<ImageTargets>& targets,
                                        SampleStreams& streams) {
  const RoICandidates candidates = label(proposals, targets);
  const at::Tensor host_counts =
      ops::BalancedPositiveNegativeSampler::read_counts({&candidates.draw}).front();
  HeadStreams one_stream;
  return forward_train(features, candidates, host_counts, targets, streams, one_stream);
}

StageLosses RoIHeadsImpl::forward_train(const std::vector<at::Tensor>& features,
                                        const RoICandidates& candidates,
                                        const at::Tensor& host_counts,
                                        const std::vector<ImageTargets>& targets,
                                        SampleStreams& streams, HeadStreams& heads) {
  const SampledRoIs sampled = sample(candidates, host_counts, targets, streams);
  StageLosses out;
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  out.counts = {.sampled = at::scalar_tensor(sampled.rois.size(0), i64),
                .positive = at::scalar_tensor(sampled.positives.size(0), i64)};
  // What each head reads of the step's tensors (only gathered when the heads have streams).
  const auto reads = [&](std::initializer_list<at::Tensor> sampled_parts) {
    std::vector<at::Tensor> v;
    if (!heads.on()) return v;
    v.insert(v.end(), features.begin(), features.end());
    v.insert(v.end(), sampled_parts);
    return v;
  };
  const SampledRoIs& s = sampled;
  heads.run(HeadStreams::Head::kBox, reads({s.rois, s.labels, s.positives, s.pos_labels, s.box_targets}),
            [&] { box_losses(features, sampled, out.losses); });
  heads.run(HeadStreams::Head::kMask, reads({s.rois, s.positives, s.pos_labels, s.mask_targets}),
            [&] { mask_loss(features, sampled, out.losses); });
  return out;
}

ops::BalancedPositiveNegativeSampler RoIHeadsImpl::sampler() const {
  return ops::BalancedPositiveNegativeSampler(box_options_.batch_size_per_image,
                                              box_options_.positive_fraction);
}

RoICandidates RoIHeadsImpl::label(const ops::Proposals& proposals,
                                  const std::vector<ImageTargets>& targets) const {
  RECORD_FUNCTION("mrcnn::roi_sampling", std::vector<c10::IValue>());
  const int64_t n = static_cast<int64_t>(targets.size());
  if (proposals.boxes.size(0) != n || n == 0)
    throw std::invalid_argument("RoIHeads: " + std::to_string(n) + " targets for proposals of " +
                                std::to_string(proposals.boxes.size(0)) + " images");
  const ops::Matcher matcher(box_options_.fg_iou_threshold, box_options_.bg_iou_threshold,
                             /*allow_low_quality_matches=*/false);
  // The proposals stay padded (rows past an image's count are zero boxes): the padding rows are
  // labelled -1, so the sampler never draws them, instead of being sliced off by counts read
  // from the device. A proposal's match depends on its own IoUs only (this matcher allows no
  // low-quality matches, which would compare columns), and the sampled rows keep their order
  // (proposals before ground truth), so the draw and the RoIs are those of the sliced candidates.
  // The ground truth is padded to the batch's most the same way, so the whole batch is labelled
  // in one pass: image by image, the labels are those of its own candidates.
  std::vector<at::Tensor> gt_boxes, gt_labels;
  std::vector<int64_t> gt_counts;
  for (const ImageTargets& t : targets) {
    gt_boxes.push_back(t.boxes);
    gt_labels.push_back(t.labels);
    gt_counts.push_back(t.boxes.size(0));
  }
  const int64_t slots = proposals.boxes.size(1);
  const auto long_opts = proposals.counts.options().dtype(at::kLong);
  const at::Tensor counts = ops::copy_to_device_async(
      at::tensor(c10::ArrayRef<int64_t>(gt_counts), at::TensorOptions().dtype(at::kLong)), proposals.boxes.device());
  RoICandidates out;
  // Ground-truth boxes join the proposals, so every object has positive RoIs.
  out.gt_boxes = at::pad_sequence(gt_boxes, /*batch_first=*/true).to(proposals.boxes.scalar_type());
  out.boxes = at::cat({proposals.boxes, out.gt_boxes}, 1);
  const at::Tensor matched = matcher.batched(ops::box_iou_batched(out.gt_boxes, out.boxes), counts);
  out.gt_index = matched.clamp_min(0);
  out.classes = out.gt_boxes.size(1) > 0
                    ? at::pad_sequence(gt_labels, /*batch_first=*/true).gather(1, out.gt_index)
                    : at::zeros_like(matched);
  at::Tensor& cls = out.classes;
  cls.masked_fill_(matched == ops::Matcher::kBelowLowThreshold, 0);
  cls.masked_fill_(matched == ops::Matcher::kBetweenThresholds, -1);
  cls.slice(1, 0, slots).masked_fill_(
      at::arange(slots, long_opts).unsqueeze(0) >= proposals.counts.unsqueeze(1), -1);
  cls.slice(1, slots).masked_fill_(
      at::arange(out.gt_boxes.size(1), long_opts).unsqueeze(0) >= counts.unsqueeze(1), -1);
  out.draw = sampler().prepare_batch(cls);
  return out;
}

RoIHeadsImpl::SampledRoIs RoIHeadsImpl::sample(const RoICandidates& c, const at::Tensor& host_counts,
                                               const std::vector<ImageTargets>& targets,
                                               SampleStreams& streams) const {
  RECORD_FUNCTION("mrcnn::roi_sampling", std::vector<c10::IValue>());
  const int64_t n = static_cast<int64_t>(targets.size());
  const int64_t width = c.classes.size(1);  // candidates per image
  const ops::BoxCoder coder(box_options_.box_coder_weights);
  std::vector<at::Generator*> generators;
  for (int64_t i = 0; i < n; ++i) generators.push_back(&streams.for_image(i));
  // Every image's draw as rows of the batch (image * width + candidate): the positives of every
  // image, then the negatives. Sorted, they are each image's sampled candidates in candidate
  // order, image after image; where the positives landed among them is what nonzero() of the
  // masks gives, without its read (increasing per image, since each image's positives are).
  const auto drawn = sampler().draw_batch(c.draw, host_counts, generators);
  const auto [keep, order] = at::cat({drawn.positive, drawn.negative}).sort();
  const at::Tensor position = at::empty_like(order).scatter_(0, order, at::arange(order.size(0), order.options()));
  SampledRoIs out;
  out.positives = position.slice(0, 0, drawn.positive.size(0));
  const at::Tensor boxes = c.boxes.reshape({-1, 4}).index_select(0, keep);
  const at::Tensor image = at::div(keep, width, "floor");
  out.rois = at::cat({image.to(boxes.scalar_type()).unsqueeze(1), boxes}, 1);
  out.labels = c.classes.reshape(-1).index_select(0, keep);
  out.pos_labels = out.labels.index_select(0, out.positives);
  const at::Tensor pos_boxes = boxes.index_select(0, out.positives);
  const at::Tensor pos_gt = c.gt_index.reshape(-1).index_select(0, keep).index_select(0, out.positives);
  const at::Tensor pos_gt_rows = image.index_select(0, out.positives) * c.gt_boxes.size(1) + pos_gt;
  out.box_targets = coder.encode(c.gt_boxes.reshape({-1, 4}).index_select(0, pos_gt_rows), pos_boxes);
  {
    RECORD_FUNCTION("mrcnn::mask_targets", std::vector<c10::IValue>());
    // The reference crops polygons with float32 boxes. The whole batch in one call: its images'
    // polygons as one list, each positive's instance offset by the instances of the images before
    // its own (one launch and one copy of the polygons, where a call per image made one each; every
    // RoI's target is computed alone, so the same bits).
    std::vector<const ops::PolygonList*> lists;
    for (int64_t i = 0; i < n; ++i) lists.push_back(targets[static_cast<size_t>(i)].polygons);
    const ops::ConcatenatedPolygons all = ops::concatenate(lists);
    const at::Tensor first_instance = ops::copy_to_device_async(
        at::tensor(all.first_instance, at::TensorOptions().dtype(at::kLong)), pos_gt.device());
    const at::Tensor instance = pos_gt + first_instance.index_select(0, image.index_select(0, out.positives));
    out.mask_targets = ops::mask_targets(all.polygons, instance, pos_boxes.to(at::kFloat),
                                         2 * mask_options_.pooler_resolution);
  }
  return out;
}

void RoIHeadsImpl::box_losses(const std::vector<at::Tensor>& features, const SampledRoIs& s,
                              std::map<std::string, at::Tensor>& losses) {
  RECORD_FUNCTION("mrcnn::roi_box", std::vector<c10::IValue>());
  const int64_t k = s.rois.size(0);
  const at::Tensor pooled = pool(features, s.rois, box_options_.pooler_resolution,
                                 box_options_.sampling_ratio, box_options_.aligned);
  auto [logits, deltas] = box_predictor->forward(box_head->forward(pooled));
  if (k == 0) {
    losses["loss_classifier"] = zero_loss({logits, deltas});
    losses["loss_box_reg"] = zero_loss({deltas});
    return;
  }
  losses["loss_classifier"] = at::cross_entropy_loss(full_precision(logits), s.labels);
  // The deltas of each positive's own class: row * C + label of the [K * C, 4] view.
  const at::Tensor picked =
      deltas.reshape({k * num_classes_, 4}).index_select(0, s.positives * num_classes_ + s.pos_labels);
  losses["loss_box_reg"] =
      at::smooth_l1_loss(full_precision(picked), s.box_targets.to(full_precision_type(picked)),
                         at::Reduction::Sum, box_options_.box_loss_beta) /
      static_cast<double>(k);
}

void RoIHeadsImpl::mask_loss(const std::vector<at::Tensor>& features, const SampledRoIs& s,
                             std::map<std::string, at::Tensor>& losses) {
  const at::Tensor logits = mask_logits(features, s.rois.index_select(0, s.positives), s.pos_labels);
  if (s.positives.size(0) == 0) {
    losses["loss_mask"] = zero_loss({logits});
    return;
  }
  const at::Tensor logits_fp = full_precision(logits);
  losses["loss_mask"] = at::binary_cross_entropy_with_logits(
      logits_fp, s.mask_targets.to(logits_fp.device(), logits_fp.scalar_type()));
}

std::vector<RawDetections> RoIHeadsImpl::inference(const std::vector<at::Tensor>& features,
                                                   const ops::Proposals& proposals,
                                                   const at::Tensor& image_sizes) {
  const int64_t n = proposals.boxes.size(0);
  const at::Tensor counts = proposals.counts.cpu();
  std::vector<at::Tensor> rois;
  std::vector<int64_t> per_image;
  for (int64_t i = 0; i < n; ++i) {
    per_image.push_back(counts[i].item<int64_t>());
    rois.push_back(as_rois(proposals.boxes[i].slice(0, 0, per_image.back()), i));
  }
  const auto [boxes, scores] = box_predictions(features, at::cat(rois));
  std::vector<RawDetections> out = select_detections(boxes, scores, per_image, image_sizes.cpu());
  predict_masks(features, out);
  return out;
}

std::pair<at::Tensor, at::Tensor> RoIHeadsImpl::box_predictions(const std::vector<at::Tensor>& features,
                                                                 const at::Tensor& rois) {
  RECORD_FUNCTION("mrcnn::roi_box", std::vector<c10::IValue>());
  const at::Tensor pooled = pool(features, rois, box_options_.pooler_resolution,
                                 box_options_.sampling_ratio, box_options_.aligned);
  auto [logits, deltas] = box_predictor->forward(box_head->forward(pooled));
  const ops::BoxCoder coder(box_options_.box_coder_weights);
  const at::Tensor d = full_precision(deltas);
  return {coder.decode(d, rois.slice(1, 1).to(d.scalar_type())).view({-1, num_classes_, 4}),
          at::softmax(full_precision(logits), -1)};
}

std::vector<RawDetections> RoIHeadsImpl::select_detections(const at::Tensor& boxes, const at::Tensor& scores,
                                                           const std::vector<int64_t>& per_image,
                                                           const at::Tensor& sizes) const {
  RECORD_FUNCTION("mrcnn::detections", std::vector<c10::IValue>());
  // Every (image, proposal, foreground class) candidate, image-major then proposal-major,
  // filtered and suppressed for the whole batch at once: one score filter, one size filter and
  // one class-wise NMS whose categories are (image, class) pairs, so that a GPU reads the
  // device a few times per batch instead of a few times per image. NMS never compares two
  // categories, and its order (decreasing score, ties by lower index) grouped stably by image
  // is each image's own order: the detections of image-by-image processing, bit for bit.
  const int64_t n = static_cast<int64_t>(per_image.size()), c = num_classes_;
  const auto i64 = at::TensorOptions().dtype(at::kLong).device(boxes.device());
  std::vector<at::Tensor> all_b, all_s, all_l, all_i;
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = per_image[i];
    all_b.push_back(ops::clip_boxes_to_image(boxes.slice(0, start, start + p), sizes[i][0].item<int64_t>(),
                                             sizes[i][1].item<int64_t>())
                        .slice(1, 1)
                        .reshape({-1, 4}));
    all_s.push_back(scores.slice(0, start, start + p).slice(1, 1).reshape({-1}));
    all_l.push_back(at::arange(1, c, i64).view({1, c - 1}).expand({p, c - 1}).reshape({-1}));
    all_i.push_back(at::full({p * (c - 1)}, i, i64));
    start += p;
  }
  at::Tensor b = at::cat(all_b), s = at::cat(all_s), l = at::cat(all_l), image = at::cat(all_i);
  auto select = [&](const at::Tensor& keep) {
    b = b.index_select(0, keep);
    s = s.index_select(0, keep);
    l = l.index_select(0, keep);
    image = image.index_select(0, keep);
  };
  select((s > box_options_.score_threshold).nonzero().squeeze(1));
  if (box_options_.min_size > 0) select(ops::remove_small_boxes(b, box_options_.min_size));
  const at::Tensor kept = ops::batched_nms(b, s, image * c + l, box_options_.nms_threshold);
  const at::Tensor kept_image = image.index_select(0, kept);
  select(kept.index_select(0, std::get<1>(kept_image.sort(/*stable=*/true, 0, /*descending=*/false))));
  // Detections per image (integer adds: exact in any order), in the one read of the split.
  const at::Tensor kept_per_image = at::zeros({n}, i64).index_add_(0, image, at::ones_like(image)).cpu();
  std::vector<RawDetections> out(static_cast<size_t>(n));
  int64_t first = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = kept_per_image[i].item<int64_t>();
    const int64_t take = std::min(k, box_options_.detections_per_image);
    out[i].boxes = b.slice(0, first, first + take);
    out[i].scores = s.slice(0, first, first + take);
    out[i].labels = l.slice(0, first, first + take);
    first += k;
  }
  return out;
}

void RoIHeadsImpl::predict_masks(const std::vector<at::Tensor>& features, std::vector<RawDetections>& detections) {
  std::vector<at::Tensor> rois, labels;
  for (size_t i = 0; i < detections.size(); ++i) {
    rois.push_back(as_rois(detections[i].boxes, static_cast<int64_t>(i)));
    labels.push_back(detections[i].labels);
  }
  const at::Tensor all_rois = at::cat(rois);
  const int64_t m = 2 * mask_options_.pooler_resolution;
  const at::Tensor probs = all_rois.size(0) > 0
                               ? full_precision(mask_logits(features, all_rois, at::cat(labels))).sigmoid()
                               : at::empty({0, m, m}, all_rois.options());
  int64_t start = 0;
  for (RawDetections& r : detections) {
    r.mask_probs = probs.slice(0, start, start + r.boxes.size(0));
    start += r.boxes.size(0);
  }
}

}  // namespace mrcnn::model
