// CUDA kernels of mrcnn::nms and mrcnn::batched_nms on the segmented NMS of nms_segmented.cuh.
// Both need the number of kept boxes on the host (the result's size), as torchvision's CUDA nms:
// nms synchronizes once; batched_nms three times (unique_consecutive's number of categories, the
// longest category's length, the kept count). The model calls them at inference only.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "model/ops/cuda/nms_segmented.cuh"
#include "model/ops/detail/nms_check.h"

namespace mrcnn::ops {
namespace {

void check_nms_inputs(const at::Tensor& boxes, const at::Tensor& scores, const char* op) {
  TORCH_CHECK(boxes.is_cuda() && scores.is_cuda() && boxes.device() == scores.device(), op,
              ": expected boxes and scores on one CUDA device, got ", boxes.device(), " and ",
              scores.device());
  detail::check_nms_shapes(boxes, scores, op);
}

at::Tensor nms_cuda(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  check_nms_inputs(boxes, scores, "mrcnn::nms");
  c10::cuda::CUDAGuard device_guard(boxes.device());
  const int64_t n = boxes.size(0);
  if (n == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  // Stable descending order: ties keep the lower index first.
  const at::Tensor order =
      std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const at::Tensor sorted = boxes.index_select(0, order).contiguous();
  const auto long_opts = boxes.options().dtype(at::kLong);
  const at::Tensor seg_begin = at::zeros({1}, long_opts);
  const at::Tensor seg_len = at::full({1}, n, long_opts);
  at::Tensor keep;
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "mrcnn_nms_cuda", [&] {
    keep = cuda::segmented_nms<scalar_t>(sorted, seg_begin, seg_len, n, at::Tensor(),
                                         iou_threshold);
  });
  return order.index_select(0, keep.nonzero().squeeze(1));
}

at::Tensor batched_nms_cuda(const at::Tensor& boxes, const at::Tensor& scores,
                            const at::Tensor& idxs, double iou_threshold) {
  check_nms_inputs(boxes, scores, "mrcnn::batched_nms");
  detail::check_batched_nms_idxs(boxes, idxs);
  c10::cuda::CUDAGuard device_guard(boxes.device());
  const int64_t n = boxes.size(0);
  if (n == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  // Group by category (stable), each group by descending score (stable): two stable sorts.
  const at::Tensor by_score =
      std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const at::Tensor cats = idxs.to(at::kLong).index_select(0, by_score);
  const at::Tensor by_cat = std::get<1>(cats.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor order = by_score.index_select(0, by_cat);
  const at::Tensor sorted = boxes.index_select(0, order).contiguous();
  // Segments: runs of one category (the sizes come to the host once).
  const auto [unique, inverse, counts] = at::unique_consecutive(
      cats.index_select(0, by_cat), /*return_inverse=*/false, /*return_counts=*/true);
  const at::Tensor seg_len = counts.to(at::kLong).contiguous();
  const at::Tensor seg_begin = seg_len.cumsum(0).sub(seg_len).contiguous();
  const int64_t max_len = seg_len.max().item<int64_t>();
  at::Tensor keep;
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "mrcnn_batched_nms_cuda", [&] {
    keep = cuda::segmented_nms<scalar_t>(sorted, seg_begin, seg_len, max_len, at::Tensor(),
                                         iou_threshold);
  });
  // Kept indices by decreasing score, ties by lower index.
  const at::Tensor kept = std::get<0>(order.index_select(0, keep.nonzero().squeeze(1)).sort());
  const at::Tensor by_kept_score = std::get<1>(
      scores.index_select(0, kept).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  return kept.index_select(0, by_kept_score);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("nms", TORCH_FN(nms_cuda));
  m.impl("batched_nms", TORCH_FN(batched_nms_cuda));
}

}  // namespace mrcnn::ops
