// Portable NMS: mrcnn::nms and mrcnn::batched_nms (nms.h) composed of standard ATen operators,
// with the CPU kernel's semantics (cpu/nms_kernel.cpp, cpu/nms_impl.h): the same kept indices in
// the same order.
//
// Visiting order: a stable descending sort of the scores (ties: lower index first; NaN first, as
// torch.sort and the kernel's DescendingScore), then, for batched_nms, a stable sort by category,
// so every category is a contiguous run in its own visiting order.
//
// Greedy NMS is sequential (whether box j survives depends on whether the better boxes that
// overlap it survived), so it is restated as a fixed point. For every pair p < q of one category
// the IoU is computed as the kernel computes it, in the boxes' dtype, operation for operation:
//     inter = max(0, min(x2) - max(x1)) * max(0, min(y2) - max(y1))
//     iou   = inter / ((area_p + area_q) - inter),   area = (x2 - x1) * (y2 - y1)
// and the pair is an edge p -> q when iou > t, t the largest value of the dtype <= the threshold
// (the kernel's comparison in double; nms_threshold_as). A NaN IoU is no edge. The greedy answer is
// the unique solution of keep[q] = (no edge p -> q with keep[p]); Jacobi iteration from all-true
// reaches it (a box is final one iteration after every box with an edge into it), and the first
// iteration that changes nothing is the answer. Each iteration is one index_add over the edges and
// one host read (equal), so the iterations are few: the longest chain of overlaps plus one.
// (ATen's maximum/minimum propagate NaN where std::max/min drop it; a NaN coordinate makes its
// box's area NaN and the IoU NaN either way, so no edge differs.)
//
// Memory: the IoUs are computed in blocks of rows against the later boxes of the rows' categories
// (about kBlockElements pairs a block, sum of K_c^2 / 2 over the categories in all), and only the
// edges are kept; never K x K over all boxes.
// float16/bfloat16 boxes are compared in float32 (the native autocast island). No autograd graph
// is recorded (the result is indices).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/ops/detail/nms_impl.h"
#include "model/ops/detail/nms_check.h"
#include "model/ops/portable/portable.h"
#include "model/ops/portable/value_checks.h"

