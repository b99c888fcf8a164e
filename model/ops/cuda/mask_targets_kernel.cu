// CUDA kernel of mrcnn::mask_targets: the polygons of each positive proposal's instance cropped,
// scaled and rasterized at M x M on the device, bit-identical to the CPU op. One block per
// proposal:
//   1. its threads test the instance's vertices (a fault, and a zero target, if one is invalid);
//   2. per polygon, every dense point of every edge is tested on its own (mask_raster.h) and each
//      boundary point toggles its column-major position in a parity buffer;
//   3. a block-wide prefix XOR over the buffer gives the polygon's mask, OR-ed into the target.
// Proposals and matched indices stay on the device; the polygons (host data) are copied there
// without blocking. Invalid inputs set kFaultMaskTarget in the fault word (device_faults.h)
// instead of throwing, and that proposal's target is 0.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <torch/library.h>

#include <cstdint>
#include <stdexcept>

#include "model/ops/device_faults.h"
#include "model/ops/host_copy.h"
#include "model/ops/detail/mask_raster.h"
#include "model/ops/detail/mask_targets_check.h"
#include "model/ops/polygon_list.h"

namespace mrcnn::ops {
namespace {

constexpr int kThreads = 256;

// Upsampled vertex i of a polygon in the proposal's frame, computed as the CPU op does: float32
// crop and scale, (v - x1) * rw (a subtraction then a product: nothing to fuse), then to float64
// for the rasterizer.
struct FrameVertex {
  const double* xy;
  float x1, y1, rw, rh;
  __host__ __device__ float x_at(int64_t c) const { return (static_cast<float>(xy[c]) - x1) * rw; }
  __host__ __device__ float y_at(int64_t c) const { return (static_cast<float>(xy[c]) - y1) * rh; }
  __host__ __device__ void operator()(int i, int& x, int& y) const {
    x = raster::upsampled(static_cast<double>(x_at(2 * i)));
    y = raster::upsampled(static_cast<double>(y_at(2 * i + 1)));
  }
};

__global__ void mask_targets_kernel(const double* coords, const int64_t* poly_offsets,
                                    const int64_t* instance_offsets, int64_t num_instances,
                                    const int64_t* matched, const float* boxes, int m,
                                    int* toggles_all, float* out_all, int* fault) {
  const int64_t k = blockIdx.x;
  const int cells = m * m;
  float* out = out_all + k * cells;
  int* toggles = toggles_all + k * (cells + 1);
  for (int i = threadIdx.x; i < cells; i += blockDim.x) out[i] = 0.f;

  const float* b = boxes + 4 * k;
  const int64_t inst = matched[k];
  // The same values for every thread: the block returns as one.
  if (!(isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(b[3])) || inst < 0 ||
      inst >= num_instances) {
    if (threadIdx.x == 0) atomicOr(fault, kFaultMaskTarget);
    return;
  }
  // Polygons.crop: w = max(x2 - x1, 1) in float32; resize: float(M) / w in float64, to float32.
  const float w = fmaxf(b[2] - b[0], 1.0f);
  const float h = fmaxf(b[3] - b[1], 1.0f);
  const FrameVertex frame{coords, b[0], b[1], static_cast<float>(static_cast<double>(m) / static_cast<double>(w)),
                          static_cast<float>(static_cast<double>(m) / static_cast<double>(h))};
  // Polygons have even lengths (checked on the host): coordinate c is an x exactly when c is even.
  const int64_t c0 = poly_offsets[instance_offsets[inst]], c1 = poly_offsets[instance_offsets[inst + 1]];
  int bad = 0;
  for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    const double v = static_cast<double>(c % 2 == 0 ? frame.x_at(c) : frame.y_at(c));
    bad |= !isfinite(v) || fabs(v) > raster::kMaxCoord;
  }
  if (__syncthreads_or(bad)) {
    if (threadIdx.x == 0) atomicOr(fault, kFaultMaskTarget);
    return;
  }

