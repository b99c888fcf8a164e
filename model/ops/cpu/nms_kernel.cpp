// CPU kernels of mrcnn::nms and mrcnn::batched_nms (greedy core: nms_impl.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "model/ops/detail/nms_impl.h"
#include "model/ops/detail/nms_check.h"

namespace mrcnn::ops {
namespace {

void check_nms_inputs(const at::Tensor& boxes, const at::Tensor& scores, const char* op) {
  TORCH_CHECK(boxes.device().is_cpu() && scores.device().is_cpu(), op,
              ": expected CPU tensors, got boxes on ", boxes.device(), " and scores on ",
              scores.device());
  detail::check_nms_shapes(boxes, scores, op);
}

at::Tensor to_index_tensor(const std::vector<int64_t>& v, const at::Tensor& like) {
  at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, like.options().dtype(at::kLong));
  if (!v.empty()) std::memcpy(t.mutable_data_ptr<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// NMS of the boxes listed in `members` (original indices, any order): visits them by stable
// descending score and appends the kept original indices to `kept`.
template <typename T>
void nms_group(const T* boxes, const T* scores, std::vector<int64_t>& members, double threshold,
               std::vector<int64_t>& kept) {
  std::stable_sort(members.begin(), members.end(), cpu::DescendingScore<T>{scores});
  const int64_t n = static_cast<int64_t>(members.size());
  cpu::BoxesSoA<T> soa;
  soa.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const T* b = boxes + members[static_cast<size_t>(i)] * 4;
    soa.set(static_cast<size_t>(i), b[0], b[1], b[2], b[3]);
  }
  std::vector<uint8_t> scratch;
  std::vector<int64_t> pos;
  cpu::nms_greedy(soa, n, threshold, nullptr, scratch, pos);
  for (int64_t p : pos) kept.push_back(members[static_cast<size_t>(p)]);
}

at::Tensor nms_kernel(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  check_nms_inputs(boxes, scores, "mrcnn::nms");
  const int64_t n = boxes.size(0);
  if (n == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  const at::Tensor b = boxes.contiguous();
  const at::Tensor s = scores.contiguous();
  std::vector<int64_t> kept;
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "mrcnn_nms", [&] {
    std::vector<int64_t> members(static_cast<size_t>(n));
    std::iota(members.begin(), members.end(), 0);
    nms_group<scalar_t>(b.const_data_ptr<scalar_t>(), s.const_data_ptr<scalar_t>(), members,
                        iou_threshold, kept);
  });
  return to_index_tensor(kept, boxes);
}

at::Tensor batched_nms_kernel(const at::Tensor& boxes, const at::Tensor& scores,
                              const at::Tensor& idxs, double iou_threshold) {
  check_nms_inputs(boxes, scores, "mrcnn::batched_nms");
  detail::check_batched_nms_idxs(boxes, idxs);
  const int64_t n = boxes.size(0);
  if (n == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  const at::Tensor b = boxes.contiguous();
  const at::Tensor s = scores.contiguous();
  const at::Tensor cat = idxs.to(at::kLong).contiguous();
  const int64_t* c = cat.const_data_ptr<int64_t>();

  // Group by category (categories in increasing order, members in index order).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [c](int64_t x, int64_t y) { return c[x] < c[y]; });
  std::vector<std::vector<int64_t>> groups;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || c[order[static_cast<size_t>(i)]] != c[order[static_cast<size_t>(i - 1)]]) {
      groups.emplace_back();
    }
    groups.back().push_back(order[static_cast<size_t>(i)]);
  }
  std::vector<std::vector<int64_t>> kept(groups.size());
  std::vector<int64_t> all;
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "mrcnn_batched_nms", [&] {
    const scalar_t* bp = b.const_data_ptr<scalar_t>();
    const scalar_t* sp = s.const_data_ptr<scalar_t>();
    // Categories are independent: one task each, results merged in a fixed order.
    at::parallel_for(0, static_cast<int64_t>(groups.size()), 1, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        nms_group<scalar_t>(bp, sp, groups[static_cast<size_t>(g)], iou_threshold,
                            kept[static_cast<size_t>(g)]);
      }
    });
    for (const auto& k : kept) all.insert(all.end(), k.begin(), k.end());
    // Decreasing score; ties by lower index (sort the index order first, then stable by score).
    std::sort(all.begin(), all.end());
    std::stable_sort(all.begin(), all.end(), cpu::DescendingScore<scalar_t>{sp});
  });
  return to_index_tensor(all, boxes);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("nms", TORCH_FN(nms_kernel));
  m.impl("batched_nms", TORCH_FN(batched_nms_kernel));
}

}  // namespace mrcnn::ops
