// Fused RPN proposal generation over a padded batch: the work of torchvision's
// RegionProposalNetwork after the head (box decoding + filter_proposals) and of the MLPerf
// reference's RPNPostProcessor, in one op. For every image n and level l:
//   1. the pre_nms_top_n anchors of highest objectness logit (stable: equal logits keep the lower
//      anchor index first);
//   2. decode their deltas (BoxCoder weights 1,1,1,1, clamp log(1000/16));
//   3. clip to the TRUE image size image_sizes[n] (not the padded size);
//   4. drop boxes with width or height < min_size, and boxes whose probability
//      sigmoid(logit) < score_threshold;
//   5. NMS at nms_threshold within the level (torchvision's batched NMS with the level as the
//      category; boxes visited in the order of step 1, which is a stable decreasing-probability
//      order);
// then per image the kept boxes of all levels are ordered by decreasing probability (ties: lower
// level, then the step-1 order) and
//   6a. per image (default; torchvision, and the reference at test time): the first
//       post_nms_top_n of each image are kept;
//   6b. per batch (per_batch_post_nms; the MLPerf reference's training behaviour): the
//       post_nms_top_n of highest probability over the whole batch are kept (ties: lower image
//       index first), each image keeping its share in decreasing-probability order.
//
// Registered as `mrcnn::generate_proposals` (CPU, CUDA). Not differentiable: proposals are
// constants for the rest of the network, as in the reference. Deterministic on CPU for any
// thread count (images x levels run in parallel, each one sequentially).
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/ops/proposal_types.h"

namespace mrcnn::ops {

Proposals generate_proposals(const std::vector<at::Tensor>& objectness,
                             const std::vector<at::Tensor>& box_deltas,
                             const std::vector<at::Tensor>& anchors,
                             const at::Tensor& image_sizes, const ProposalOptions& options);

}  // namespace mrcnn::ops
