// Matcher in ATen operators (any device), torchvision's algorithm step for step.
#include "model/ops/box/matcher.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <stdexcept>
#include <string>

namespace mrcnn::ops {

Matcher::Matcher(double high_threshold, double low_threshold, bool allow_low_quality_matches)
    : high_threshold_(high_threshold),
      low_threshold_(low_threshold),
      allow_low_quality_matches_(allow_low_quality_matches) {
  if (!(low_threshold <= high_threshold)) {
    throw std::invalid_argument("Matcher: low_threshold (" + std::to_string(low_threshold) +
                                ") must be <= high_threshold (" + std::to_string(high_threshold) +
                                ")");
  }
}

at::Tensor Matcher::operator()(const at::Tensor& match_quality) const {
  TORCH_CHECK(match_quality.dim() == 2, "Matcher: match_quality must be [G, P], got ",
              match_quality.sizes());
  TORCH_CHECK(at::isFloatingType(match_quality.scalar_type()),
              "Matcher: match_quality must be floating point, got ", match_quality.scalar_type());
  const int64_t num_gt = match_quality.size(0);
  const int64_t num_pred = match_quality.size(1);
  const auto long_opts = match_quality.options().dtype(at::kLong);
  if (num_gt == 0 || num_pred == 0) {
    // No ground truth: everything is background (torchvision raises here).
    return at::full({num_pred}, kBelowLowThreshold, long_opts);
  }
  return match(match_quality, 0, at::Tensor());
}

at::Tensor Matcher::match(const at::Tensor& quality, int64_t gt_dim, const at::Tensor& gt_rows) const {
  // Best gt per prediction (first index on ties, as torch.max over a dim).
  auto [matched_vals, matches] = quality.max(gt_dim);
  at::Tensor all_matches;
  if (allow_low_quality_matches_) all_matches = matches.clone();
  const at::Tensor below = matched_vals.lt(low_threshold_);
  const at::Tensor between = matched_vals.ge(low_threshold_).logical_and(matched_vals.lt(high_threshold_));
  matches.masked_fill_(below, kBelowLowThreshold);
  matches.masked_fill_(between, kBetweenThresholds);
  if (allow_low_quality_matches_) {
    // Predictions that reach some gt's best quality (ties included) get their own best match
    // back, even below the low threshold. Padding rows are no gt's.
    const at::Tensor best_per_gt = std::get<0>(quality.max(gt_dim + 1));
    at::Tensor hits = quality.eq(best_per_gt.unsqueeze(gt_dim + 1));
    if (gt_rows.defined()) hits.logical_and_(gt_rows.unsqueeze(gt_dim + 1));
    matches = at::where(hits.any(gt_dim), all_matches, matches);
  }
  return matches;
}

at::Tensor Matcher::batched(const at::Tensor& match_quality, const at::Tensor& gt_counts) const {
  TORCH_CHECK(match_quality.dim() == 3, "Matcher: a batch's match_quality must be [N, G, P], got ",
              match_quality.sizes());
  TORCH_CHECK(at::isFloatingType(match_quality.scalar_type()),
              "Matcher: match_quality must be floating point, got ", match_quality.scalar_type());
  TORCH_CHECK(gt_counts.dim() == 1 && gt_counts.size(0) == match_quality.size(0) &&
                  gt_counts.scalar_type() == at::kLong && gt_counts.device() == match_quality.device(),
              "Matcher: gt_counts must be int64 [", match_quality.size(0), "] on ", match_quality.device(),
              ", got ", gt_counts.scalar_type(), " ", gt_counts.sizes(), " on ", gt_counts.device());
  const int64_t n = match_quality.size(0), slots = match_quality.size(1), num_pred = match_quality.size(2);
  const auto long_opts = match_quality.options().dtype(at::kLong);
  if (slots == 0 || num_pred == 0) return at::full({n, num_pred}, kBelowLowThreshold, long_opts);
  // Padding rows below any quality (qualities are >= 0): never a prediction's best. An image
  // without ground truth then has -1 everywhere, below the low threshold: background, as
  // operator() returns for G == 0.
  const at::Tensor valid = at::arange(slots, long_opts).unsqueeze(0) < gt_counts.unsqueeze(1);  // [N, G]
  // Per image, operator()'s steps along dimension 1.
  return match(match_quality.masked_fill(valid.logical_not().unsqueeze(2), -1.0), 1, valid);
}

namespace {

at::Tensor match_op(const at::Tensor& match_quality, double high_threshold, double low_threshold,
                    bool allow_low_quality_matches) {
  return Matcher(high_threshold, low_threshold, allow_low_quality_matches)(match_quality);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mrcnn, m) {
  m.def(
      "match(Tensor match_quality, float high_threshold, float low_threshold, "
      "bool allow_low_quality_matches) -> Tensor",
      TORCH_FN(match_op));
}

}  // namespace mrcnn::ops
