#include "model/rpn.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/autograd.h>

#include <algorithm>
#include <limits>
#include <list>
#include <mutex>
#include <tuple>
#include <stdexcept>

#include "model/init.h"
#include "model/ops/box/anchor_generator.h"
#include "model/ops/box/box_coder.h"
#include "model/ops/box/boxes.h"
#include "model/ops/host_copy.h"
#include "model/ops/box/matcher.h"
#include "model/ops/box/sampler.h"
#include "model/precision.h"

namespace mrcnn::model {
namespace {

// patches[s] = map[image[s], :, y[s]-1 .. y[s]+1, x[s]-1 .. x[s]+1] with zeros beyond the map:
// [S, C, 3, 3], the input of a padded 3x3 convolution at S cells. Its backward scatters into a zero
// map of the input's memory format and keeps only the indices (not the map).
struct GatherPatches : public torch::autograd::Function<GatherPatches> {
  // For each of the 9 taps: clamped coordinates and whether the tap is inside the map.
  static std::tuple<at::Tensor, at::Tensor, at::Tensor> taps(const at::Tensor& y,
                                                             const at::Tensor& x, int64_t h,
                                                             int64_t w) {
    const auto opts = y.options();
    const at::Tensor dy = at::arange(-1, 2, opts).repeat_interleave(3);  // ky-major, as weights
    const at::Tensor dx = at::arange(-1, 2, opts).repeat({3});
    const at::Tensor yy = y.unsqueeze(1) + dy, xx = x.unsqueeze(1) + dx;  // [S, 9]
    const at::Tensor inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w);
    return {yy.clamp(0, h - 1), xx.clamp(0, w - 1), inside};
  }

  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& map,
                            const at::Tensor& image, const at::Tensor& y, const at::Tensor& x) {
    const int64_t h = map.size(2), w = map.size(3);
    ctx->save_for_backward({image, y, x});
    ctx->saved_data["sizes"] = map.sizes();
    ctx->saved_data["channels_last"] = map.is_contiguous(at::MemoryFormat::ChannelsLast);
    auto [yy, xx, inside] = taps(y, x, h, w);
    const at::Tensor n = image.unsqueeze(1).expand_as(yy);
    // [S, 9, C] -> [S, C, 9], zero where a tap falls outside.
    const at::Tensor v = map.index({n, at::indexing::Slice(), yy, xx});
    return (v * inside.unsqueeze(2).to(v.scalar_type())).permute({0, 2, 1}).reshape(
        {y.size(0), map.size(1), 3, 3});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const bool channels_last = ctx->saved_data["channels_last"].toBool();
    auto [yy, xx, inside] = taps(saved[1], saved[2], sizes[2], sizes[3]);
    const at::Tensor n = saved[0].unsqueeze(1).expand_as(yy);
    const int64_t s = yy.size(0), c = sizes[1];
    const at::Tensor g = grads[0].reshape({s, c, 9}).permute({0, 2, 1}) *
                         inside.unsqueeze(2).to(grads[0].scalar_type());  // [S, 9, C]
    // Scatter-add into an NHWC buffer viewed as [N*H*W, C] with index_add_, which sums the
    // contributions to one cell in index order whatever the thread count (index_put_ with
    // accumulate adds them concurrently on the CPU, in an order that varies from run to run).
    const at::Tensor cell = ((n * sizes[2] + yy) * sizes[3] + xx).reshape({-1});  // [S*9]
    at::Tensor nhwc = at::zeros({sizes[0] * sizes[2] * sizes[3], c}, grads[0].options());
    nhwc.index_add_(0, cell, g.reshape({s * 9, c}));
    at::Tensor grad = nhwc.view({sizes[0], sizes[2], sizes[3], c}).permute({0, 3, 1, 2});  // channels-last
    if (!channels_last) grad = grad.contiguous();
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

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

// The anchors of the most recently used batch shapes, most recent first. COCO batches come in a
// few dozen padded shapes; 16 entries of about 4 MB (800x1344) bound the memory.
struct RPNImpl::AnchorCache {
  static constexpr size_t kCapacity = 16;
  std::mutex mutex;
  std::list<std::pair<std::vector<int64_t>, std::vector<at::Tensor>>> entries;
};

RPNImpl::RPNImpl(const RPNOptions& options, int64_t channels)
    : options_(options),
      num_anchors_(static_cast<int64_t>(options.aspect_ratios.size())),
      anchor_cache_(std::make_shared<AnchorCache>()) {
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
  std::vector<int64_t> key = {static_cast<int64_t>(options.device().type()), options.device().index(),
                              static_cast<int64_t>(options.dtype().toScalarType())};
  for (size_t l = 0; l < features.size(); ++l)
    key.insert(key.end(), {features[l].size(2), features[l].size(3), strides[l][0], strides[l][1]});
  // On a GPU the anchors are built without blocking, on the current stream: an entry is ready for
  // that stream's later work only, so the stream is part of the key (a clone of the module working
  // on another stream builds its own).
  if (!options.device().is_cpu())
    key.push_back(c10::impl::VirtualGuardImpl(options.device().type()).getStream(options.device()).id());
  std::lock_guard lock(anchor_cache_->mutex);
  auto& entries = anchor_cache_->entries;
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first != key) continue;
    entries.splice(entries.begin(), entries, it);
    return it->second;
  }
  std::vector<at::Tensor> out;
  for (size_t l = 0; l < features.size(); ++l) {
    // One level at a time, with the image size that gives exactly this level's stride.
    const ops::AnchorGenerator generator({{options_.anchor_sizes[l]}}, options_.aspect_ratios);
    const int64_t h = features[l].size(2), w = features[l].size(3);
    // The generator makes float32 anchors (integral values: exact in any floating dtype).
    out.push_back(generator({{h, w}}, {h * strides[l][0], w * strides[l][1]}, options)[0].to(
        options.dtype()));
  }
  entries.emplace_front(std::move(key), out);
  if (entries.size() > AnchorCache::kCapacity) entries.pop_back();
  return out;
}