  __shared__ int carry[kThreads];
  const auto side = static_cast<uint32_t>(m);
  const int chunk = (cells + kThreads - 1) / kThreads;
  const int begin = min(cells, static_cast<int>(threadIdx.x) * chunk), end = min(cells, begin + chunk);
  for (int64_t p = instance_offsets[inst]; p < instance_offsets[inst + 1]; ++p) {
    const int n = static_cast<int>((poly_offsets[p + 1] - poly_offsets[p]) / 2);
    if (n == 0) continue;
    FrameVertex vertex = frame;
    vertex.xy = coords + poly_offsets[p];
    for (int i = threadIdx.x; i <= cells; i += blockDim.x) toggles[i] = 0;
    __syncthreads();
    for (int j = 0; j < n; ++j) {
      int x0, y0, x1, y1;
      vertex(j, x0, y0);
      vertex(j + 1 == n ? 0 : j + 1, x1, y1);
      const int points = raster::make_edge(x0, y0, x1, y1).points;
      for (int d = threadIdx.x; d < points; d += blockDim.x) {
        const int64_t pos = raster::polygon_boundary(vertex, n, j, d, side, side);
        if (pos >= 0 && pos < cells) atomicXor(toggles + pos, 1);
      }
    }
    __syncthreads();
    // Prefix XOR in column-major order: each thread's chunk, then the chunks' running parity.
    int parity = 0;
    for (int i = begin; i < end; ++i) parity ^= toggles[i];
    carry[threadIdx.x] = parity;
    __syncthreads();
    if (threadIdx.x == 0) {
      int run = 0;
      for (int t = 0; t < kThreads; ++t) {
        const int mine = carry[t];
        carry[t] = run;
        run ^= mine;
      }
    }
    __syncthreads();
    parity = carry[threadIdx.x];
    for (int i = begin; i < end; ++i) {
      parity ^= toggles[i];
      if (parity) out[(i % m) * m + i / m] = 1.f;
    }
    __syncthreads();  // the buffers are reused by the next polygon
  }
}

at::Tensor mask_targets_cuda(const PolygonList& gt_polygons, const at::Tensor& matched_gt_index,
                             const at::Tensor& proposals, int64_t resolution) {
  const c10::cuda::CUDAGuard guard(proposals.device());
  const int64_t num = proposals.size(0);
  const int m = static_cast<int>(resolution);
  at::Tensor out = at::empty({num, resolution, resolution}, proposals.options().dtype(at::kFloat));
  if (num == 0) return out;
  const c10::Device dev = proposals.device();
  const at::Tensor coords = copy_to_device_async(gt_polygons.coords.contiguous(), dev);
  const at::Tensor poly_off = copy_to_device_async(gt_polygons.poly_offsets.contiguous(), dev);
  const at::Tensor inst_off = copy_to_device_async(gt_polygons.instance_offsets.contiguous(), dev);
  const at::Tensor matched = (matched_gt_index.is_cuda() ? matched_gt_index
                                                         : copy_to_device_async(matched_gt_index, dev))
                                 .to(dev, at::kLong)
                                 .contiguous();
  const at::Tensor boxes = proposals.to(at::kFloat).contiguous();
  at::Tensor toggles = at::empty({num, resolution * resolution + 1}, proposals.options().dtype(at::kInt));
  mask_targets_kernel<<<static_cast<unsigned>(num), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      coords.const_data_ptr<double>(), poly_off.const_data_ptr<int64_t>(), inst_off.const_data_ptr<int64_t>(),
      gt_polygons.num_instances(), matched.const_data_ptr<int64_t>(), boxes.const_data_ptr<float>(), m,
      toggles.mutable_data_ptr<int>(), out.mutable_data_ptr<float>(),
      device_fault_word(dev).mutable_data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// The dispatcher's CUDA kernel: the checks every implementation makes (detail/), then the
// polygons, host data, copied over.
at::Tensor mask_targets_cuda_op(const at::Tensor& coords, const at::Tensor& poly_offsets,
                                const at::Tensor& instance_offsets, const at::Tensor& matched_gt_index,
                                const at::Tensor& proposals, int64_t resolution) {
  const PolygonList polygons{coords, poly_offsets, instance_offsets};
  detail::check_mask_targets_inputs(polygons, matched_gt_index, proposals, resolution);  // std::invalid_argument
  TORCH_CHECK(proposals.is_cuda(), "mrcnn::mask_targets: proposals on ", proposals.device(),
              " with another argument on a GPU: the proposals' device runs the op");
  // The polygons' offsets are host data, checked above; values on the device (a fault, not a throw).
  TORCH_CHECK(coords.is_cpu() && poly_offsets.is_cpu() && instance_offsets.is_cpu(),
              "mrcnn::mask_targets: the PolygonList must be on the host");
  return mask_targets_cuda(polygons, matched_gt_index, proposals, resolution);
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) { m.impl("mask_targets", TORCH_FN(mask_targets_cuda_op)); }

}  // namespace mrcnn::ops
