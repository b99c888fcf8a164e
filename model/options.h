// Hyperparameters of the Mask R-CNN network, one plain struct per component, detectron2-style:
// every field has a documented default equal to the MLPerf reference value (maskrcnn-benchmark's
// e2e_mask_rcnn_R_50_FPN_1x, the MLPerf Training reference), constructors take these structs and
// never JSON. model/options_json.h maps a system JSON's "model" section onto them.
//
// Small systems shrink the model through the same fields: ResNet depth 18/34/50/101, base width,
// group norm instead of frozen batch norm, FPN channels, head widths, sample counts, NMS counts.
//
// All structs are values (copyable, no hidden state); validate() throws std::invalid_argument
// naming the field, the value and what was expected.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::model {

// Normalization of the backbone's convolutions.
enum class NormKind {
  // Batch norm with fixed statistics and affine, stored folded as one per-channel scale and bias
  // (the MLPerf reference with its ImageNet-pretrained backbone). Never trained.
  kFrozenBatchNorm,
  // Group norm with a trainable affine: for backbones trained from scratch (e.g. a small model on
  // the synthetic dataset), where an identity frozen batch norm would not train.
  kGroupNorm,
};

// "frozen_bn" / "group_norm"; parse_norm_kind throws std::invalid_argument on other names.
const char* to_string(NormKind kind);
NormKind parse_norm_kind(const std::string& name);

struct BackboneOptions {
  // ResNet depth: 18 or 34 (basic blocks), 50 or 101 (bottlenecks). MLPerf: 50.
  int depth = 50;
  // Width of the stem and of res2's 3x3 convolutions; every stage doubles it. 64 in standard
  // ResNets; smaller values shrink the whole backbone (output channels follow).
  int base_channels = 64;
  NormKind norm = NormKind::kFrozenBatchNorm;
  // Groups of each group norm (kGroupNorm only); every normalized channel count must divide.
  int group_norm_groups = 32;
  // Stages frozen from the input (no gradient, never updated): 0 none, 1 the stem, 2 the stem
  // and res2 (MLPerf: FREEZE_CONV_BODY_AT 2), ... 5 the whole ResNet.
  int freeze_at = 2;
  // Where a bottleneck's stride sits: its first 1x1 convolution (MSRA / Detectron weights, the
  // MLPerf reference) or its 3x3 (torchvision's ResNet "v1.5" weights). Basic blocks ignore it.
  bool stride_in_1x1 = true;
  // On CUDA, with frozen batch norm: each convolution of a bottleneck (its first two, and its last
  // with the shortcut's sum; not the stem's, nor a basic block's) as one cuDNN call with the
  // bias, the sum and the ReLU in its epilogue (cudnn_convolution_relu / _add_relu), as NVIDIA's
  // harness fuses them. Without it LibTorch adds each bias in a broadcast pass of its own (81 a
  // batch-8 step, 6.9 ms of an H200's time) and the ReLU in another. Elsewhere (CPU, group
  // norm, basic blocks) the layers run as without it. Values: the same up to rounding (the
  // epilogue sums in float32 before one rounding).
  bool fused_conv_relu = false;
};

struct FPNOptions {
  // Channels of every pyramid level P2..P6 (and so of the RPN and RoI heads' inputs).
  int out_channels = 256;
};

struct RPNOptions {
  // Anchor sizes in pixels, one per level P2..P6, and height/width ratios shared by all levels.
  std::vector<double> anchor_sizes = {32, 64, 128, 256, 512};
  std::vector<double> aspect_ratios = {0.5, 1.0, 2.0};
  // Anchor stride of each level P2..P6 (the reference's ANCHOR_STRIDE). Empty: infer each
  // level's stride from the padded batch size as torchvision does (padded size / grid size,
  // integer division: P6 of an 800-high batch gets 61, not 64).
  std::vector<int64_t> anchor_strides = {4, 8, 16, 32, 64};