void RPNImpl::check_levels(const std::vector<at::Tensor>& features) const {
  if (features.size() != options_.anchor_sizes.size())
    throw std::invalid_argument("RPN: expected " + std::to_string(options_.anchor_sizes.size()) +
                                " feature levels, got " + std::to_string(features.size()));
}

RPNHeadMaps RPNImpl::head_maps(const std::vector<at::Tensor>& features) {
  check_levels(features);
  RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
  c10::NoGradGuard no_grad;
  return head->forward(features);
}

ops::Proposals RPNImpl::propose(const std::vector<at::Tensor>& features, const at::Tensor& image_sizes,
                                const RPNHeadMaps& maps, ProposalCounts counts) const {
  check_levels(features);
  RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
  const auto& [objectness, deltas] = maps;
  const std::vector<at::Tensor> level_anchors = anchors(features);
  const std::vector<std::array<int64_t, 2>> strides = anchor_strides(features);

  // Proposals are constants for the rest of the network: no gradient flows through them.
  std::vector<at::Tensor> obj_in, deltas_in;
  const at::Tensor sizes_cpu = image_sizes.cpu();
  at::Tensor sizes_dev;  // int64 [N, 2] on the features' device, copied once, without blocking
  if (options_.proposals_inside_image && !features.empty())
    sizes_dev = ops::copy_to_device_async(sizes_cpu.to(at::kLong), features.front().device());
  for (size_t l = 0; l < features.size(); ++l) {
    at::Tensor o = full_precision(objectness[l].detach());
    if (options_.proposals_inside_image) {
      // Only cells whose anchor centre (x * stride, y * stride) lies inside the true image
      // propose; the others get -inf logits, rank last and fall under the score threshold below.
      const int64_t h = o.size(2), w = o.size(3);
      const auto [stride_h, stride_w] = strides[l];
      // Integer arithmetic: exact, and on every device (MPS and HPU have no float64).
      const auto dev = at::TensorOptions().dtype(at::kLong).device(o.device());
      const at::Tensor& sz = sizes_dev;
      const at::Tensor rows = at::arange(h, dev).mul_(stride_h).view({1, h, 1}) < sz.select(1, 0).view({-1, 1, 1});
      const at::Tensor cols = at::arange(w, dev).mul_(stride_w).view({1, 1, w}) < sz.select(1, 1).view({-1, 1, 1});
      o = o.masked_fill(at::logical_not(rows.logical_and(cols)).unsqueeze(1),
                        -std::numeric_limits<float>::infinity());
    }
    obj_in.push_back(o);
    deltas_in.push_back(full_precision(deltas[l].detach()));
  }
  const bool training = counts == ProposalCounts::kTraining;
  ops::ProposalOptions po;
  po.pre_nms_top_n = training ? options_.pre_nms_top_n_train : options_.pre_nms_top_n_test;
  po.post_nms_top_n = training ? options_.post_nms_top_n_train : options_.post_nms_top_n_test;
  po.per_batch_post_nms = training && options_.post_nms_per_batch_train;
  po.nms_threshold = options_.nms_threshold;
  po.min_size = options_.min_size;
  // sigmoid(-inf) = 0 < FLT_MIN; every real logit above -87 passes.
  po.score_threshold =
      options_.proposals_inside_image ? static_cast<double>(std::numeric_limits<float>::min()) : 0.0;
  return [&] {
    RECORD_FUNCTION("mrcnn::rpn_proposals", std::vector<c10::IValue>());
    return ops::generate_proposals(obj_in, deltas_in, level_anchors, sizes_cpu, po);
  }();
}

