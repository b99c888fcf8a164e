// mask_targets on the CPU: the MLPerf reference's polygon crop -> scale -> pycocotools
// rasterization, parallel over proposals. Rasterization is detail/mask_raster.h's pycocotools-exact
// walk, one point after another, and the inside runs filled between the sorted boundary positions.
// The CUDA kernel (cuda/mask_targets_kernel.cu) gives the same masks bit for bit.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/ops/detail/mask_raster.h"
#include "model/ops/detail/mask_targets_check.h"
#include "model/ops/polygon_list.h"

namespace mrcnn::ops {

namespace {

// One proposal's polygons in its M x M frame, upsampled for the rasterizer: polygon p's vertices
// are xy[offsets[p] .. offsets[p + 1]) = x0, y0, x1, y1, ... Reused from proposal to proposal.
struct FramePolygons {
  std::vector<int> xy;
  std::vector<int64_t> offsets;
};

// The reference's crop and scale (float32) of polygons [p_begin, p_end) into the frame of box
// `b`, then the rasterizer's upsampling. Throws std::invalid_argument on a vertex that is not
// finite or beyond +-1e8 in the frame, naming its place in its polygon.
void to_frame(const double* xy, const int64_t* po, int64_t p_begin, int64_t p_end, const float* b,
              int64_t m_size, FramePolygons& out) {
  // Polygons.crop: w, h = box[2] - box[0], box[3] - box[1]; w = max(w, 1) (float32).
  const float w = std::max(b[2] - b[0], 1.0f);
  const float h = std::max(b[3] - b[1], 1.0f);
  // Polygons.resize((M, M)): ratio = float(M) / float(w) in double, applied to the float32
  // coordinates as a float32 multiply.
  const float rw = static_cast<float>(static_cast<double>(m_size) / static_cast<double>(w));
  const float rh = static_cast<float>(static_cast<double>(m_size) / static_cast<double>(h));
  out.xy.clear();
  out.offsets.assign(1, 0);
  for (int64_t p = p_begin; p < p_end; ++p) {
    for (int64_t c = po[p]; c < po[p + 1]; c += 2) {
      const double x = static_cast<float>((static_cast<float>(xy[c]) - b[0]) * rw);
      const double y = static_cast<float>((static_cast<float>(xy[c + 1]) - b[1]) * rh);
      if (!std::isfinite(x) || !std::isfinite(y) || std::fabs(x) > raster::kMaxCoord ||
          std::fabs(y) > raster::kMaxCoord) {
        throw std::invalid_argument(detail::mask_targets_bad_vertex((c - po[p]) / 2));
      }
      out.xy.push_back(raster::upsampled(x));
      out.xy.push_back(raster::upsampled(y));
    }
    out.offsets.push_back(static_cast<int64_t>(out.xy.size()));
  }
}

// `t` as a contiguous CPU tensor of `dtype`; `t` itself, with no operator call, where it is one.
at::Tensor host_contiguous(const at::Tensor& t, at::ScalarType dtype) {
  if (t.is_cpu() && t.scalar_type() == dtype && t.is_contiguous()) return t;
  return t.to(at::kCPU, dtype).contiguous();
}

// Sets the pixels at column-major positions [begin, end) of the row-major m x m `out` to 1.
void fill_run(int64_t begin, int64_t end, int64_t m, float* out) {
  int64_t x = begin / m, y = begin - x * m;
  for (int64_t pos = begin; pos < end; ++pos) {
    out[y * m + x] = 1.0f;
    if (++y == m) {
      y = 0;
      ++x;
    }
  }
}

// The union of the frame's polygons as 0/1 into the row-major m x m `out`. A pixel is inside a
// polygon when an odd number of its boundary positions lie at or before the pixel's column-major
// position (mask_raster.h): the runs between the sorted positions, every other one inside.
// `bounds` is scratch memory.
void rasterize_union(const FramePolygons& f, int64_t m, std::vector<int64_t>& bounds, float* out) {
  const auto side = static_cast<uint32_t>(m);
  std::fill(out, out + m * m, 0.0f);
  for (size_t p = 0; p + 1 < f.offsets.size(); ++p) {
    const int* v = f.xy.data() + f.offsets[p];
    const int k = static_cast<int>((f.offsets[p + 1] - f.offsets[p]) / 2);
    auto vertex = [v](int i, int& x, int& y) {
      x = v[2 * i];
      y = v[2 * i + 1];
    };
    bounds.clear();
    raster::for_each_boundary(vertex, k, side, side, [&](int64_t pos) { bounds.push_back(pos); });
    std::sort(bounds.begin(), bounds.end());
    bounds.push_back(m * m);  // an odd count: inside to the last pixel
    for (size_t i = 0; i + 1 < bounds.size(); i += 2) fill_run(bounds[i], bounds[i + 1], m, out);
  }
}


at::Tensor mask_targets_cpu(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                            const at::Tensor& proposals, int64_t resolution) {
  detail::check_mask_targets_inputs(gt_polygons, matched_gt_index, proposals, resolution);
  const int64_t num = proposals.size(0);
  const int64_t m_size = resolution;
  at::Tensor out = at::empty({num, m_size, m_size}, at::TensorOptions().dtype(at::kFloat));
  // Here on the CPU: no copy back.
  if (num == 0) return out;

  // The reference keeps polygons and proposals in float32.
  const at::Tensor boxes = host_contiguous(proposals, at::kFloat);
  const at::Tensor matched = host_contiguous(matched_gt_index, at::kLong);
  const at::Tensor coords = host_contiguous(gt_polygons.coords, at::kDouble);
  const at::Tensor poly_off = host_contiguous(gt_polygons.poly_offsets, at::kLong);
  const at::Tensor inst_off = host_contiguous(gt_polygons.instance_offsets, at::kLong);
  const double* xy = coords.const_data_ptr<double>();
  const int64_t* po = poly_off.const_data_ptr<int64_t>();
  const int64_t* io = inst_off.const_data_ptr<int64_t>();
  const float* bx = boxes.const_data_ptr<float>();
  const int64_t* mi = matched.const_data_ptr<int64_t>();
  const int64_t num_instances = gt_polygons.num_instances();

  for (int64_t k = 0; k < num; ++k) {
    TORCH_CHECK(mi[k] >= 0 && mi[k] < num_instances,
                detail::mask_targets_bad_instance(k, mi[k], num_instances));
    for (int j = 0; j < 4; ++j) {
      TORCH_CHECK(std::isfinite(bx[4 * k + j]), detail::mask_targets_non_finite(k));
    }
  }
  float* o = out.mutable_data_ptr<float>();
  at::parallel_for(0, num, 8, [&](int64_t k0, int64_t k1) {
    FramePolygons frame;
    std::vector<int64_t> bounds;
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t inst = mi[k];
      to_frame(xy, po, io[inst], io[inst + 1], bx + 4 * k, m_size, frame);
      rasterize_union(frame, m_size, bounds, o + k * m_size * m_size);
    }
  });
  return out;
}

// A bad polygon or vertex is std::invalid_argument, as from the portable op (Python: ValueError).
at::Tensor mask_targets_kernel(const at::Tensor& coords, const at::Tensor& poly_offsets,
                               const at::Tensor& instance_offsets, const at::Tensor& matched_gt_index,
                               const at::Tensor& proposals, int64_t resolution) {
  return mask_targets_cpu(PolygonList{coords, poly_offsets, instance_offsets}, matched_gt_index, proposals, resolution);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) { m.impl("mask_targets", TORCH_FN(mask_targets_kernel)); }

}  // namespace mrcnn::ops