  // Anchor-to-ground-truth matching: IoU >= fg positive, < bg negative, between ignored;
  // anchors that are some ground truth's best match are positive too.
  double fg_iou_threshold = 0.7;
  double bg_iou_threshold = 0.3;
  // Anchors sampled per image for the loss, and the positive share at most.
  int64_t batch_size_per_image = 256;
  double positive_fraction = 0.5;
  // Smooth-L1 beta of the RPN box loss.
  double box_loss_beta = 1.0 / 9.0;
  // Anchors reaching beyond the true image (not the padded batch) by more than this many pixels
  // are ignored by the loss (the reference's STRADDLE_THRESH). Negative: every anchor counts,
  // including those over padding (torchvision).
  double straddle_threshold = 0.0;

  // Proposals come only from feature cells whose anchor centre lies inside the true image, so
  // that padding cannot add proposals (padding-invariant batches). False: every cell of the
  // padded batch proposes (torchvision, the reference).
  bool proposals_inside_image = true;
  // Anchors kept per image and level before NMS, in training and in evaluation.
  int64_t pre_nms_top_n_train = 2000;
  int64_t pre_nms_top_n_test = 1000;
  // Proposals kept after NMS (MLPerf's num_image_candidates): per image, or over the whole
  // batch when post_nms_per_batch_train (the reference's FPN_POST_NMS_PER_BATCH in training).
  int64_t post_nms_top_n_train = 2000;
  int64_t post_nms_top_n_test = 1000;
  bool post_nms_per_batch_train = true;
  double nms_threshold = 0.7;
  // Proposals narrower or lower than this (pixels, after clipping) are dropped (torchvision 1e-3).
  double min_size = 0.0;
};

struct BoxHeadOptions {
  // Multi-level RoIAlign: output size, samples per bin side, half-pixel alignment.
  int pooler_resolution = 7;
  int sampling_ratio = 2;
  bool aligned = false;
  // Width of the two fully connected layers (fc6, fc7).
  int representation_size = 1024;

  // Proposal-to-ground-truth matching (no low-quality matches) and sampling per image.
  double fg_iou_threshold = 0.5;
  double bg_iou_threshold = 0.5;
  int64_t batch_size_per_image = 512;
  double positive_fraction = 0.25;
  // Box regression weights (wx, wy, ww, wh).
  std::array<double, 4> box_coder_weights = {10.0, 10.0, 5.0, 5.0};
  // Smooth-L1 beta of the box loss: 1 in the reference, 1/9 in torchvision.
  double box_loss_beta = 1.0;

  // Inference: class scores above score_threshold, per-class NMS, detections per image.
  double score_threshold = 0.05;
  double nms_threshold = 0.5;
  int64_t detections_per_image = 100;
  // Detections narrower or lower than this (pixels) are dropped before NMS (torchvision 1e-2);
  // 0 keeps every box (the reference).
  double min_size = 0.0;
};

struct MaskHeadOptions {
  int pooler_resolution = 14;
  int sampling_ratio = 2;
  bool aligned = false;
  // num_convs 3x3 convolutions of conv_channels (fcn1..fcnN), then a 2x2 stride-2 deconvolution
  // to conv_channels and a 1x1 convolution to one logit map per class: masks of
  // 2 * pooler_resolution pixels a side (28).
  int conv_channels = 256;
  int num_convs = 4;
  // Pasted mask probabilities above this are foreground.
  double mask_threshold = 0.5;
  // The head's RoIs padded (by repeating the first ones) to a multiple of this many before the
  // head runs, and the padding's logits dropped: its convolutions then meet a few shapes again and
  // again, where the count of positives gives them a new shape at almost every step (cuDNN plans
  // each new shape: 1.6-2.0 ms of host per convolution on an H200). The padded rows reach neither
  // the loss nor a gradient (theirs is zero); the kept rows' values are the unpadded head's up to
  // the rounding of a convolution over another batch size. 0 or 1: no padding (the reference).
  int roi_bucket = 0;
};

// Which random stream a training step's samplers draw from.
enum class SamplingStreams {
  // One stream per image, seeded from the step's generator and the image id: an image's samples
  // do not depend on the other images of the batch or its position (batch-invariant).
  kPerImage,
  // The step's generator itself, in torchvision's order (RPN: image 0 positives, negatives,
  // image 1 ...; then the RoI heads likewise): reproduces torchvision's draws.
  kShared,
};

