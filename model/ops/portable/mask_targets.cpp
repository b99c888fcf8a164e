// Portable mask targets: the MLPerf reference's crop -> scale -> pycocotools rasterization
// (mask_targets.h) composed of standard ATen operators, bit-identical to the native op.
//
// Crop and scale are the native float32 expressions, on one row per vertex. The rasterizer is
// mask_raster.h's point-by-point form of pycocotools': the vertices scaled by 5 and truncated,
// every edge walked through its dense integer points, a point making a boundary point when the
// walk crosses from column 5c + 2 to 5c + 3 (c a pixel column) or back, and a pixel inside a
// polygon when an odd number of boundary points lie at or before its column-major position.
// Every edge of every (proposal, polygon) pair is tested at once, as two kinds of point pairs:
//   * junctions: the walk's last point of edge j - 1, then the first point of edge j (one pair
//     per edge; rounding can put them apart);
//   * steps: consecutive points (t, t + 1) of one edge. Only the steps that can cross a column
//     are enumerated: an x-major edge (|dx| >= |dy|) moves x by exactly 1 per step, so column c
//     is crossed at t = 5c + 2 - xs (one step per column, at most M per edge); along a y-major
//     edge x is monotone in t (every rounding is), so only the columns between its end points can
//     be crossed, each within a few steps of where the float64 line crosses it (a window wider
//     than the rounding error, see Steps), or every step is tested where that is fewer. Steps go
//     in chunks of 2^20, so memory stays bounded, and a vertex far outside its proposal costs a
//     few steps per column rather than its dense points (the native walk visits every one).
// Boundary hits are counted per (proposal, polygon) row and column-major position (index_add),
// a cumulative sum gives their parity, the polygons of one proposal are OR-ed, and the result is
// transposed to row-major.
//
// The dense points need float64 (slope * t + start + .5, truncated, rounded step by step as the
// host does); a device without float64 (MPS, HPU) rasterizes on the CPU (raster_device). Value
// errors: on the CPU the native messages are thrown; elsewhere kFaultMaskTarget is set in the
// fault word and the proposal's target is 0, as the CUDA kernel does.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "model/ops/detail/mask_raster.h"
#include "model/ops/detail/mask_targets_check.h"
#include "model/ops/implementation.h"
#include "model/ops/portable/portable.h"
#include "model/ops/portable/value_checks.h"