StageLosses RPNImpl::forward_train(const std::vector<at::Tensor>& features,
                                   const std::vector<ImageTargets>& targets, SampleStreams& streams) const {
  const RPNLabels labels = label(features, targets);
  const at::Tensor host_counts = ops::BalancedPositiveNegativeSampler::read_counts({&labels.draw}).front();
  return losses(features, labels, host_counts, targets, streams);
}

RPNLabels RPNImpl::label(const std::vector<at::Tensor>& features,
                         const std::vector<ImageTargets>& targets) const {
  RECORD_FUNCTION("mrcnn::rpn_loss", std::vector<c10::IValue>());  // labelling is part of the loss
  check_levels(features);
  if (features.empty() || static_cast<int64_t>(targets.size()) != features[0].size(0))
    throw std::invalid_argument("RPN: " + std::to_string(targets.size()) + " targets for a batch of " +
                                std::to_string(features.empty() ? 0 : features[0].size(0)) + " images");
  RPNLabels out;
  out.anchors = at::cat(anchors(features), 0);
  const at::Tensor& all_anchors = out.anchors;
  const ops::Matcher matcher(options_.fg_iou_threshold, options_.bg_iou_threshold,
                             /*allow_low_quality_matches=*/true);
  // The IoUs of as many images at once as iou_batch_elements_ allows: a whole batch's
  // [N, G, anchors] (and box_iou's temporaries, twice that) would take gigabytes at 800x1344 with
  // COCO's crowded images. An image alone is matched as an image. The rest in one pass.
  const int64_t num_anchors = all_anchors.size(0);
  const auto elements = [&](size_t images, int64_t most) {
    return static_cast<int64_t>(images) * std::max<int64_t>(most, 1) * num_anchors;
  };
  std::vector<at::Tensor> matches;
  for (size_t first = 0; first < targets.size();) {
    size_t end = first + 1;
    int64_t most = targets[first].boxes.size(0);
    for (; end < targets.size(); ++end) {
      const int64_t with = std::max(most, targets[end].boxes.size(0));
      if (elements(end + 1 - first, with) > iou_batch_elements_) break;
      most = with;
    }
    if (end == first + 1) {
      matches.push_back(matcher(ops::box_iou(targets[first].boxes, all_anchors)).unsqueeze(0));
    } else {
      std::vector<at::Tensor> boxes;
      std::vector<int64_t> counts;
      for (size_t i = first; i < end; ++i) {
        boxes.push_back(targets[i].boxes);
        counts.push_back(targets[i].boxes.size(0));
      }
      const int64_t n = static_cast<int64_t>(end - first);
      const at::Tensor gt_counts =
          ops::copy_to_device_async(at::tensor(counts, at::TensorOptions().dtype(at::kLong)), all_anchors.device());
      matches.push_back(matcher.batched(
          ops::box_iou_batched(at::pad_sequence(boxes, /*batch_first=*/true), all_anchors.expand({n, num_anchors, 4})),
          gt_counts));
    }
    first = end;
  }
  out.matches = matches.size() == 1 ? matches.front() : at::cat(matches);
  const at::Tensor& matched = out.matches;
  at::Tensor labels = (matched >= 0).to(at::kLong);
  labels.masked_fill_(matched == ops::Matcher::kBetweenThresholds, -1);
  if (options_.straddle_threshold >= 0) {
    const double s = options_.straddle_threshold;
    // Each image's far edges, as the comparison with a scalar rounds them: to the anchors' dtype.
    std::vector<double> limits;
    for (const ImageTargets& t : targets) limits.push_back(static_cast<double>(t.width) + s);
    for (const ImageTargets& t : targets) limits.push_back(static_cast<double>(t.height) + s);
    const at::Tensor far = ops::copy_to_device_async(
        at::tensor(c10::ArrayRef<double>(limits), at::TensorOptions().dtype(at::kDouble)).to(all_anchors.scalar_type()),
        all_anchors.device()).view({2, -1, 1});  // [2, N, 1]: x limits, y limits
    const at::Tensor visible = (all_anchors.select(1, 0) >= -s)
                                   .logical_and_(all_anchors.select(1, 1) >= -s)
                                   .unsqueeze(0)
                                   .logical_and(all_anchors.select(1, 2).unsqueeze(0) < far[0])
                                   .logical_and_(all_anchors.select(1, 3).unsqueeze(0) < far[1]);  // [N, A]
    labels.masked_fill_(visible.logical_not(), -1);
  }
  out.draw = sampler().prepare_batch(labels);
  return out;
}

