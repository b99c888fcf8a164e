#include "model/options.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace mrcnn::model {
namespace {

[[noreturn]] void invalid(const std::string& field, const std::string& expected,
                          const std::string& got) {
  throw std::invalid_argument("model option " + field + ": expected " + expected + ", got " + got);
}

template <typename T>
std::string str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void positive(const std::string& field, double v) {
  if (!(std::isfinite(v) && v > 0)) invalid(field, "a finite number > 0", str(v));
}

void fraction(const std::string& field, double v) {
  if (!(v >= 0 && v <= 1)) invalid(field, "a number in [0, 1]", str(v));
}

void at_least(const std::string& field, int64_t v, int64_t lo) {
  if (v < lo) invalid(field, "an integer >= " + std::to_string(lo), std::to_string(v));
}

void iou_pair(const std::string& prefix, double fg, double bg) {
  fraction(prefix + ".fg_iou_threshold", fg);
  fraction(prefix + ".bg_iou_threshold", bg);
  if (bg > fg)
    invalid(prefix + ".bg_iou_threshold", "<= fg_iou_threshold (" + str(fg) + ")", str(bg));
}

}  // namespace

const char* to_string(NormKind kind) {
  return kind == NormKind::kFrozenBatchNorm ? "frozen_bn" : "group_norm";
}

NormKind parse_norm_kind(const std::string& name) {
  if (name == "frozen_bn") return NormKind::kFrozenBatchNorm;
  if (name == "group_norm") return NormKind::kGroupNorm;
  invalid("backbone.norm", "\"frozen_bn\" or \"group_norm\"", "\"" + name + "\"");
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kFloat32: return "fp32";
    case Precision::kBFloat16: return "bf16";
    case Precision::kFloat16: return "fp16";
  }
  return "fp32";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFloat32;
  if (name == "bf16") return Precision::kBFloat16;
  if (name == "fp16") return Precision::kFloat16;
  throw std::invalid_argument("precision \"" + name + "\" (expected \"fp32\", \"bf16\" or \"fp16\")");
}

const char* to_string(SamplingStreams streams) {
  return streams == SamplingStreams::kPerImage ? "per_image" : "shared";
}

SamplingStreams parse_sampling_streams(const std::string& name) {
  if (name == "per_image") return SamplingStreams::kPerImage;
  if (name == "shared") return SamplingStreams::kShared;
  invalid("sampling_streams", "\"per_image\" or \"shared\"", "\"" + name + "\"");
}