namespace mrcnn::ops::portable {
namespace {

constexpr int64_t kStepChunk = int64_t{1} << 20;  // step pairs tested per pass

// Where the rasterizer runs. Its dense points are float64 expressions rounded step by step as on
// the host: a device with IEEE float64 (the CPU, CUDA and ROCm GPUs) computes them in place;
// MPS, Habana's HPU and most Intel GPUs have no float64, so the CPU rasterizes for them and the
// masks (K x M x M floats) are copied back.
at::Device raster_device(const at::Device& device) {
  return supports_float64(device.type()) ? device : at::Device(at::kCPU);
}

at::Tensor exclusive_cumsum(const at::Tensor& counts) { return counts.cumsum(0) - counts; }

// i repeated counts[i] times, for all i (total = counts.sum()).
at::Tensor owners(const at::Tensor& counts, int64_t total) {
  return at::repeat_interleave(counts, std::optional<int64_t>(total));
}

// One row per (proposal, polygon of its matched instance): proposals in order, then polygons.
struct Rows {
  at::Tensor proposal;  // int64 [R]
  at::Tensor polygon;   // int64 [R]
};

Rows make_rows(const at::Tensor& matched, const at::Tensor& instance_offsets) {
  const at::Tensor first = instance_offsets.index_select(0, matched);
  const at::Tensor count = instance_offsets.index_select(0, matched + 1) - first;
  const int64_t total = count.sum().item<int64_t>();
  Rows r;
  r.proposal = owners(count, total);
  const at::Tensor local = at::arange(total, count.options()) -
                           exclusive_cumsum(count).index_select(0, r.proposal);
  r.polygon = first.index_select(0, r.proposal) + local;
  return r;
}

// Every vertex of every row, in the proposal's frame and upsampled by 5 as the rasterizer takes it.
struct Vertices {
  at::Tensor row;    // int64 [V]
  at::Tensor index;  // int64 [V]: j within its polygon
  at::Tensor next;   // int64 [V]: the vertex edge j ends at (vertex 0 after the last)
  at::Tensor x, y;   // int64 [V]: int(5 * v + .5), 0 where bad
  at::Tensor bad;    // bool [V]: not finite or beyond +-1e8 after crop and scale
};

// boxes: float32 [K, 4]; coordinates float64. Crop and scale in float32 (mask_targets.cpp):
// (float(v) - x1) * float(M / max(x2 - x1, 1)), the ratio computed in double.
Vertices make_vertices(const Rows& rows, const at::Tensor& coords, const at::Tensor& poly_offsets,
                       const at::Tensor& boxes, int64_t m) {
  const at::Tensor begin = poly_offsets.index_select(0, rows.polygon);
  const at::Tensor count = (poly_offsets.index_select(0, rows.polygon + 1) - begin).div(2, "floor");
  const int64_t total = count.sum().item<int64_t>();
  Vertices v;
  v.row = owners(count, total);
  const at::Tensor start = exclusive_cumsum(count).index_select(0, v.row);
  const at::Tensor global = at::arange(total, count.options());
  v.index = global - start;
  v.next = at::where(v.index + 1 == count.index_select(0, v.row), start, global + 1);
  const at::Tensor c = begin.index_select(0, v.row) + 2 * v.index;
  const at::Tensor k = rows.proposal.index_select(0, v.row);
  const at::Tensor corner = boxes.narrow(1, 0, 2);                           // x1, y1
  const at::Tensor size = (boxes.narrow(1, 2, 2) - corner).clamp_min(1.0);  // w, h
  const at::Tensor ratio = (static_cast<double>(m) / size.to(at::kDouble)).to(at::kFloat);
  const at::Tensor xy = at::stack({coords.index_select(0, c), coords.index_select(0, c + 1)}, 1);
  const at::Tensor scaled =
      ((xy.to(at::kFloat) - corner.index_select(0, k)) * ratio.index_select(0, k)).to(at::kDouble);
  v.bad = scaled.isfinite().logical_not().logical_or_(scaled.abs() > raster::kMaxCoord).any(1);
  // raster::upsampled: 5 * v, then + .5, each rounded, truncated toward 0.
  const at::Tensor up = ((scaled.masked_fill(v.bad.unsqueeze(1), 0.0) * 5.0) + 0.5).to(at::kLong);
  v.x = up.select(1, 0);
  v.y = up.select(1, 1);
  return v;
}

// Edge j of a polygon, vertex j to vertex j + 1, as the walk takes it (mask_raster.h make_edge).
struct Edges {
  at::Tensor xs, ys;     // int64: start after the flip
  at::Tensor n;          // int64: max(|dx|, |dy|) steps, n + 1 points
  at::Tensor dy;         // int64: |dy|
  at::Tensor x_major;    // bool: |dx| >= |dy|
  at::Tensor flip;       // bool: walked from the far end
  at::Tensor single;     // bool: dx == dy == 0, one point
  at::Tensor slope;      // float64