ops::BalancedPositiveNegativeSampler RPNImpl::sampler() const {
  return ops::BalancedPositiveNegativeSampler(options_.batch_size_per_image, options_.positive_fraction);
}

namespace {

// The head's three layers as matrix products at sampled cells. At a cell (n, y, x):
// t = relu(W_conv . patch3x3(level, n, y, x) + b_conv), then the objectness of anchor a is
// W_cls[a] . t + b_cls[a] and its deltas W_bbox[4a..4a+3] . t + b_bbox[4a..4a+3]: the head's
// convolutions evaluated where the loss looks. Gradients reach the weights and the pyramid levels
// exactly as through the full maps.
struct HeadAtCells {
  HeadAtCells(const RPNHeadImpl& head, int64_t channels, int64_t a)
      : w_conv(head.conv->weight.reshape({channels, -1})),  // [C, C * 9]
        b_conv(head.conv->bias),
        w_cls(head.cls_logits->weight.reshape({a, channels})),
        b_cls(head.cls_logits->bias),
        w_box(head.bbox_pred->weight.reshape({a, 4, channels})),
        b_box(head.bbox_pred->bias.view({a, 4})) {}

  // One row of t per patch [S, C, 3, 3].
  at::Tensor rows(const at::Tensor& patches) const {
    return at::addmm(b_conv.to(patches.scalar_type()), patches.reshape({patches.size(0), -1}),
                     w_conv.to(patches.scalar_type()).t())
        .relu();
  }
  // The objectness of anchor `which` of each row.
  at::Tensor logits(const at::Tensor& rows, const at::Tensor& which) const {
    return (rows * w_cls.index_select(0, which).to(rows.scalar_type())).sum(1) +
           b_cls.index_select(0, which).to(rows.scalar_type());
  }
  // The deltas of anchor `which` of each row.
  at::Tensor deltas(const at::Tensor& rows, const at::Tensor& which) const {
    return at::bmm(w_box.index_select(0, which).to(rows.scalar_type()), rows.unsqueeze(2)).squeeze(2) +
           b_box.index_select(0, which).to(rows.scalar_type());
  }

  at::Tensor w_conv, b_conv, w_cls, b_cls, w_box, b_box;
};

}  // namespace

// The sampled anchors of a batch, as (image * total + anchor) with the num_pos positives first
// (the losses are sums and means over them, so their order does not matter), each one's image,
// anchor and level, and the positives' box regression targets.
struct RPNImpl::Sample {
  at::Tensor sampled;      // int64 [S]
  int64_t num_pos = 0;
  at::Tensor box_targets;  // [num_pos, 4]
  at::Tensor image, anchor, level_of;  // int64 [S], on the device (when S > 0)
  // Where each level's anchors start and end in the anchors of every level (location-major).
  std::vector<int64_t> level_start, level_end;
};

// The head's predictions at the sampled anchors, in parts (one, or one per level), with what the
// losses compare them with.
struct RPNImpl::SampledPredictions {
  std::vector<at::Tensor> logits, labels;   // objectness logits and their 0/1 labels
  std::vector<at::Tensor> deltas, targets;  // the positives' deltas and box targets
};

