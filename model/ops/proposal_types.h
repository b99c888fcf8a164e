// The proposals' options and result, shared by the public op (proposals.h) and its portable
// composition (portable/portable.h) without either including the other.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::ops {

struct ProposalOptions {
  // Anchors kept per image and level before NMS (MLPerf reference: 2000 training, 1000 test).
  int64_t pre_nms_top_n = 2000;
  // Proposals kept after NMS, per image or per batch (see per_batch_post_nms); also the padded
  // width P of the result. (MLPerf: 1000 per image at test; per batch in training.)
  int64_t post_nms_top_n = 1000;
  // IoU above which a box is suppressed by a better one of its level.
  double nms_threshold = 0.7;
  // Boxes narrower or lower than this (after clipping) are dropped; 0 keeps every box
  // (torchvision uses 1e-3).
  double min_size = 0.0;
  // Select post_nms_top_n over the whole batch instead of per image.
  bool per_batch_post_nms = false;
  // Boxes with sigmoid(objectness) below this are dropped (probability, not logit).
  double score_threshold = 0.0;
};

struct Proposals {
  at::Tensor boxes;   // float [N, P, 4] XYXY in the padded image's pixels; rows >= counts[n] are 0
  at::Tensor scores;  // float [N, P] objectness PROBABILITIES sigmoid(logit); rows >= counts are 0
  at::Tensor counts;  // int64 [N] valid rows per image (on the device of the inputs)
};

// objectness[l]:  [N, A, H_l, W_l] logits of level l (any strides);
// box_deltas[l]:  [N, 4*A, H_l, W_l] deltas, channel 4*a + j for anchor a and coordinate j;
// anchors[l]:     [H_l*W_l*A, 4] as AnchorGenerator returns (location row-major, then anchor);
// image_sizes:    int64 [N, 2] (height, width) of each image before padding (any device).
// All float tensors share dtype (float32 or float64) and device. P = post_nms_top_n.
// Throws c10::Error naming the argument on shape/device/dtype mismatches, and when an
// objectness logit is NaN or an image size negative. On CUDA the value checks do not stop the
// device: they set bits of its fault word, which the host reads later (device_faults.h).

}  // namespace mrcnn::ops