  Edges select(const at::Tensor& i) const {
    return {xs.index_select(0, i),      ys.index_select(0, i),   n.index_select(0, i),
            dy.index_select(0, i),      x_major.index_select(0, i),
            flip.index_select(0, i),    single.index_select(0, i),
            slope.index_select(0, i)};
  }
};

Edges make_edges(const Vertices& v) {
  const at::Tensor x1 = v.x.index_select(0, v.next);
  const at::Tensor y1 = v.y.index_select(0, v.next);
  const at::Tensor dx = (x1 - v.x).abs();
  Edges e;
  e.dy = (y1 - v.y).abs();
  e.x_major = dx >= e.dy;
  e.flip = at::where(e.x_major, v.x > x1, v.y > y1);
  e.xs = at::where(e.flip, x1, v.x);
  e.ys = at::where(e.flip, y1, v.y);
  const at::Tensor xe = at::where(e.flip, v.x, x1);
  const at::Tensor ye = at::where(e.flip, v.y, y1);
  e.single = (dx == 0).logical_and_(e.dy == 0);
  e.n = at::maximum(dx, e.dy);
  // (ye - ys) / dx along x, (xe - xs) / dy along y; 0 / 1 for a single point.
  const at::Tensor rise = at::where(e.x_major, ye - e.ys, xe - e.xs);
  e.slope = rise.to(at::kDouble) / e.n.clamp_min(1).to(at::kDouble);
  return e;
}

// The walk's point at step t of each edge (mask_raster.h edge_point, t already flipped): the major
// coordinate start + t, the minor int(slope * t + start + .5) with each operation rounded.
std::pair<at::Tensor, at::Tensor> edge_point(const Edges& e, const at::Tensor& t) {
  const at::Tensor major = t + at::where(e.x_major, e.xs, e.ys);
  const at::Tensor minor_start = at::where(e.x_major, e.ys, e.xs).to(at::kDouble);
  const at::Tensor minor = (((e.slope * t.to(at::kDouble)) + minor_start) + 0.5).to(at::kLong);
  at::Tensor u = at::where(e.x_major, major, minor);
  at::Tensor v = at::where(e.x_major, minor, major);
  return {at::where(e.single, e.xs, u), at::where(e.single, e.ys, v)};
}

// The boundary point that (u, v) makes when visited right after (pu, pv) (mask_raster.h
// boundary_position, the same arithmetic): its column-major position x * m + y, or m * m
// (the sentinel past every pixel) when it makes none; and xi, the x it is tested at (5c + 2 for
// column c).
struct Boundary {
  at::Tensor pos;
  at::Tensor xi;
};

Boundary boundary_position(const at::Tensor& u, const at::Tensor& v, const at::Tensor& pu,
                           const at::Tensor& pv, int64_t m) {
  Boundary b;
  b.xi = at::where(u < pu, u, u - 1);
  const at::Tensor xd = ((b.xi.to(at::kDouble) + 0.5) / 5.0) - 0.5;
  const at::Tensor yd =
      (((at::minimum(v, pv).to(at::kDouble) + 0.5) / 5.0) - 0.5).clamp(0.0, static_cast<double>(m));
  const at::Tensor hit = (u != pu)
                             .logical_and_(b.xi.remainder(5) == 2)
                             .logical_and_(xd.floor() == xd)
                             .logical_and_(xd >= 0.0)
                             .logical_and_(xd <= static_cast<double>(m - 1));
  b.pos = at::where(hit, xd.to(at::kLong) * m + yd.ceil().to(at::kLong), m * m);
  return b;
}

// counts[row, pos] += 1 for each hit (the sentinel column m * m collects the misses).
void count_hits(at::Tensor& counts, const at::Tensor& row, const at::Tensor& pos) {
  const at::Tensor flat = row * counts.size(1) + pos;
  counts.view({-1}).index_add_(0, flat, at::ones(flat.sizes(), counts.options()));
}

// Junctions: the last point of edge j - 1 (step n, or 0 when flipped), then the first of edge j.
void add_junctions(const Edges& e, const Vertices& v, int64_t m, at::Tensor& counts) {
  const at::Tensor zero = at::zeros_like(e.n);
  const auto [fu, fv] = edge_point(e, at::where(e.flip, e.n, zero));  // walk step 0
  const auto [lu, lv] = edge_point(e, at::where(e.flip, zero, e.n));  // walk step n
  const at::Tensor prev = (at::arange(e.n.size(0), e.n.options()) - 1).clamp_min(0);
  const Boundary b =
      boundary_position(fu, fv, lu.index_select(0, prev), lv.index_select(0, prev), m);
  // The walk's first point has no predecessor.
  count_hits(counts, v.row, at::where(v.index > 0, b.pos, m * m));
}

// Which steps (t, t + 1) of each edge are tested. A step's xi lies in [min x, max x - 1] of its
// edge (x is monotone along an edge), so only the columns c in [first, first + columns) with
// xi = 5c + 2 there can be crossed:
//   * along x, column c is crossed at exactly t = 5c + 2 - xs: one step per column;
//   * along y, g(t) = slope * t + xs + .5 (each operation rounded) crosses 5c + 3 near
//     t* = (5c + 2.5 - xs) / slope; its rounding error is below err = 2^-48 (n + |xs| + 5m + 8),
//     which moves the crossing by at most err / |slope| steps, so the window of
//     2 * half + 1 steps around floor(t*), half = 3 + ceil(err / |slope|), holds it. A window
//     keeps only the hit of its own column (windows may overlap). Where the windows would hold
//     more steps than the edge (dy), every step is tested instead ("dense").
struct Steps {
  at::Tensor first;  // int64 [E]: lowest column the edge can cross
  at::Tensor per;    // int64 [E]: steps per column (1 along x, the window along y)
  at::Tensor half;   // int64 [E]: the window's half width (0 along x)
  at::Tensor dense;  // bool [E]: every step tested
  at::Tensor count;  // int64 [E]: steps tested
};

Steps candidate_steps(const Edges& e, int64_t m) {
  const auto [ua, va] = edge_point(e, at::zeros_like(e.n));
  const auto [ub, vb] = edge_point(e, e.n);
  (void)va;
  (void)vb;
  const at::Tensor lo = at::minimum(ua, ub) - 2;
  const at::Tensor c_lo = lo.neg().div(5, "floor").neg().clamp_min(0);  // ceil(lo / 5)
  const at::Tensor c_hi = (at::maximum(ua, ub) - 3).div(5, "floor").clamp_max(m - 1);
  const at::Tensor columns = at::where((c_lo <= c_hi).logical_and_(e.single.logical_not()),
                                       c_hi - c_lo + 1, at::zeros_like(c_lo));
  const at::Tensor n = e.n.to(at::kDouble);
  const at::Tensor err = (n + e.xs.abs().to(at::kDouble) + static_cast<double>(5 * m + 8)) *
                         std::ldexp(1.0, -48);
  const at::Tensor half = (err / e.slope.abs()).ceil().clamp_max(n).to(at::kLong) + 3;
  const at::Tensor window = 2 * half + 1;
  const at::Tensor y_major = e.x_major.logical_not();
  Steps s;
  s.first = c_lo;
  s.dense = y_major.logical_and(columns * window >= e.dy);
  s.per = at::where(y_major.logical_and(s.dense.logical_not()), window, at::ones_like(window));
  s.half = at::where(y_major, half, at::zeros_like(half));
  s.count = at::where(s.dense, at::where(columns > 0, e.dy, columns), columns * s.per);
  return s;
}

// The step index t of candidate `local` of each edge `c` (see Steps).
at::Tensor step_index(const Edges& c, const at::Tensor& column, const at::Tensor& offset,
                      const at::Tensor& half, const at::Tensor& dense, const at::Tensor& local) {
  const at::Tensor along_x = 5 * column + 2 - c.xs;
  const at::Tensor divisor = at::where(c.x_major, at::ones_like(c.slope), c.slope);
  const at::Tensor crossing =
      (((column.to(at::kDouble) * 5.0) + 2.5) - c.xs.to(at::kDouble)) / divisor;
  const at::Tensor around =
      at::minimum(crossing.clamp_min(-1.0), c.n.to(at::kDouble) + 1.0).floor().to(at::kLong) -
      half + offset;
  return at::where(c.x_major, along_x, at::where(dense, local, around));
}

// Tests the candidate steps in chunks: step (t, t + 1) in walk order (t + 1 first when flipped).
void add_steps(const Edges& e, const Vertices& v, int64_t m, at::Tensor& counts) {
  const Steps s = candidate_steps(e, m);
  const at::Tensor ends = s.count.cumsum(0);
  const at::Tensor starts = ends - s.count;
  const int64_t total = ends[-1].item<int64_t>();
  for (int64_t begin = 0; begin < total; begin += kStepChunk) {
    const int64_t end = std::min(total, begin + kStepChunk);
    const at::Tensor id = at::arange(begin, end, ends.options());
    const at::Tensor edge = at::searchsorted(ends, id, /*out_int32=*/false, /*right=*/true);
    const at::Tensor local = id - starts.index_select(0, edge);
    const at::Tensor per = s.per.index_select(0, edge);
    const at::Tensor dense = s.dense.index_select(0, edge);
    const at::Tensor column = s.first.index_select(0, edge) + local.div(per, "floor");
    const Edges c = e.select(edge);
    const at::Tensor t = step_index(c, column, local.remainder(per),
                                    s.half.index_select(0, edge), dense, local);
    const auto [u0, v0] = edge_point(c, t);
    const auto [u1, v1] = edge_point(c, t + 1);
    const Boundary b =
        boundary_position(at::where(c.flip, u0, u1), at::where(c.flip, v0, v1),
                          at::where(c.flip, u1, u0), at::where(c.flip, v1, v0), m);
    // A window step counts for its own column only, and only inside the edge.
    const at::Tensor keep = (t >= 0)
                                .logical_and_(t < c.n)
                                .logical_and_(dense.logical_or(b.xi == 5 * column + 2));
    count_hits(counts, v.row.index_select(0, edge), at::where(keep, b.pos, m * m));
  }
}

// The masks of every row: bool [R, m * m] in column-major order (x * m + y).
at::Tensor rasterize_rows(const Vertices& v, int64_t num_rows, int64_t m) {
  at::Tensor counts = at::zeros({num_rows, m * m + 1}, v.x.options().dtype(at::kInt));
  if (v.x.numel() > 0) {
    const Edges e = make_edges(v);
    add_junctions(e, v, m, counts);
    add_steps(e, v, m, counts);
  }
  return at::cumsum(counts.narrow(1, 0, m * m), 1, at::kInt).bitwise_and_(1).to(at::kBool);
}

// Index and finiteness of each proposal (mask_targets.cpp's checks, in its order): bool [K].
at::Tensor check_proposals(const at::Tensor& matched, const at::Tensor& boxes,
                           int64_t num_instances) {
  const at::Tensor bad_index = (matched < 0).logical_or_(matched >= num_instances);
  const at::Tensor bad = bad_index.logical_or(boxes.isfinite().all(1).logical_not());
  check_values(bad, kFaultMaskTarget, [&](int64_t k) {
    return bad_index[k].item<bool>()
               ? detail::mask_targets_bad_instance(k, matched[k].item<int64_t>(), num_instances)
               : detail::mask_targets_non_finite(k);
  });
  return bad;
}

}  // namespace

at::Tensor mask_targets(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                        const at::Tensor& proposals, int64_t resolution) {
  detail::check_mask_targets_inputs(gt_polygons, matched_gt_index, proposals, resolution);
  const int64_t num = proposals.size(0);
  const int64_t m = resolution;
  const at::Device home = proposals.device();
  if (num == 0) return at::empty({0, m, m}, proposals.options().dtype(at::kFloat));
  const at::Device device = raster_device(home);
  at::Tensor boxes = proposals.to(device, at::kFloat);
  at::Tensor matched = matched_gt_index.to(device, at::kLong);
  const int64_t num_instances = gt_polygons.num_instances();
  // Checked where the proposals are: the CPU throws, another device sets its fault word.
  at::Tensor bad = check_proposals(matched_gt_index.to(home, at::kLong),
                                   proposals.to(home, at::kFloat), num_instances)
                       .to(device);
  if (num_instances == 0) return at::zeros({num, m, m}, proposals.options().dtype(at::kFloat));
  matched = matched.masked_fill(bad, 0);
  boxes = boxes.masked_fill(bad.unsqueeze(1), 0.0f);
  const Rows rows = make_rows(matched, gt_polygons.instance_offsets.to(device));
  const Vertices v = make_vertices(rows, gt_polygons.coords.to(device),
                                   gt_polygons.poly_offsets.to(device), boxes, m);
  if (home.is_cpu()) {
    // The native op refuses the first such vertex (std::invalid_argument), proposal by proposal.
    const at::Tensor where = v.bad.nonzero();
    if (where.numel() > 0) {
      throw std::invalid_argument(
          detail::mask_targets_bad_vertex(v.index[where[0][0].item<int64_t>()].item<int64_t>()));
    }
  } else {
    const at::Tensor vertex_proposal = rows.proposal.index_select(0, v.row);
    const at::Tensor bad_vertices =
        at::zeros({num}, matched.options()).index_add_(0, vertex_proposal, v.bad.to(at::kLong)) > 0;
    check_values(bad_vertices.to(home), kFaultMaskTarget, [](int64_t) { return std::string(); });
    bad = bad.logical_or(bad_vertices);
  }
  const at::Tensor polygons = rasterize_rows(v, rows.proposal.size(0), m);
  // OR over the polygons of each proposal, then row-major.
  const at::Tensor any = at::zeros({num, m * m}, matched.options().dtype(at::kInt))
                             .index_add_(0, rows.proposal, polygons.to(at::kInt));
  const at::Tensor out = (any > 0).logical_and_(bad.logical_not().unsqueeze(1));
  return out.view({num, m, m}).transpose(1, 2).to(at::kFloat).contiguous().to(home);
}

namespace {

at::Tensor mask_targets_op(const at::Tensor& coords, const at::Tensor& poly_offsets,
                           const at::Tensor& instance_offsets, const at::Tensor& matched_gt_index,
                           const at::Tensor& proposals, int64_t resolution) {
  try {
    return portable::mask_targets(PolygonList{coords, poly_offsets, instance_offsets},
                                  matched_gt_index, proposals, resolution);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK(false, "mrcnn_portable::mask_targets: ", e.what());
  }
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mrcnn_portable, m) {
  // A PolygonList spelled out as its three tensors (mrcnn::mask_targets' schema).
  m.def(
      "mask_targets(Tensor coords, Tensor poly_offsets, Tensor instance_offsets, "
      "Tensor matched_gt_index, Tensor proposals, int resolution=28) -> Tensor",
      TORCH_FN(mask_targets_op));
}

}  // namespace mrcnn::ops::portable