namespace {

void validate_backbone(const BackboneOptions& b, bool channels_last, Precision precision) {
  if (b.depth != 18 && b.depth != 34 && b.depth != 50 && b.depth != 101)
    invalid("backbone.depth", "18, 34, 50 or 101", std::to_string(b.depth));
  at_least("backbone.base_channels", b.base_channels, 1);
  if (b.freeze_at < 0 || b.freeze_at > 5)
    invalid("backbone.freeze_at", "an integer in [0, 5]", std::to_string(b.freeze_at));
  if (b.norm == NormKind::kGroupNorm) {
    at_least("backbone.group_norm_groups", b.group_norm_groups, 1);
    // Every normalized width is base_channels times a power of two (x4 for bottleneck outputs):
    // base_channels itself is the narrowest.
    if (b.base_channels % b.group_norm_groups != 0)
      invalid("backbone.group_norm_groups",
              "a divisor of backbone.base_channels (" + std::to_string(b.base_channels) + ")",
              std::to_string(b.group_norm_groups));
  }

  if (channels_last && precision == Precision::kBFloat16) {
    // oneDNN's bfloat16 kernel for the weight gradient of a channels-last 1x1 stride-2
    // convolution corrupts the heap when the input has 8 to 15 channels (LibTorch 2.14.1, CPU);
    // the narrowest such input is a basic block's base_channels or a bottleneck's 4x.
    const int narrowest = b.depth >= 50 ? 4 * b.base_channels : b.base_channels;
    if (narrowest < 16)
      invalid("backbone.base_channels",
              std::string("at least ") + (b.depth >= 50 ? "4" : "16") +
                  " with channels_last and bf16 precision (the bfloat16 channels-last strided "
                  "1x1 convolution of oneDNN fails on narrower inputs)",
              std::to_string(b.base_channels));
  }
}

void validate_rpn(const RPNOptions& r) {
  if (r.anchor_sizes.size() != 5)
    invalid("rpn.anchor_sizes", "5 sizes (one per level P2..P6)",
            std::to_string(r.anchor_sizes.size()) + " sizes");
  for (double s : r.anchor_sizes) positive("rpn.anchor_sizes[]", s);
  if (r.aspect_ratios.empty()) invalid("rpn.aspect_ratios", "at least one ratio", "none");
  for (double a : r.aspect_ratios) positive("rpn.aspect_ratios[]", a);
  if (!r.anchor_strides.empty()) {
    if (r.anchor_strides.size() != 5)
      invalid("rpn.anchor_strides", "5 strides (one per level P2..P6) or none",
              std::to_string(r.anchor_strides.size()) + " strides");
    for (int64_t s : r.anchor_strides) at_least("rpn.anchor_strides[]", s, 1);
  }
  iou_pair("rpn", r.fg_iou_threshold, r.bg_iou_threshold);
  at_least("rpn.batch_size_per_image", r.batch_size_per_image, 1);
  fraction("rpn.positive_fraction", r.positive_fraction);
  positive("rpn.box_loss_beta", r.box_loss_beta);
  if (!std::isfinite(r.straddle_threshold))
    invalid("rpn.straddle_threshold", "a finite number", str(r.straddle_threshold));
  at_least("rpn.pre_nms_top_n_train", r.pre_nms_top_n_train, 1);
  at_least("rpn.pre_nms_top_n_test", r.pre_nms_top_n_test, 1);
  at_least("rpn.post_nms_top_n_train", r.post_nms_top_n_train, 1);
  at_least("rpn.post_nms_top_n_test", r.post_nms_top_n_test, 1);
  fraction("rpn.nms_threshold", r.nms_threshold);
  if (!(r.min_size >= 0)) invalid("rpn.min_size", "a number >= 0", str(r.min_size));
}

void validate_box_head(const BoxHeadOptions& h) {
  at_least("box_head.pooler_resolution", h.pooler_resolution, 1);
  at_least("box_head.sampling_ratio", h.sampling_ratio, 0);
  at_least("box_head.representation_size", h.representation_size, 1);
  iou_pair("box_head", h.fg_iou_threshold, h.bg_iou_threshold);
  at_least("box_head.batch_size_per_image", h.batch_size_per_image, 1);
  fraction("box_head.positive_fraction", h.positive_fraction);
  for (double w : h.box_coder_weights) positive("box_head.box_coder_weights[]", w);
  positive("box_head.box_loss_beta", h.box_loss_beta);
  fraction("box_head.score_threshold", h.score_threshold);
  fraction("box_head.nms_threshold", h.nms_threshold);
  at_least("box_head.detections_per_image", h.detections_per_image, 1);
  if (!(h.min_size >= 0)) invalid("box_head.min_size", "a number >= 0", str(h.min_size));
}

void validate_mask_head(const MaskHeadOptions& m) {
  at_least("mask_head.pooler_resolution", m.pooler_resolution, 1);
  at_least("mask_head.sampling_ratio", m.sampling_ratio, 0);
  at_least("mask_head.conv_channels", m.conv_channels, 1);
  at_least("mask_head.num_convs", m.num_convs, 1);
  fraction("mask_head.mask_threshold", m.mask_threshold);
  at_least("mask_head.roi_bucket", m.roi_bucket, 0);
}

}  // namespace

void ModelOptions::validate() const {
  at_least("num_classes", num_classes, 2);
  validate_backbone(backbone, channels_last, precision);
  at_least("fpn.out_channels", fpn.out_channels, 1);
  if (cuda_graph_shapes < 0 || cuda_graph_shapes > 1024)
    invalid("cuda_graph_shapes", "an integer in [0, 1024]", std::to_string(cuda_graph_shapes));
  validate_rpn(rpn);
  validate_box_head(box_head);
  validate_mask_head(mask_head);
}

ModelOptions reference_options() {
  ModelOptions o;
  o.rpn.proposals_inside_image = false;
  o.mask_padding = false;
  return o;
}

ModelOptions torchvision_options(int num_classes) {
  ModelOptions o;
  o.num_classes = num_classes;
  o.backbone.stride_in_1x1 = false;
  o.rpn.anchor_strides.clear();
  o.rpn.straddle_threshold = -1.0;
  o.rpn.proposals_inside_image = false;
  o.rpn.post_nms_per_batch_train = false;
  o.rpn.min_size = 1e-3;
  o.box_head.box_loss_beta = 1.0 / 9.0;
  o.box_head.min_size = 1e-2;
  o.sampling_streams = SamplingStreams::kShared;
  o.mask_padding = false;
  return o;
}

}  // namespace mrcnn::model
