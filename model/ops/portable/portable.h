// The portable implementations of the custom ops: each composed only of standard ATen operators
// (index/gather, arithmetic, sort/topk, scatter, cumsum), so that it runs on any LibTorch device
// (AMD and Intel GPUs, Habana's HPU, Apple's MPS, and the CPU, where it is tested against the
// native kernels). Same signatures and semantics as the public functions in model/ops/*.h; which
// one runs is chosen by implementation.h (run.ops). Backward is by autograd through the
// composition (RoIAlign's gathers become index_add scatters).
//
// Each is also registered with the dispatcher under the `mrcnn_portable` namespace, with the
// same schema as its `mrcnn::` twin, so that the Python op checks run unchanged against it
// (tests/model/ops with MRCNN_OPS=portable).
//
// Differences from the native kernels, all within the parity the tests state:
//   * value checks (a NaN logit, a batch index out of range) throw on the CPU as the native
//     kernels do; on another device they set the fault word (device_faults.h) without a read;
//   * float16/bfloat16 inputs are computed in float32 and cast back (the autocast islands of the
//     native ops).
// Thread-safety: stateless; safe to call concurrently.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

#include "model/ops/polygon_list.h"
#include "model/ops/proposal_types.h"

namespace mrcnn::ops::portable {

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                     int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                     bool aligned);

at::Tensor multilevel_roi_align(at::TensorList features, const at::Tensor& rois,
                                int64_t output_size, int64_t sampling_ratio, bool aligned,
                                at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                                int64_t canonical_level);

at::Tensor map_rois_to_levels(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                              int64_t canonical_scale, int64_t canonical_level);

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold);

Proposals generate_proposals(const std::vector<at::Tensor>& objectness,
                             const std::vector<at::Tensor>& box_deltas,
                             const std::vector<at::Tensor>& anchors,
                             const at::Tensor& image_sizes, const ProposalOptions& options);

at::Tensor mask_targets(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                        const at::Tensor& proposals, int64_t resolution);

at::Tensor paste_masks_in_image(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                                int64_t im_w, int64_t padding);

at::Tensor paste_masks_in_image_binary(const at::Tensor& masks, const at::Tensor& boxes,
                                       int64_t im_h, int64_t im_w, int64_t padding,
                                       double threshold);

}  // namespace mrcnn::ops::portable