RPNImpl::Sample RPNImpl::draw(const RPNLabels& labels, const at::Tensor& host_counts,
                              const std::vector<ImageTargets>& targets, SampleStreams& streams) const {
  const int64_t n = labels.matches.size(0);
  const int64_t total = labels.anchors.size(0);
  const ops::BoxCoder coder({1.0, 1.0, 1.0, 1.0});
  std::vector<at::Generator*> generators;
  for (int64_t i = 0; i < n; ++i) generators.push_back(&streams.for_image(i));
  // As (image * total + anchor): every image's positives, then every image's negatives.
  const auto drawn = sampler().draw_batch(labels.draw, host_counts, generators);
  Sample s;
  s.sampled = at::cat({drawn.positive, drawn.negative});
  s.num_pos = drawn.positive.numel();
  // The positives' boxes from the ground truth, padded to the batch's most: one gather.
  std::vector<at::Tensor> gt_boxes;
  for (const ImageTargets& t : targets) gt_boxes.push_back(t.boxes);
  const at::Tensor gt = at::pad_sequence(gt_boxes, /*batch_first=*/true);
  const at::Tensor image = at::floor_divide(drawn.positive, total);
  const at::Tensor gt_rows = image * gt.size(1) + labels.matches.reshape(-1).index_select(0, drawn.positive);
  s.box_targets = coder.encode(gt.reshape({-1, 4}).index_select(0, gt_rows),
                               labels.anchors.index_select(0, drawn.positive - image * total));
  return s;
}

RPNImpl::SampledPredictions RPNImpl::predict_all_levels(const std::vector<at::Tensor>& features,
                                                        const Sample& s) const {
  // Every sampled anchor's patch gathered from every level (clamped into the level's grid), each
  // row keeping its own level's: L gathers of S patches and one product, no read. The rows stay
  // in sampled order, the num_pos positives first.
  const HeadAtCells at_cells(*head, features[0].size(1), num_anchors_);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const at::Tensor starts = ops::copy_to_device_async(at::tensor(s.level_start, i64), s.anchor.device());
  const at::Tensor local = s.anchor - starts.index_select(0, s.level_of);
  const at::Tensor cell = at::floor_divide(local, num_anchors_), which = local - cell * num_anchors_;
  at::Tensor patches;
  for (size_t l = 0; l < features.size(); ++l) {
    const at::Tensor& c = features[l];
    const int64_t h = c.size(2), w = c.size(3);
    const at::Tensor here = cell.clamp(0, h * w - 1);
    const at::Tensor y = at::floor_divide(here, w), x = here - y * w;
    const at::Tensor p = full_precision(GatherPatches::apply(c, s.image, y, x));
    patches = l == 0 ? p : at::where((s.level_of == static_cast<int64_t>(l)).view({-1, 1, 1, 1}), p, patches);
  }
  const at::Tensor rows = at_cells.rows(patches);
  const int64_t num = s.sampled.numel();
  SampledPredictions out;
  out.logits.push_back(at_cells.logits(rows, which));
  out.labels.push_back((at::arange(num, i64.device(s.anchor.device())) < s.num_pos).to(rows.scalar_type()));
  if (s.num_pos > 0) {
    out.deltas.push_back(at_cells.deltas(rows.slice(0, 0, s.num_pos), which.slice(0, 0, s.num_pos)));
    out.targets.push_back(s.box_targets);
  }
  return out;
}

