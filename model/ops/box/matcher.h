// Matches predictions (anchors, proposals) to ground truth by a quality matrix (IoU), with
// torchvision's Matcher semantics (models/detection/_utils.py):
//   * each prediction takes the ground truth of highest quality (ties: lowest gt index);
//   * quality < low  -> kBelowLowThreshold (background); low <= quality < high ->
//     kBetweenThresholds (ignored);
//   * with allow_low_quality_matches, every prediction that reaches some ground truth's best
//     quality (ties included) gets back its own best match (its argmax over gts, which may be a
//     different gt than the one it ties for; as torchvision and Detectron do).
// RPN: Matcher(0.7, 0.3, true); RoI heads: Matcher(0.5, 0.5, false).
// Written with ATen operators: any device. Registered as `mrcnn::match` (for tests).
//
// Thread-safety: immutable; operator() is safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::ops {

class Matcher {
 public:
  static constexpr int64_t kBelowLowThreshold = -1;
  static constexpr int64_t kBetweenThresholds = -2;

  // Throws std::invalid_argument unless low_threshold <= high_threshold.
  Matcher(double high_threshold, double low_threshold, bool allow_low_quality_matches);

  // match_quality: [G, P] floating (G ground-truth boxes, P predictions).
  // Returns int64 [P]: the matched gt index in 0..G-1, or one of the sentinels.
  // G == 0 (an image without ground truth): every prediction is kBelowLowThreshold (background);
  // torchvision raises instead. P == 0: an empty result. NaN qualities compare as torch.max does
  // (NaN wins), i.e. the caller must not pass them.
  at::Tensor operator()(const at::Tensor& match_quality) const;

  // The matches of a batch in one call: match_quality [N, G, P] (image n's ground truth in rows
  // 0..gt_counts[n]-1, the rows after them padding, whatever they hold), gt_counts int64 [N] on
  // the same device. Returns int64 [N, P]: row n is operator() of image n's [gt_counts[n], P]
  // block, bit for bit (padding rows never match, nor count as a ground truth's best).
  at::Tensor batched(const at::Tensor& match_quality, const at::Tensor& gt_counts) const;

  double high_threshold() const { return high_threshold_; }
  double low_threshold() const { return low_threshold_; }
  bool allow_low_quality_matches() const { return allow_low_quality_matches_; }

 private:
  // The matches of `quality`'s predictions (its last dimension) to its ground truth (dimension
  // gt_dim, the one before the last); gt_rows, where defined, marks the rows that are ground truth.
  at::Tensor match(const at::Tensor& quality, int64_t gt_dim, const at::Tensor& gt_rows) const;

  double high_threshold_;
  double low_threshold_;
  bool allow_low_quality_matches_;
};

}  // namespace mrcnn::ops