namespace mrcnn::ops::portable {
namespace {

constexpr int64_t kBlockElements = int64_t{1} << 22;
constexpr int64_t kBlockRows = 128;

void check_nms_inputs(const at::Tensor& boxes, const at::Tensor& scores, const char* op) {
  TORCH_CHECK(boxes.device() == scores.device(), op,
              ": boxes and scores must be on one device, got ", boxes.device(), " and ",
              scores.device());
  detail::check_nms_shapes(boxes, scores, op);
  TORCH_CHECK(at::isFloatingType(boxes.scalar_type()), op,
              ": boxes must be floating point, got ", boxes.scalar_type());
}

// The kernel's threshold as a value of `dtype` (float or double), exactly representable in it.
double threshold_in(at::ScalarType dtype, double threshold) {
  if (dtype == at::kFloat) return static_cast<double>(cpu::nms_threshold_as<float>(threshold));
  return threshold;
}

// The boxes' columns, and their areas as the kernel computes them.
struct Columns {
  at::Tensor x1, y1, x2, y2, area;  // [M]
  explicit Columns(const at::Tensor& boxes)
      : x1(boxes.select(1, 0).contiguous()),
        y1(boxes.select(1, 1).contiguous()),
        x2(boxes.select(1, 2).contiguous()),
        y2(boxes.select(1, 3).contiguous()),
        area((x2 - x1) * (y2 - y1)) {}
};

// iou(p, q) > t for rows p in [r0, r0 + rows) and columns q in [c0, c0 + cols): bool [rows, cols],
// the kernel's expression (see the header) evaluated on a broadcast block.
at::Tensor block_overlaps(const Columns& b, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                          double t) {
  auto row = [&](const at::Tensor& v) { return v.narrow(0, r0, rows).unsqueeze(1); };
  auto col = [&](const at::Tensor& v) { return v.narrow(0, c0, cols).unsqueeze(0); };
  at::Tensor inter = (at::minimum(row(b.x2), col(b.x2)) - at::maximum(row(b.x1), col(b.x1)))
                         .clamp_min_(0);
  inter.mul_((at::minimum(row(b.y2), col(b.y2)) - at::maximum(row(b.y1), col(b.y1)))
                 .clamp_min_(0));
  const at::Tensor denominator = (row(b.area) + col(b.area)).sub_(inter);
  return inter.div_(denominator) > t;
}

// The edges p -> q (p < q, one category, iou > t) of boxes [M, 4] in visiting order, grouped by
// category: end[p] is one past the last position of p's category. Rows go in blocks of `rows`
// against the columns from the first row to the end of the last row's category: a block holds at
// most about kBlockElements pairs (and at least 16 rows), and its rows are few enough
// (kBlockRows) that the pairs it computes in vain (q <= p, or q of another category) are a small
// share of the work.
std::pair<at::Tensor, at::Tensor> overlap_edges(const at::Tensor& boxes, const at::Tensor& end,
                                                double t) {
  const int64_t m = boxes.size(0);
  const auto opts = end.options();
  const Columns b(boxes);
  const int64_t rows = std::min(m, std::clamp<int64_t>(kBlockElements / m, 16, kBlockRows));
  const int64_t blocks = (m + rows - 1) / rows;
  // One host read: the end of each block's first and last rows' categories (the block's columns
  // end with the last).
  const at::Tensor first_rows = at::arange(blocks, opts) * rows;
  const at::Tensor last_rows = (first_rows + rows).clamp_max_(m) - 1;
  const at::Tensor ends =
      at::stack({end.index_select(0, first_rows), end.index_select(0, last_rows)}, 1).cpu();
  std::vector<at::Tensor> src_edges, dst_edges;
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t r0 = k * rows, nr = std::min(rows, m - r0);
    const int64_t c0 = r0 + 1, nc = ends[k][1].item<int64_t>() - c0;
    if (nc <= 0) continue;
    // Pairs q > p (column c0 + j, row r0 + i: j >= i) of one category (c0 + j < end[r0 + i];
    // true of every column when the first row's category reaches the last column).
    at::Tensor edge = block_overlaps(b, r0, nr, c0, nc, t).triu_();
    if (ends[k][0].item<int64_t>() < c0 + nc) {
      edge.logical_and_(at::arange(nc, opts).unsqueeze(0) <
                        (end.narrow(0, r0, nr) - c0).unsqueeze(1));
    }
    const at::Tensor e = edge.nonzero();
    src_edges.push_back(e.select(1, 0) + r0);
    dst_edges.push_back(e.select(1, 1) + c0);
  }
  if (src_edges.empty()) return {at::empty({0}, opts), at::empty({0}, opts)};
  return {at::cat(src_edges), at::cat(dst_edges)};
}

// Greedy NMS of boxes [M, 4] (compute dtype) in visiting order, grouped by category (`end` as in
// overlap_edges): bool [M], true where kept.
at::Tensor greedy_keep(const at::Tensor& boxes, const at::Tensor& end, double threshold) {
  const int64_t m = boxes.size(0);
  at::Tensor keep = at::ones({m}, end.options().dtype(at::kBool));
  if (m == 0) return keep;
  const auto [src, dst] =
      overlap_edges(boxes, end, threshold_in(boxes.scalar_type(), threshold));
  if (src.numel() == 0) return keep;
  const at::Tensor zeros = at::zeros({m}, boxes.options().dtype(at::kFloat));
  // Jacobi: at most m + 1 iterations (the longest chain of edges plus one).
  for (int64_t it = 0; it <= m; ++it) {
    const at::Tensor hits = zeros.index_add(0, dst, keep.index_select(0, src).to(at::kFloat));
    const at::Tensor next = hits == 0;
    if (at::equal(next, keep)) return keep;
    keep = next;
  }
  TORCH_INTERNAL_ASSERT(false, "mrcnn_portable::nms: the fixed point did not converge");
  return keep;
}

// Stable descending order of the scores (ties: lower index first; NaN first).
at::Tensor descending(const at::Tensor& scores) {
  return std::get<1>(at::sort(scores, /*stable=*/true, 0, /*descending=*/true));
}

}  // namespace

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  check_nms_inputs(boxes, scores, "mrcnn::nms");
  const at::NoGradGuard no_grad;  // indices: nothing to differentiate
  const int64_t k = boxes.size(0);
  const at::ScalarType dtype = compute_dtype(boxes.scalar_type());
  const at::Tensor order = descending(scores.to(dtype));
  const at::Tensor sorted = boxes.to(dtype).index_select(0, order);
  const at::Tensor end = at::full({k}, k, order.options());
  return order.masked_select(greedy_keep(sorted, end, iou_threshold));
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                       double iou_threshold) {
  check_nms_inputs(boxes, scores, "mrcnn::batched_nms");
  detail::check_batched_nms_idxs(boxes, idxs);
  const at::NoGradGuard no_grad;
  const at::ScalarType dtype = compute_dtype(boxes.scalar_type());
  const at::Tensor s = scores.to(dtype);
  // Visiting order within each category, categories in increasing order.
  const at::Tensor by_score = descending(s);
  const at::Tensor cats = idxs.to(at::kLong).index_select(0, by_score);
  const auto [sorted_cats, by_cat] = at::sort(cats, /*stable=*/true, 0, /*descending=*/false);
  const at::Tensor order = by_score.index_select(0, by_cat);
  const at::Tensor end = at::searchsorted(sorted_cats, sorted_cats, false, /*right=*/true);
  const at::Tensor sorted = boxes.to(dtype).index_select(0, order);
  // Kept indices by decreasing score, ties lower index first.
  const at::Tensor kept =
      std::get<0>(at::sort(order.masked_select(greedy_keep(sorted, end, iou_threshold))));
  return kept.index_select(0, descending(s.index_select(0, kept)));
}

TORCH_LIBRARY_FRAGMENT(mrcnn_portable, m) {
  m.def("nms(Tensor boxes, Tensor scores, float iou_threshold) -> Tensor",
        TORCH_FN(portable::nms));
  m.def("batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor",
        TORCH_FN(portable::batched_nms));
}

}  // namespace mrcnn::ops::portable