const char* to_string(SamplingStreams streams);
SamplingStreams parse_sampling_streams(const std::string& name);

// The arithmetic of the forward pass: float32, or mixed precision through autocast in bfloat16
// (CPU, HPU) or float16 (CUDA; the trainer scales the loss). Losses are always float32.
enum class Precision { kFloat32, kBFloat16, kFloat16 };

// "fp32" / "bf16" / "fp16"; parse_precision throws std::invalid_argument on other names.
const char* to_string(Precision precision);
Precision parse_precision(const std::string& name);

struct ModelOptions {
  // Classes including the background (COCO: 80 + 1).
  int num_classes = 81;
  BackboneOptions backbone;
  FPNOptions fpn;
  RPNOptions rpn;
  BoxHeadOptions box_head;
  MaskHeadOptions mask_head;
  SamplingStreams sampling_streams = SamplingStreams::kPerImage;

  // Zero every backbone and FPN feature map outside each image's valid region
  // (backbone/padding_masks.h), so that how much an image is padded changes nothing. False: the
  // reference's behaviour (features near an image's border see its padding); costs nothing when
  // no image of a batch is padded by a stride or more.
  bool mask_padding = true;

  // Convolutions in channels-last (NHWC) memory: faster on tensor cores and on CPU (oneDNN).
  bool channels_last = false;
  // With channels_last on a CPU without AVX-512: the weight gradient of every trainable
  // convolution wider than 1x1 is the project's own (conv2d_train): at stride 1 one matrix
  // product per kernel tap, at stride 2 from NCHW copies; forward and input gradients stay
  // oneDNN's channels-last ones. There, oneDNN's channels-last weight gradient of a 3x3
  // convolution ran at 20-46 GFLOP/s (2-core AVX2 EPYC), from NCHW copies at 36-91 (the FPN's
  // largest one 6.5 s a step, then 1.8 s), by taps at 115-160 in a Python prototype of the same
  // arithmetic; in a profiled full-size step all the taps' weight gradients together took 3.2 s
  // (model/README.md has the step with and without each change). On an AVX-512 Xeon the step's
  // channels-last backward convolutions ran at about 180 GFLOP/s (model/README.md), so the rule
  // stays off there; benchmark/perf/flops_roofline.py shows a machine's own rates.
  // A fixed rule, not a timing: deterministic. No effect on CUDA or without channels_last.
  bool cpu_own_weight_grad = true;
  // Autocast's lower precision for the forward pass (kFloat32: none).
  Precision precision = Precision::kFloat32;
  // CUDA only: training runs the backbone, FPN and RPN head from CUDA graphs, captured for each
  // of the first cuda_graph_shapes padded batch shapes (later shapes run without graphs);
  // 0: no graphs. The same arithmetic either way (feature_graphs.h).
  int64_t cuda_graph_shapes = 0;
  // CUDA only: the training step's loss heads (the RPN's loss, the box head, the mask head) on
  // three streams of their own, as NVIDIA's harness runs them (head_streams.h); the same
  // arithmetic either way. No effect on a CPU.
  bool head_streams = false;

  // Throws std::invalid_argument naming the first invalid field ("rpn.positive_fraction ...").
  void validate() const;
};

// The MLPerf reference's network and arithmetic (maskrcnn-benchmark as the MLPerf Training
// reference configures e2e_mask_rcnn_R_50_FPN_1x): these defaults without the project's two
// padding-invariance switches, which the reference does not have (mask_padding and
// rpn.proposals_inside_image off: features near an image's border see its padding, and every cell
// of the padded batch proposes). What a closed-division system computes
// (config::closed_division_violations), apart from the speed paths that change no result beyond
// rounding.
ModelOptions reference_options();

// torchvision's maskrcnn_resnet50_fpn (FrozenBatchNorm2d backbone, trainable_layers 3) expressed
// in these options: stride in the 3x3, anchor strides inferred from the padded size, every cell
// proposing, no straddle filter, proposal min size 1e-3, post-NMS counts per image, box loss
// beta 1/9, detection min size 1e-2, shared sampling stream, no padding masks. num_classes 91 as
// torchvision's COCO weights.
ModelOptions torchvision_options(int num_classes = 91);

}  // namespace mrcnn::model
