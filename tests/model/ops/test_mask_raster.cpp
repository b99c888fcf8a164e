// The point-by-point form of the polygon rasterizer (model/ops/detail/mask_raster.h), which the CUDA
// mask-target kernel runs with one thread per point, checked here on the host: every point tested
// on its own with polygon_boundary, parities toggled and summed in column-major order with XOR,
// polygons OR-ed, gives exactly the CPU mask targets (the same points walked one after another),
// and both give exactly eval's rasterizer (eval/rle.h, pycocotools-exact; written apart from
// model/ops), as pycocotools does in test_mask_targets.py.
//
// Polygons are given in the frame of the proposal [0, 0, M, M], where cropping and scaling are
// the identity for float32 coordinates, so the mask targets are the rasterized polygons.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <vector>

#include "eval/rle.h"
#include "model/ops/detail/mask_raster.h"
#include "model/ops/ops.h"

namespace mrcnn::ops {
namespace {

// What the CUDA kernel computes for one instance, in the same steps, on one thread.
std::vector<float> rasterize_point_by_point(const std::vector<std::vector<double>>& polygons, int m) {
  const auto side = static_cast<uint32_t>(m);
  std::vector<float> out(static_cast<size_t>(m * m), 0.f);
  for (const auto& poly : polygons) {
    const int k = static_cast<int>(poly.size() / 2);
    if (k == 0) continue;
    auto vertex = [&](int i, int& x, int& y) {
      x = raster::upsampled(poly[2 * i]);
      y = raster::upsampled(poly[2 * i + 1]);
    };
    std::vector<uint8_t> toggles(static_cast<size_t>(m * m + 1), 0);
    for (int j = 0; j < k; ++j) {
      int x0, y0, x1, y1;
      vertex(j, x0, y0);
      vertex(j + 1 == k ? 0 : j + 1, x1, y1);
      const int points = raster::make_edge(x0, y0, x1, y1).points;
      for (int d = 0; d < points; ++d) {
        const int64_t pos = raster::polygon_boundary(vertex, k, j, d, side, side);
        if (pos >= 0) toggles[static_cast<size_t>(pos)] ^= 1;
      }
    }
    uint8_t parity = 0;
    for (int pos = 0; pos < m * m; ++pos) {
      parity ^= toggles[static_cast<size_t>(pos)];
      if (parity) out[static_cast<size_t>((pos % m) * m + pos / m)] = 1.f;
    }
  }
  return out;
}

at::Tensor cpu_mask_targets(const std::vector<std::vector<double>>& polygons, int m) {
  std::vector<double> coords;
  std::vector<int64_t> offsets{0};
  for (const auto& p : polygons) {
    coords.insert(coords.end(), p.begin(), p.end());
    offsets.push_back(static_cast<int64_t>(coords.size()));
  }
  const PolygonList list{torch::tensor(coords, at::kDouble), torch::tensor(offsets, at::kLong),
                         torch::tensor({int64_t{0}, static_cast<int64_t>(polygons.size())}, at::kLong)};
  const float fm = static_cast<float>(m);
  return mask_targets(list, torch::zeros({1}, at::kLong), torch::tensor({{0.f, 0.f, fm, fm}}), m)[0];
}

TEST(MaskRaster, PointByPointFormEqualsTheCpuRasterizer) {
  std::mt19937 rng(11);
  int compared = 0, nonempty = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int m = trial % 3 == 0 ? 28 : 5 + trial % 23;
    std::uniform_int_distribution<int> count(1, trial % 5 == 0 ? 3 : 1);
    std::uniform_int_distribution<int> verts(1, 12);
    // Inside the box, partly outside, far outside; whole, quarter and arbitrary float positions.
    const double lo = trial % 4 == 0 ? -3.0 * m : -2.0, hi = trial % 4 == 0 ? 4.0 * m : m + 2.0;
    std::uniform_real_distribution<double> coord(lo, hi);
    std::vector<std::vector<double>> polygons(static_cast<size_t>(count(rng)));
    for (auto& p : polygons) {
      const int k = verts(rng);
      for (int i = 0; i < 2 * k; ++i) {
        double v = coord(rng);
        if (trial % 3 == 1) v = std::round(v * 4) / 4;       // on the grid: ties in the rounding
        v = static_cast<double>(static_cast<float>(v));      // float32, as the op crops in float32
        p.push_back(v);
      }
      if (trial % 7 == 0 && k > 2) {  // a repeated vertex: a zero-length edge
        p[2] = p[0];
        p[3] = p[1];
      }
    }
    const at::Tensor expected = cpu_mask_targets(polygons, m);
    const std::vector<float> got = rasterize_point_by_point(polygons, m);
    const at::Tensor g = torch::from_blob(const_cast<float*>(got.data()), {m, m}, at::kFloat);
    ASSERT_TRUE(at::equal(g, expected)) << "trial " << trial << " (M = " << m << ")";
    std::vector<double> coords;
    std::vector<int64_t> offsets{0};
    for (const auto& p : polygons) {
      coords.insert(coords.end(), p.begin(), p.end());
      offsets.push_back(static_cast<int64_t>(coords.size()));
    }
    std::vector<uint8_t> reference(static_cast<size_t>(m * m));
    eval::rasterize_polygons(coords.data(), offsets.data(), polygons.size(), static_cast<uint32_t>(m),
                             static_cast<uint32_t>(m), reference.data());
    const at::Tensor r = torch::from_blob(reference.data(), {m, m}, at::kByte).to(at::kFloat);
    ASSERT_TRUE(at::equal(r, expected)) << "trial " << trial << " (M = " << m << "): eval's rasterizer differs";
    ++compared;
    nonempty += expected.sum().item<float>() > 0;
  }
  EXPECT_EQ(compared, 600);
  EXPECT_GT(nonempty, 300);  // the comparison is not one of empty masks
}

TEST(MaskRaster, EdgeWalkVisitsTheEndpointsInTheRasterizersOrder) {
  // A shallow edge walked backwards (x0 > x1): the walk starts at the far end's t, so its first
  // point is (x0, y0) and its last (x1, y1), as the host loop visits them.
  const raster::Edge e = raster::make_edge(20, 3, 5, 7);
  EXPECT_TRUE(e.flip);
  EXPECT_EQ(e.points, 16);
  int u, v;
  raster::edge_point(e, 0, u, v);
  EXPECT_EQ(u, 20);
  EXPECT_EQ(v, 3);
  raster::edge_point(e, e.points - 1, u, v);
  EXPECT_EQ(u, 5);
  EXPECT_EQ(v, 7);
  // A repeated vertex is one point.
  EXPECT_EQ(raster::make_edge(4, 4, 4, 4).points, 1);
  // 5 * v + .5 truncated toward 0, as the reference's int cast.
  EXPECT_EQ(raster::upsampled(-0.15), 0);  // int(-0.25): 0, where floor would give -1
  EXPECT_EQ(raster::upsampled(1.5), 8);
}

}  // namespace
}  // namespace mrcnn::ops
