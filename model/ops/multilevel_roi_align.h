// Multi-level RoIAlign for FPN (torchvision's MultiScaleRoIAlign in one call): each RoI is
// assigned to one pyramid level by the FPN paper's heuristic, as torchvision's LevelMapper does,
//     k = floor(canonical_level + log2(sqrt(area) / canonical_scale) + 1e-6), clamped to the
//     levels present,   area = (x2 - x1) * (y2 - y1) in float32,
// and is pooled from that level only. One kernel walks all RoIs over all levels: no per-level
// index_select / scatter and no zero-filled result to merge into.
//
// Registered as `mrcnn::multilevel_roi_align` (CPU, CUDA, Autograd, Autocast).
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace mrcnn::ops {

// features:        L >= 1 maps [N, C, H_l, W_l] (P2..P5 in Mask R-CNN), same dtype, device,
//                  N and C; each NCHW-contiguous or channels-last (may differ per level).
//                  float16/bfloat16 maps are read as they are and pooled in float32, their
//                  gradients accumulated in float32 (as roi_align).
// rois:            [K, 5] (batch_index, x1, y1, x2, y2) in image pixels, dtype of the features
//                  (float32 for float16/bfloat16 features).
// spatial_scales:  one per level, feature size / image size, consecutive powers of two getting
//                  smaller (0.25, 0.125, ...); they fix the level range k_min = -log2(s_0),
//                  k_max = -log2(s_{L-1}). infer_spatial_scales() computes them as torchvision.
// Returns [K, C, output_size, output_size], row i pooled for rois[i]; channels-last when the
// first level is channels-last. Differentiable w.r.t. every level (not rois). Deterministic on
// CPU for any thread count; CUDA backward deterministic under the determinism switch.
at::Tensor multilevel_roi_align(at::TensorList features, const at::Tensor& rois,
                                int64_t output_size, int64_t sampling_ratio, bool aligned,
                                at::ArrayRef<double> spatial_scales, int64_t canonical_scale = 224,
                                int64_t canonical_level = 4);

// torchvision's scale inference: for each level, 2^round(log2(H_l / image_height)), where
// image_height/width is the largest true image size of the batch (torchvision) or the padded
// size (both give the same powers of two for /32 padding). Throws if image sizes are not > 0.
std::vector<double> infer_spatial_scales(at::TensorList features, int64_t image_height,
                                         int64_t image_width);

// The level assignment alone: int64 [K] in 0..k_max-k_min (level index relative to k_min), on
// the device of `rois` ([K, 5] RoIs or [K, 4] boxes); what multilevel_roi_align uses, exposed for
// tests and for callers that need the per-level split (schema `mrcnn::map_rois_to_levels`).
// A zero-area box maps to k_min; so does an inverted one (negative area: torchvision's NaN level
// silently drops such a RoI from every level, leaving zeros).
at::Tensor map_rois_to_levels(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                              int64_t canonical_scale = 224, int64_t canonical_level = 4);

namespace detail {

// Gradient w.r.t. every level (schema `mrcnn::_multilevel_roi_align_backward`). level_heights /
// level_widths give each level's size, level_channels_last its memory format.
std::vector<at::Tensor> multilevel_roi_align_backward(
    const at::Tensor& grad, const at::Tensor& rois, at::ArrayRef<double> spatial_scales,
    int64_t output_size, int64_t sampling_ratio, bool aligned, int64_t canonical_scale,
    int64_t canonical_level, int64_t batch_size, int64_t channels, at::IntArrayRef level_heights,
    at::IntArrayRef level_widths, at::IntArrayRef level_channels_last);

}  // namespace detail
}  // namespace mrcnn::ops
