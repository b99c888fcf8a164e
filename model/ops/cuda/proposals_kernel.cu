// CUDA kernel of mrcnn::generate_proposals (semantics: proposals.h), with no host
// synchronization: per level a stable descending sort of the logits (ties: lower anchor index,
// as on the CPU), one decode/clip/filter kernel over the top-k of every image, one segmented NMS
// over all (image, level) pairs, and the post-NMS selection as stable sorts over the kept
// probabilities. Every tie is broken as the CPU kernel breaks it.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/ops/cuda/nms_segmented.cuh"
#include "model/ops/device_faults.h"
#include "model/ops/host_copy.h"
#include "model/ops/detail/proposals_check.h"

namespace mrcnn::ops {
namespace {

constexpr const char* kOp = "mrcnn::generate_proposals";

template <typename T>
struct DecodeParams {
  const int64_t* top_index;  // [N, K] anchor index (H*W*A order) of the k-th best logit
  const T* top_logit;        // [N, K]
  const T* deltas;           // [N, 4A, H, W], any strides
  int64_t dsn, dsc, dsh, dsw;
  const T* anchors;          // [H*W*A, 4] contiguous
  const int64_t* image_sizes;  // [N, 2] (h, w)
  int64_t k;                 // top-k of this level
  int64_t anchors_per_location;
  int64_t width;
  int64_t num_levels, level, capacity;  // output layout [N, L, capacity]
  T min_size, score_threshold, clip;
  T* boxes;                  // [N, L, capacity, 4]
  T* probs;                  // [N, L, capacity]
  uint8_t* valid;            // [N, L, capacity]
  int* fault;                // the device's fault word (device_faults.h)
};

// BoxCoder(1, 1, 1, 1).decode, clip to the true image size, small-box and score filters, with
// explicitly rounded arithmetic (no fused multiply-add) and exp rounded as the host's libm rounds
// it (cuda_helpers.h): the CPU kernel's values.
template <typename T>
__global__ void decode_kernel(int64_t total, DecodeParams<T> p) {
  using cuda::exp_like_host;
  using cuda::rn_add;
  using cuda::rn_div;
  using cuda::rn_mul;
  using cuda::rn_sub;
  MRCNN_CUDA_1D_KERNEL_LOOP(t, total) {
    const int64_t n = t / p.k;
    const int64_t j = t % p.k;
    const int64_t i = p.top_index[n * p.k + j];
    const int64_t a = i % p.anchors_per_location;
    const int64_t pos = i / p.anchors_per_location;
    const int64_t y = pos / p.width;
    const int64_t x = pos % p.width;
    const T* d = p.deltas + n * p.dsn + (4 * a) * p.dsc + y * p.dsh + x * p.dsw;
    const T* an = p.anchors + 4 * i;
    const T half = static_cast<T>(0.5);
    const T widths = rn_sub(an[2], an[0]);
    const T heights = rn_sub(an[3], an[1]);
    const T ctr_x = rn_add(an[0], rn_mul(half, widths));
    const T ctr_y = rn_add(an[1], rn_mul(half, heights));
    // Written as comparisons so that a NaN delta stays NaN (fminf would drop it), as on the CPU.
    const T dw = d[2 * p.dsc] > p.clip ? p.clip : d[2 * p.dsc];
    const T dh = d[3 * p.dsc] > p.clip ? p.clip : d[3 * p.dsc];
    const T pred_ctr_x = rn_add(rn_mul(d[0], widths), ctr_x);
    const T pred_ctr_y = rn_add(rn_mul(d[p.dsc], heights), ctr_y);
    const T half_w = rn_mul(half, rn_mul(exp_like_host(dw), widths));
    const T half_h = rn_mul(half, rn_mul(exp_like_host(dh), heights));
    T x1 = rn_sub(pred_ctr_x, half_w), y1 = rn_sub(pred_ctr_y, half_h);
    T x2 = rn_add(pred_ctr_x, half_w), y2 = rn_add(pred_ctr_y, half_h);
    const bool nan = isnan(x1) || isnan(y1) || isnan(x2) || isnan(y2);
    // NaN sorts first in the descending sort, so a NaN logit of the level is always selected.
    if (isnan(p.top_logit[n * p.k + j])) atomicOr(p.fault, kFaultObjectnessNaN);
    else if (nan) atomicOr(p.fault, kFaultDecodeNaN);
    const T img_h = static_cast<T>(p.image_sizes[2 * n]);
    const T img_w = static_cast<T>(p.image_sizes[2 * n + 1]);
    if (j == 0 && (img_h < static_cast<T>(0) || img_w < static_cast<T>(0))) {
      atomicOr(p.fault, kFaultImageSize);
    }
    x1 = min(max(x1, static_cast<T>(0)), img_w);
    x2 = min(max(x2, static_cast<T>(0)), img_w);
    y1 = min(max(y1, static_cast<T>(0)), img_h);
    y2 = min(max(y2, static_cast<T>(0)), img_h);
    const T prob = rn_div(static_cast<T>(1), rn_add(static_cast<T>(1), exp_like_host(-p.top_logit[n * p.k + j])));
    const int64_t o = (n * p.num_levels + p.level) * p.capacity + j;
    p.boxes[4 * o + 0] = x1;
    p.boxes[4 * o + 1] = y1;
    p.boxes[4 * o + 2] = x2;
    p.boxes[4 * o + 3] = y2;
    p.probs[o] = prob;
    p.valid[o] = !nan && rn_sub(x2, x1) >= p.min_size && rn_sub(y2, y1) >= p.min_size &&
                 prob >= p.score_threshold;
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> generate_proposals_cuda(
    at::TensorList objectness, at::TensorList box_deltas, at::TensorList anchors,
    const at::Tensor& image_sizes, int64_t pre_nms_top_n, int64_t post_nms_top_n,
    double nms_threshold, double min_size, bool per_batch_post_nms, double score_threshold) {
  const auto levels = detail::check_proposal_inputs(objectness, box_deltas, anchors, image_sizes,
                                                    pre_nms_top_n, post_nms_top_n, min_size);
  const at::Tensor& o0 = objectness[0];
  TORCH_CHECK(o0.is_cuda(), kOp, ": expected CUDA tensors, got ", o0.device());
  c10::cuda::CUDAGuard device_guard(o0.device());
  const int64_t batch = o0.size(0);
  const int64_t num_levels = static_cast<int64_t>(levels.size());
  const int64_t P = post_nms_top_n;
  const auto opts = o0.options();
  const auto long_opts = opts.dtype(at::kLong);

  std::vector<int64_t> k_of(levels.size());
  int64_t capacity = 0;
  for (size_t l = 0; l < levels.size(); ++l) {
    k_of[l] = std::min(pre_nms_top_n, levels[l].num_anchors());
    capacity = std::max(capacity, k_of[l]);
  }
  at::Tensor out_boxes = at::zeros({batch, P, 4}, opts);
  at::Tensor out_scores = at::zeros({batch, P}, opts);
  if (batch == 0 || capacity == 0) {
    return {out_boxes, out_scores, at::zeros({batch}, long_opts)};
  }
  if (!image_sizes.is_cuda()) {  // sizes on the host (the usual case): checked here, no copy back
    TORCH_CHECK(image_sizes.ge(0).all().item<bool>(), kOp, ": image_sizes must be >= 0, got ",
                image_sizes);
  }
  // Through pinned memory: a plain copy from pageable memory would wait for the device.
  const at::Tensor sizes =
      (image_sizes.is_cuda() ? image_sizes.to(o0.device(), at::kLong) : copy_to_device_async(image_sizes.to(at::kLong), o0.device()))
          .contiguous();
  at::Tensor boxes_all = at::zeros({batch, num_levels, capacity, 4}, opts);
  at::Tensor probs_all = at::zeros({batch, num_levels, capacity}, opts);
  at::Tensor valid_all = at::zeros({batch, num_levels, capacity}, opts.dtype(at::kByte));
  int* const fault = device_fault_word(o0.device()).data_ptr<int>();

  AT_DISPATCH_FLOATING_TYPES(o0.scalar_type(), "mrcnn_generate_proposals_cuda", [&] {
    using T = scalar_t;
    for (int64_t l = 0; l < num_levels; ++l) {
      const size_t ul = static_cast<size_t>(l);
      const int64_t k = k_of[ul];
      if (k == 0) continue;
      // Logits in anchor order (y, x, a); stable descending sort = top-k with index ties.
      const at::Tensor logits = objectness[ul].permute({0, 2, 3, 1}).reshape({batch, -1});
      const auto [vals, idx] = logits.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
      const at::Tensor top_idx = idx.narrow(1, 0, k).contiguous();
      const at::Tensor top_logit = vals.narrow(1, 0, k).contiguous();
      const at::Tensor anc = anchors[ul].to(o0.scalar_type()).contiguous();
      const at::Tensor& d = box_deltas[ul];
      DecodeParams<T> p;
      p.top_index = top_idx.const_data_ptr<int64_t>();
      p.top_logit = top_logit.const_data_ptr<T>();
      p.deltas = d.const_data_ptr<T>();
      p.dsn = d.stride(0);
      p.dsc = d.stride(1);
      p.dsh = d.stride(2);
      p.dsw = d.stride(3);
      p.anchors = anc.const_data_ptr<T>();
      p.image_sizes = sizes.const_data_ptr<int64_t>();
      p.k = k;
      p.anchors_per_location = levels[ul].anchors_per_location;
      p.width = levels[ul].width;
      p.num_levels = num_levels;
      p.level = l;
      p.capacity = capacity;
      p.min_size = static_cast<T>(min_size);
      p.score_threshold = static_cast<T>(score_threshold);
      p.clip = static_cast<T>(std::log(1000.0 / 16));
      p.boxes = boxes_all.mutable_data_ptr<T>();
      p.probs = probs_all.mutable_data_ptr<T>();
      p.valid = valid_all.mutable_data_ptr<uint8_t>();
      p.fault = fault;
      const int64_t total = batch * k;
      decode_kernel<T><<<cuda::grid_for(total), cuda::kThreadsPerBlock, 0,
                         c10::cuda::getCurrentCUDAStream()>>>(total, p);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });

  // NMS per (image, level): segment s = n * L + l starts at s * capacity and holds k_of[l]
  // (built on the device: no copy from the host).
  const at::Tensor seg_begin = at::arange(batch * num_levels, long_opts).mul_(capacity);
  std::vector<at::Tensor> lens;
  for (int64_t l = 0; l < num_levels; ++l) lens.push_back(at::full({1}, k_of[static_cast<size_t>(l)], long_opts));
  const at::Tensor seg_len = at::cat(lens).repeat({batch}).contiguous();
  at::Tensor keep;
  AT_DISPATCH_FLOATING_TYPES(o0.scalar_type(), "mrcnn_generate_proposals_nms_cuda", [&] {
    keep = cuda::segmented_nms<scalar_t>(boxes_all.view({-1, 4}), seg_begin, seg_len, capacity,
                                         valid_all.view({-1}), nms_threshold);
  });

  // Per image: kept probabilities (others -1) sorted stably, so ties keep (level, rank) order.
  const int64_t m = num_levels * capacity;
  const at::Tensor kept = keep.view({batch, m}).to(at::kBool);
  const at::Tensor sel = at::where(kept, probs_all.view({batch, m}), at::full({}, -1.0, opts));
  const auto [svals, sorder] = sel.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
  at::Tensor take;
  if (!per_batch_post_nms) {
    take = kept.sum(1).clamp_max(P);
  } else {
    // Over the batch: a stable sort of every image's sorted list flattened image-major, so ties
    // prefer the lower image; each image's share is a prefix of its own list.
    const int64_t cand = std::min(P, batch * m);
    const auto [bv, bi] = svals.reshape({-1}).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true);
    const at::Tensor chosen = bv.narrow(0, 0, cand).ge(0);
    const at::Tensor image_of = bi.narrow(0, 0, cand).div(m, "floor");
    const at::Tensor images = at::arange(batch, long_opts);
    take = image_of.unsqueeze(0).eq(images.unsqueeze(1)).logical_and(chosen.unsqueeze(0)).sum(1);
  }
  const int64_t cols = std::min(P, m);
  if (cols > 0) {
    const at::Tensor pick = sorder.narrow(1, 0, cols);
    const at::Tensor in_take =
        at::arange(cols, long_opts).unsqueeze(0).lt(take.unsqueeze(1));  // [N, cols]
    const at::Tensor boxes = boxes_all.view({batch, m, 4}).gather(1, pick.unsqueeze(2).expand({-1, -1, 4}));
    out_boxes.narrow(1, 0, cols).copy_(at::where(in_take.unsqueeze(2), boxes, at::zeros({}, opts)));
    out_scores.narrow(1, 0, cols).copy_(at::where(in_take, svals.narrow(1, 0, cols), at::zeros({}, opts)));
  }
  return {out_boxes, out_scores, take.to(at::kLong)};
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("generate_proposals", TORCH_FN(generate_proposals_cuda));
}

}  // namespace mrcnn::ops