RPNImpl::SampledPredictions RPNImpl::predict_per_level(const std::vector<at::Tensor>& features,
                                                       const Sample& s) const {
  // The sampled rows grouped by level, in sampled order within each (a stable sort: what a
  // per-level nonzero gives), with per level how many rows there are and how many of them are
  // positives (sampled starts with the num_pos positives, so within a level they come first): one
  // read of 2L counts instead of two nonzero per level.
  const HeadAtCells at_cells(*head, features[0].size(1), num_anchors_);
  const int64_t num_levels = static_cast<int64_t>(features.size());
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const at::Tensor by_level = std::get<1>(s.level_of.sort(/*stable=*/true, 0, /*descending=*/false));
  const at::Tensor levels = at::arange(num_levels, i64.device(s.anchor.device()));
  const at::Tensor level_counts =
      at::cat({(s.level_of.unsqueeze(1) == levels).sum(0),
               (s.level_of.slice(0, 0, s.num_pos).unsqueeze(1) == levels).sum(0)})
          .cpu();
  const int64_t* counts = level_counts.const_data_ptr<int64_t>();
  SampledPredictions out;
  int64_t first = 0;
  for (size_t l = 0; l < features.size(); ++l) {
    const at::Tensor& c = features[l];
    const int64_t w = c.size(3);
    const int64_t rows_here = counts[l], positives_here = counts[num_levels + static_cast<int64_t>(l)];
    const at::Tensor in_level = by_level.slice(0, first, first + rows_here);
    first += rows_here;
    if (rows_here == 0) continue;
    const at::Tensor local = s.anchor.index_select(0, in_level) - s.level_start[l];
    const at::Tensor cell = at::floor_divide(local, num_anchors_), which = local - cell * num_anchors_;
    const at::Tensor y = at::floor_divide(cell, w), x = cell - y * w;
    // [S_l, C]: strided reads, no copy of the map whatever its memory format.
    const at::Tensor rows =
        at_cells.rows(full_precision(GatherPatches::apply(c, s.image.index_select(0, in_level), y, x)));
    out.logits.push_back(at_cells.logits(rows, which));
    out.labels.push_back((in_level < s.num_pos).to(rows.scalar_type()));
    const at::Tensor pos_rows = at::arange(positives_here, in_level.options());  // the first rows
    if (positives_here > 0) {
      out.deltas.push_back(at_cells.deltas(rows.index_select(0, pos_rows), which.index_select(0, pos_rows)));
      out.targets.push_back(s.box_targets.index_select(0, in_level.index_select(0, pos_rows)));
    }
  }
  return out;
}

StageLosses RPNImpl::losses(const std::vector<at::Tensor>& features, const RPNLabels& labels,
                            const at::Tensor& host_counts, const std::vector<ImageTargets>& targets,
                            SampleStreams& streams) const {
  RECORD_FUNCTION("mrcnn::rpn", std::vector<c10::IValue>());
  const int64_t n = features[0].size(0);
  std::vector<int64_t> level_start, level_end;
  for (const at::Tensor& c : features) {
    level_start.push_back(level_end.empty() ? 0 : level_end.back());
    level_end.push_back(level_start.back() + c.size(2) * c.size(3) * num_anchors_);
  }
  const int64_t total = labels.anchors.size(0);
  if (total != level_end.back() || !labels.matches.defined() || labels.matches.size(0) != n)
    throw std::invalid_argument("RPN: labels of " + std::to_string(labels.matches.defined() ? labels.matches.size(0) : 0) + " images and " +
                                std::to_string(total) + " anchors for features of " + std::to_string(n) +
                                " images and " + std::to_string(level_end.back()) + " anchors (label() them first)");
  Sample s = draw(labels, host_counts, targets, streams);
  s.level_start = std::move(level_start);
  s.level_end = std::move(level_end);
  const int64_t num = s.sampled.numel();
  StageLosses out;
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  out.counts = {.sampled = at::scalar_tensor(num, i64), .positive = at::scalar_tensor(s.num_pos, i64)};
  if (num == 0) {
    const at::Tensor zero = full_precision(features[0].sum()) * 0;
    out.losses = {{"loss_objectness", zero}, {"loss_rpn_box_reg", zero}};
    return out;
  }
  s.image = at::floor_divide(s.sampled, total);
  s.anchor = s.sampled - s.image * total;
  const at::Tensor ends = ops::copy_to_device_async(at::tensor(s.level_end, i64), s.anchor.device());
  s.level_of = at::searchsorted(ends, s.anchor, /*out_int32=*/false, /*right=*/true);
  const LossGather gather =
      loss_gather_ != LossGather::kAuto ? loss_gather_
                                        : (s.anchor.is_cpu() ? LossGather::kPerLevel : LossGather::kAllLevels);
  const SampledPredictions p =
      gather == LossGather::kAllLevels ? predict_all_levels(features, s) : predict_per_level(features, s);
  const at::Tensor all_logits = at::cat(p.logits);
  out.losses["loss_objectness"] = at::binary_cross_entropy_with_logits(all_logits, at::cat(p.labels));
  if (s.num_pos > 0) {
    const at::Tensor pred = at::cat(p.deltas);
    out.losses["loss_rpn_box_reg"] = at::smooth_l1_loss(pred, at::cat(p.targets).to(pred.scalar_type()),
                                                        at::Reduction::Sum, options_.box_loss_beta) /
                                     static_cast<double>(num);
  } else {
    out.losses["loss_rpn_box_reg"] = all_logits.sum() * 0;
  }
  return out;
}

}  // namespace mrcnn::model
