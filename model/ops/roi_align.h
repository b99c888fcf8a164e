// RoIAlign (He et al., Mask R-CNN): bilinear-sampled average pooling of a box from one feature
// map, with torchvision's semantics (`torchvision.ops.roi_align`).
//
// Registered with the PyTorch dispatcher as `mrcnn::roi_align` (CPU, CUDA, Autograd, Autocast)
// when libmrcnn_ops loads; the C++ function below goes through the dispatcher, so it runs the
// kernel of the input's device and records autograd when the input requires grad.
//
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mrcnn::ops {

// input:  float32/float64/float16/bfloat16 [N, C, H, W], NCHW-contiguous or channels-last
//         (NHWC) memory, CPU or CUDA. float16/bfloat16 maps are read as they are (no float32
//         copy) and pooled in float32; the gradient accumulates in float32 (detail below).
// rois:   same device, [K, 5] rows (batch_index, x1, y1, x2, y2) in image pixels, in the input's
//         dtype, or float32 for float16/bfloat16 input (roi_align_check.h's roi_dtype_for).
// Returns [K, C, pooled_height, pooled_width] in the dtype and memory format of `input`
// (channels-last input gives channels-last output; the values are the same). Under autocast,
// float16/bfloat16 input goes to the kernels as it is, with the RoIs cast to float32.
//   spatial_scale  feature size / image size (1/stride), e.g. 0.25 for P2;
//   sampling_ratio samples per bin side; <= 0 picks ceil(roi size / pooled size) per RoI;
//   aligned        true shifts box coordinates by -0.5 pixel (Detectron2's RoIAlignV2); the
//                  MLPerf reference uses false, which also forces each box to be >= 1x1.
// Differentiable w.r.t. `input` (not `rois`). Deterministic on CPU for any thread count; on CUDA
// the backward is deterministic when at::globalContext().deterministicAlgorithms() is set.
at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                     int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                     bool aligned);

namespace detail {

// Gradient of roi_align w.r.t. its input (schema `mrcnn::_roi_align_backward`): grad is
// [K, C, pooled_height, pooled_width] (any strides); returns [batch, channels, height, width] in
// grad's dtype, channels-last when `channels_last`. A float16/bfloat16 gradient is accumulated in
// float32 and rounded once: the same values as the float32 backward of the float32 pooling.
at::Tensor roi_align_backward(const at::Tensor& grad, const at::Tensor& rois, double spatial_scale,
                              int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                              int64_t channels, int64_t height, int64_t width,
                              int64_t sampling_ratio, bool aligned, bool channels_last = false);

}  // namespace detail
}  // namespace mrcnn::ops
