// pycocotools' polygon rasterizer (maskApi.c, rleFrPoly) restated point by point, so that a GPU
// kernel can visit a polygon's points in parallel and give the same mask bit for bit; the CPU
// kernel walks the same points one after another (for_each_boundary). eval/ keeps its own copy
// of the reference for COCO evaluation (model/ depends on LibTorch alone); both are checked
// against pycocotools.
//
// The rasterizer scales the vertices by 5 (rounded to integers), walks every edge through its
// dense integer points, and turns some points into boundary points: those where the walk crosses
// into a new column at an x that maps back to a whole pixel column. A pixel at column-major
// position x * h + y is inside the polygon exactly when an odd number of boundary points lie at or
// before that position (the RLE the reference builds from the sorted points says the same; runs
// of length 0, from coinciding points, cancel in pairs).
//
// Whether a point is a boundary point depends only on the point and the point visited just before
// it; the point before the first one of edge j is the last one of edge j - 1 (none before edge 0's
// first). So each point is tested on its own, in any order, and the parities are summed with XOR.
//
// Floating point follows the host code operation by operation: under nvcc a * b + c is computed
// as two rounded operations (nvcc would otherwise fuse it into one FMA and round once).
//
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MRCNN_HOST_DEVICE __host__ __device__
#else
#define MRCNN_HOST_DEVICE
#endif

namespace mrcnn::ops::raster {

// a * b + c with both roundings, on the host and on the device.
MRCNN_HOST_DEVICE inline double mul_add(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  volatile double product = a * b;  // kept apart from the sum where a host compiler fuses by default
  return product + c;
#endif
}

// Vertices beyond this magnitude are refused (5 * v must stay in int range).
inline constexpr double kMaxCoord = 1e8;

// The upsampled integer coordinate of a vertex: int(5 * v + .5), truncated toward 0.
MRCNN_HOST_DEVICE inline int upsampled(double v) { return static_cast<int>(mul_add(5.0, v, .5)); }

// One edge from (x0, y0) to (x1, y1) in upsampled coordinates, as the rasterizer walks it.
struct Edge {
  int xs, ys;   // start after the flip
  int dx, dy;   // |x1 - x0|, |y1 - y0|
  bool flip;    // walked from the far end
  double slope;
  int points;   // dense points visited: max(dx, dy) + 1
};

MRCNN_HOST_DEVICE inline Edge make_edge(int x0, int y0, int x1, int y1) {
  Edge e;
  e.dx = x1 > x0 ? x1 - x0 : x0 - x1;
  e.dy = y0 > y1 ? y0 - y1 : y1 - y0;
  e.flip = (e.dx >= e.dy && x0 > x1) || (e.dx < e.dy && y0 > y1);
  e.xs = e.flip ? x1 : x0;
  e.ys = e.flip ? y1 : y0;
  const int xe = e.flip ? x0 : x1, ye = e.flip ? y0 : y1;
  e.slope = e.dx == 0 && e.dy == 0 ? 0.0
            : e.dx >= e.dy         ? static_cast<double>(ye - e.ys) / e.dx
                                   : static_cast<double>(xe - e.xs) / e.dy;
  e.points = (e.dx >= e.dy ? e.dx : e.dy) + 1;
  return e;
}

// The d-th point (0 <= d < e.points) the walk visits on edge e.
MRCNN_HOST_DEVICE inline void edge_point(const Edge& e, int d, int& u, int& v) {
  if (e.dx == 0 && e.dy == 0) {
    u = e.xs;
    v = e.ys;
  } else if (e.dx >= e.dy) {
    const int t = e.flip ? e.dx - d : d;
    u = t + e.xs;
    v = static_cast<int>(mul_add(e.slope, t, e.ys) + .5);
  } else {
    const int t = e.flip ? e.dy - d : d;
    u = static_cast<int>(mul_add(e.slope, t, e.xs) + .5);
    v = t + e.ys;
  }
}

// The column-major position x * h + y (in [0, h * w]) of the boundary point that point (u, v),
// visited right after (pu, pv), makes in an h x w mask; -1 when it makes none.
MRCNN_HOST_DEVICE inline int64_t boundary_position(int u, int v, int pu, int pv, uint32_t h, uint32_t w) {
  if (u == pu) return -1;
  const int xi_raw = u < pu ? u : u - 1;
  if (((xi_raw % 5) + 5) % 5 != 2) return -1;  // (xi + .5) / 5 - .5 is whole only for xi = 5n + 2
  const double xd = (static_cast<double>(xi_raw) + .5) / 5.0 - .5;
  const double w_last = static_cast<double>(static_cast<uint64_t>(w) - 1);
  if (floor(xd) != xd || xd < 0 || xd > w_last) return -1;
  double yd = (static_cast<double>(v < pv ? v : pv) + .5) / 5.0 - .5;
  if (yd < 0) yd = 0;
  else if (yd > h) yd = h;
  yd = ceil(yd);
  return static_cast<int64_t>(xd) * h + static_cast<int64_t>(yd);
}

// The boundary position made by point d of edge j of a polygon of k >= 1 vertices, or -1.
// vertex(i, x, y) gives upsampled vertex i for i in [0, k) (the edge k - 1 closes on vertex 0).
template <class Vertex>
MRCNN_HOST_DEVICE inline int64_t polygon_boundary(const Vertex& vertex, int k, int j, int d, uint32_t h,
                                                  uint32_t w) {
  int x0, y0, x1, y1;
  vertex(j, x0, y0);
  vertex(j + 1 == k ? 0 : j + 1, x1, y1);
  const Edge e = make_edge(x0, y0, x1, y1);
  int u, v, pu, pv;
  edge_point(e, d, u, v);
  if (d > 0) {
    edge_point(e, d - 1, pu, pv);
  } else if (j > 0) {
    int xp, yp;
    vertex(j - 1, xp, yp);
    const Edge prev = make_edge(xp, yp, x0, y0);
    edge_point(prev, prev.points - 1, pu, pv);
  } else {
    return -1;  // the walk's first point has no predecessor
  }
  return boundary_position(u, v, pu, pv, h, w);
}

// The whole walk on one thread (the CPU kernel): f(pos) for every boundary position of the polygon
// of k upsampled vertices that vertex(i, x, y) gives, in the order the reference visits its dense
// points. The same positions as polygon_boundary over every (j, d), each point computed once.
template <class Vertex, class F>
inline void for_each_boundary(const Vertex& vertex, int k, uint32_t h, uint32_t w, F&& f) {
  if (k <= 0 || h == 0 || w == 0) return;
  bool have_prev = false;
  int pu = 0, pv = 0, x0, y0;
  vertex(0, x0, y0);
  for (int j = 0; j < k; ++j) {
    int x1, y1;
    vertex(j + 1 == k ? 0 : j + 1, x1, y1);
    const Edge e = make_edge(x0, y0, x1, y1);
    for (int d = 0; d < e.points; ++d) {
      int u, v;
      edge_point(e, d, u, v);
      if (have_prev) {
        const int64_t pos = boundary_position(u, v, pu, pv, h, w);
        if (pos >= 0) f(pos);
      }
      pu = u;
      pv = v;
      have_prev = true;
    }
    x0 = x1;
    y0 = y1;
  }
}

}  // namespace mrcnn::ops::raster
