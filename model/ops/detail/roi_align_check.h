// Argument checks of the RoIAligns and the FPN level map, shared by every implementation (cpu/,
// cuda/, portable/; internal header): shapes, dtypes and sizes, one message on every device. Each
// kernel checks its own device first (a CPU kernel, CPU tensors; a CUDA kernel, one GPU).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mrcnn::ops::detail {

// Whether features of this dtype are stored in reduced precision (float16, bfloat16): the kernels
// read them as they are and compute in float32.
inline bool reduced_precision(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// The dtype of the RoIs (and of the sampling geometry) for features of `features_dtype`: the
// features' own for float32/float64, float32 for float16/bfloat16 (a box edge at x = 1333 is
// only representable to 0.5 pixel in float16, to 8 pixels in bfloat16).
inline at::ScalarType roi_dtype_for(at::ScalarType features_dtype) {
  return reduced_precision(features_dtype) ? at::kFloat : features_dtype;
}

// Level gradients accumulated in roi_dtype_for(dtype) (float32 for float16/bfloat16), each rounded
// once to the features' `dtype`.
inline std::vector<at::Tensor> rounded_to(std::vector<at::Tensor> grads, at::ScalarType dtype) {
  for (at::Tensor& g : grads)
    if (g.scalar_type() != dtype) g = g.to(dtype);
  return grads;
}

// rois: [K, 5] (batch_index, x1, y1, x2, y2) in roi_dtype_for(the features' dtype).
inline void check_rois_shape(const at::Tensor& rois, at::ScalarType features_dtype, const char* op) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, op,
              ": rois must have shape [K, 5] (batch_index, x1, y1, x2, y2), got ", rois.sizes());
  const at::ScalarType want = roi_dtype_for(features_dtype);
  TORCH_CHECK(rois.scalar_type() == want, op, ": rois must have dtype ", want, " for ", features_dtype,
              " features, got ", rois.scalar_type());
}

// roi_align: input [N, C, H, W], rois as above, pooled sizes > 0.
inline void check_roi_align_args(const at::Tensor& input, const at::Tensor& rois,
                                 int64_t pooled_height, int64_t pooled_width, const char* op) {
  TORCH_CHECK(input.dim() == 4, op, ": input must be [N, C, H, W], got ", input.dim(), "D");
  check_rois_shape(rois, input.scalar_type(), op);
  TORCH_CHECK(pooled_height > 0 && pooled_width > 0, op, ": pooled size must be > 0, got ",
              pooled_height, "x", pooled_width);
}

// roi_align, once there is something to pool: an empty map has no pixel to sample (its last row
// would be row -1).
inline void check_nonempty_map(const at::Tensor& input, const char* op) {
  TORCH_CHECK(input.size(2) > 0 && input.size(3) > 0, op, ": input has an empty feature map ",
              input.sizes());
}

// _roi_align_backward: rois as above for grad's dtype, grad [K, C, PH, PW].
inline void check_roi_align_backward_args(const at::Tensor& grad, const at::Tensor& rois,
                                          int64_t channels, int64_t pooled_height,
                                          int64_t pooled_width, const char* op) {
  check_rois_shape(rois, grad.scalar_type(), op);
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == rois.size(0) && grad.size(1) == channels &&
                  grad.size(2) == pooled_height && grad.size(3) == pooled_width,
              op, ": grad must be [K, C, PH, PW] = [", rois.size(0), ", ", channels, ", ",
              pooled_height, ", ", pooled_width, "], got ", grad.sizes());
}

// multilevel_roi_align (and its backward): rois as above, output_size and canonical_scale > 0.
inline void check_multilevel_rois(const at::Tensor& rois, at::ScalarType features_dtype,
                                  int64_t output_size, int64_t canonical_scale, const char* op) {
  check_rois_shape(rois, features_dtype, op);
  TORCH_CHECK(output_size > 0, op, ": output_size must be > 0, got ", output_size);
  TORCH_CHECK(canonical_scale > 0, op, ": canonical_scale must be > 0, got ", canonical_scale);
}

// multilevel_roi_align: every level [N, C, H_l, W_l] like features[0] (dtype, device, N, C), each
// map non-empty and under 2^31 pixels; check_multilevel_rois.
inline void check_multilevel_args(at::TensorList features, const at::Tensor& rois,
                                  int64_t output_size, int64_t canonical_scale, const char* op) {
  const at::Tensor& f0 = features[0];
  TORCH_CHECK(f0.dim() == 4, op, ": features[0] must be [N, C, H, W], got ", f0.dim(), "D");
  check_multilevel_rois(rois, f0.scalar_type(), output_size, canonical_scale, op);
  for (size_t l = 0; l < features.size(); ++l) {
    const at::Tensor& f = features[l];
    TORCH_CHECK(f.dim() == 4 && f.size(0) == f0.size(0) && f.size(1) == f0.size(1), op,
                ": features[", l, "] must be [", f0.size(0), ", ", f0.size(1),
                ", H, W] like features[0], got ", f.sizes());
    TORCH_CHECK(f.scalar_type() == f0.scalar_type() && f.device() == f0.device(), op,
                ": features[", l, "] must have the dtype and device of features[0]");
    // An empty map has no pixel to sample (its last row would be row -1).
    TORCH_CHECK(f.size(2) > 0 && f.size(3) > 0 && f.size(2) * f.size(3) < (int64_t{1} << 31), op,
                ": features[", l, "] has an unsupported spatial size ", f.sizes());
  }
}

// _multilevel_roi_align_backward: one height, width and format per level, each map non-empty;
// check_multilevel_rois for grad's dtype; grad [K, C, S, S].
inline void check_multilevel_backward_args(const at::Tensor& grad, const at::Tensor& rois,
                                           int64_t channels, int64_t output_size,
                                           int64_t canonical_scale, at::IntArrayRef level_heights,
                                           at::IntArrayRef level_widths,
                                           at::IntArrayRef level_channels_last, const char* op) {
  const size_t num_levels = level_heights.size();
  TORCH_CHECK(level_widths.size() == num_levels && level_channels_last.size() == num_levels, op,
              ": backward needs one height, width and format per level");
  check_multilevel_rois(rois, grad.scalar_type(), output_size, canonical_scale, op);
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == rois.size(0) && grad.size(1) == channels &&
                  grad.size(2) == output_size && grad.size(3) == output_size,
              op, ": grad must be [K, C, S, S] = [", rois.size(0), ", ", channels, ", ",
              output_size, ", ", output_size, "], got ", grad.sizes());
  for (size_t l = 0; l < num_levels; ++l)
    TORCH_CHECK(level_heights[l] > 0 && level_widths[l] > 0, op, ": level ", l,
                " has an empty map (", level_heights[l], "x", level_widths[l], ")");
}

// map_rois_to_levels: [K, 5] RoIs or [K, 4] boxes, k_min <= k_max.
inline void check_level_map_args(const at::Tensor& rois, int64_t k_min, int64_t k_max) {
  TORCH_CHECK(rois.dim() == 2 && (rois.size(1) == 5 || rois.size(1) == 4),
              "mrcnn::map_rois_to_levels: rois must be [K, 5] or boxes [K, 4], got ", rois.sizes());
  TORCH_CHECK(k_min <= k_max, "mrcnn::map_rois_to_levels: k_min (", k_min, ") > k_max (", k_max,
              ")");
}

}  // namespace mrcnn::ops::detail
