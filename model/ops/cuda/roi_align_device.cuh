// Device code shared by the CUDA RoIAlign kernels (single and multi-level): per-RoI geometry,
// bilinear sampling, the forward kernel, the atomic backward and the deterministic (gather)
// backward. Arithmetic follows torchvision's CUDA kernel expression for expression.
//
// The forward reads features of a storage type T and computes in C = at::opmath_type<T>: T itself
// for float32/float64, float32 for float16/bfloat16 features (float32 RoIs, each value widened as
// it is read, one rounding to T at the end; no float32 copy of the maps). The backward kernels
// run in float32/float64 only: the ops accumulate a reduced-precision gradient in float32.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cuda/Atomic.cuh>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <type_traits>

#include "model/ops/cuda/cuda_helpers.h"
#include "model/ops/device_faults.h"

namespace mrcnn::ops::cuda {

inline constexpr int kMaxLevels = 8;

// One feature level as the kernels see it: any strides (NCHW or channels-last).
template <typename T>
struct LevelView {
  T* data = nullptr;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;
  int height = 0;
  int width = 0;
  float spatial_scale = 1.f;  // converted to T at use, as torchvision converts the double scale
};

template <typename T>
struct LevelViews {
  LevelView<T> level[kMaxLevels];
  int count = 0;
  int batch_size = 0;      // images in the features: rois[:, 0] must be in [0, batch_size)
  int* fault = nullptr;    // the device's fault word (device_faults.h)
};

// Whether RoI k can be computed: its batch index names an image (a whole number in
// [0, batch_size); NaN fails) and its level is one of the views. Otherwise the fault is recorded
// and the caller skips the RoI, so that nothing is read or written outside the features.
template <typename T>
__device__ inline bool roi_in_range(const T* roi, int lvl, int level_count, int batch_size,
                                    int* fault) {
  const T b = roi[0];
  if (!(b >= static_cast<T>(0) && b < static_cast<T>(batch_size) && b == floor(b))) {
    atomicOr(fault, kFaultRoiBatchIndex);
    return false;
  }
  if (!(isfinite(roi[1]) && isfinite(roi[2]) && isfinite(roi[3]) && isfinite(roi[4]))) {
    atomicOr(fault, kFaultRoiBox);
    return false;
  }
  if (lvl < 0 || lvl >= level_count) {
    atomicOr(fault, kFaultRoiLevel);
    return false;
  }
  return true;
}

// Geometry of one RoI on its level.
template <typename T>
struct RoiGeometry {
  int batch;
  T start_h, start_w;
  T bin_h, bin_w;
  T roi_h;  // after the >= 1 forcing of aligned=false
  int grid_h, grid_w;
  bool too_large;  // a sampling grid over 2^20 per bin side (the CPU kernel refuses it too)
};

template <typename T>
__device__ inline RoiGeometry<T> roi_geometry(const T* roi, T spatial_scale, int pooled_height,
                                              int pooled_width, int sampling_ratio, bool aligned) {
  RoiGeometry<T> g;
  g.batch = static_cast<int>(roi[0]);
  // Do not round: this implementation detail is critical (torchvision).
  const T offset = aligned ? static_cast<T>(0.5) : static_cast<T>(0.0);
  // Rounded as the CPU rounds: a fused multiply-add here could move the adaptive grid's ceil.
  const T start_w = rn_sub(rn_mul(roi[1], spatial_scale), offset);
  const T start_h = rn_sub(rn_mul(roi[2], spatial_scale), offset);
  const T end_w = rn_sub(rn_mul(roi[3], spatial_scale), offset);
  const T end_h = rn_sub(rn_mul(roi[4], spatial_scale), offset);
  T roi_w = rn_sub(end_w, start_w);
  T roi_h = rn_sub(end_h, start_h);
  if (!aligned) {
    roi_w = roi_w > static_cast<T>(1) ? roi_w : static_cast<T>(1);
    roi_h = roi_h > static_cast<T>(1) ? roi_h : static_cast<T>(1);
  }
  g.start_h = start_h;
  g.start_w = start_w;
  g.roi_h = roi_h;
  g.bin_h = roi_h / static_cast<T>(pooled_height);
  g.bin_w = roi_w / static_cast<T>(pooled_width);
  // The grid in T first: converting a huge value to int would saturate (or be undefined).
  const T gh = sampling_ratio > 0 ? static_cast<T>(sampling_ratio)
                                  : ceil(roi_h / static_cast<T>(pooled_height));
  const T gw = sampling_ratio > 0 ? static_cast<T>(sampling_ratio)
                                  : ceil(roi_w / static_cast<T>(pooled_width));
  constexpr T kMaxGrid = static_cast<T>(1 << 20);
  g.too_large = gh > kMaxGrid || gw > kMaxGrid;
  g.grid_h = g.too_large || !(gh > 0) ? 0 : static_cast<int>(gh);
  g.grid_w = g.too_large || !(gw > 0) ? 0 : static_cast<int>(gw);
  return g;
}

// Sampling coordinate of row j = ph * grid_h + iy (and the same for columns), computed exactly
// as the forward computes it.
template <typename T>
__device__ inline T sample_coord(T start, T bin, int p, int i, int grid) {
  return rn_add(rn_add(start, rn_mul(static_cast<T>(p), bin)),
                rn_div(rn_mul(static_cast<T>(i + .5f), bin), static_cast<T>(grid)));
}

// One axis of the bilinear sample: low/high pixel and weights; false when outside [-1, size].
template <typename T>
__device__ inline bool bilinear_axis(T v, int size, int& low, int& high, T& l, T& h) {
  if (!(v >= static_cast<T>(-1.0) && v <= static_cast<T>(size))) return false;
  if (v <= 0) v = 0;
  low = static_cast<int>(v);
  if (low >= size - 1) {
    high = low = size - 1;
    v = static_cast<T>(low);
  } else {
    high = low + 1;
  }
  l = v - static_cast<T>(low);
  h = static_cast<T>(1.) - l;
  return true;
}

// The output element (RoI k, channel c, bin ph, pw) of thread `index`. On channels-last maps
// (channel stride 1) consecutive threads take consecutive channels of one bin, so that a warp's
// reads (and the backward's atomic adds) at a sampling point fall on consecutive addresses: a few
// memory transactions instead of one per thread. Otherwise consecutive threads take consecutive
// columns of one channel plane (torchvision's order), which is what NCHW maps want. Each element
// is computed the same way in either order: the results are the same bits.
struct BinIndex {
  int64_t k;
  int c, ph, pw;
};

__device__ inline BinIndex bin_index(int64_t index, int channels, int pooled_height,
                                     int pooled_width, bool channels_fastest) {
  BinIndex b;
  if (channels_fastest) {
    b.c = static_cast<int>(index % channels);
    const int64_t bin = index / channels;
    b.pw = static_cast<int>(bin % pooled_width);
    b.ph = static_cast<int>((bin / pooled_width) % pooled_height);
    b.k = bin / pooled_width / pooled_height;
  } else {
    b.pw = static_cast<int>(index % pooled_width);
    b.ph = static_cast<int>((index / pooled_width) % pooled_height);
    b.c = static_cast<int>((index / pooled_width / pooled_height) % channels);
    b.k = index / pooled_width / pooled_height / channels;
  }
  return b;
}

// Forward: one thread per output element (k, c, ph, pw) in bin_index's order, written through the
// output strides.
template <typename T>
__global__ void roi_align_forward_kernel(int64_t nthreads, LevelViews<T> levels,
                                         const at::opmath_type<T>* rois,
                                         const int64_t* roi_levels, int channels,
                                         int pooled_height, int pooled_width, int sampling_ratio,
                                         bool aligned, bool channels_fastest, T* output,
                                         int64_t osn, int64_t osc, int64_t osh, int64_t osw) {
  using Acc = at::opmath_type<T>;  // the geometry's type too
  MRCNN_CUDA_1D_KERNEL_LOOP(index, nthreads) {
    const auto [k, c, ph, pw] =
        bin_index(index, channels, pooled_height, pooled_width, channels_fastest);
    const int lvl = roi_levels ? static_cast<int>(roi_levels[k]) : 0;
    T* const out = output + k * osn + c * osc + ph * osh + pw * osw;
    if (!roi_in_range(rois + k * 5, lvl, levels.count, levels.batch_size, levels.fault)) {
      *out = static_cast<T>(0);
      continue;
    }
    const LevelView<T>& lv = levels.level[lvl];
    const RoiGeometry<Acc> g = roi_geometry<Acc>(rois + k * 5, static_cast<Acc>(lv.spatial_scale),
                                                 pooled_height, pooled_width, sampling_ratio,
                                                 aligned);
    if (g.too_large) {
      atomicOr(levels.fault, kFaultRoiBox);
      *out = static_cast<T>(0);
      continue;
    }
    const T* plane = lv.data + g.batch * lv.sn + c * lv.sc;
    Acc sum = 0;
    for (int iy = 0; iy < g.grid_h; ++iy) {
      const Acc y = sample_coord(g.start_h, g.bin_h, ph, iy, g.grid_h);
      int y_low, y_high;
      Acc ly, hy;
      const bool y_in = bilinear_axis(y, lv.height, y_low, y_high, ly, hy);
      for (int ix = 0; ix < g.grid_w; ++ix) {
        const Acc x = sample_coord(g.start_w, g.bin_w, pw, ix, g.grid_w);
        int x_low, x_high;
        Acc lx, hx;
        // torchvision tests both coordinates together: a point outside on either axis is 0.
        if (!y_in || !bilinear_axis(x, lv.width, x_low, x_high, lx, hx)) continue;
        const Acc v1 = static_cast<Acc>(plane[y_low * lv.sh + x_low * lv.sw]);
        const Acc v2 = static_cast<Acc>(plane[y_low * lv.sh + x_high * lv.sw]);
        const Acc v3 = static_cast<Acc>(plane[y_high * lv.sh + x_low * lv.sw]);
        const Acc v4 = static_cast<Acc>(plane[y_high * lv.sh + x_high * lv.sw]);
        sum += static_cast<Acc>(hy * hx) * v1 + static_cast<Acc>(hy * lx) * v2 +
               static_cast<Acc>(ly * hx) * v3 + static_cast<Acc>(ly * lx) * v4;
      }
    }
    // In 64 bits: each side of the grid may reach 2^20.
    const int64_t count = max(static_cast<int64_t>(g.grid_h) * g.grid_w, int64_t{1});
    *out = static_cast<T>(sum / static_cast<Acc>(count));
  }
}

// Backward with atomics: one thread per gradient element (k, c, ph, pw) in bin_index's order,
// scattering into the level's gradient (torchvision's kernel). Fast, but the order of the float additions varies
// from run to run.
template <typename T>
__global__ void roi_align_backward_atomic_kernel(int64_t nthreads, const T* grad, int64_t gsn,
                                                 int64_t gsc, int64_t gsh, int64_t gsw,
                                                 LevelViews<T> levels, const T* rois,
                                                 const int64_t* roi_levels, int channels,
                                                 int pooled_height, int pooled_width,
                                                 int sampling_ratio, bool aligned,
                                                 bool channels_fastest) {
  MRCNN_CUDA_1D_KERNEL_LOOP(index, nthreads) {
    const auto [k, c, ph, pw] =
        bin_index(index, channels, pooled_height, pooled_width, channels_fastest);
    const int lvl = roi_levels ? static_cast<int>(roi_levels[k]) : 0;
    if (!roi_in_range(rois + k * 5, lvl, levels.count, levels.batch_size, levels.fault)) continue;
    const LevelView<T>& lv = levels.level[lvl];
    const RoiGeometry<T> g = roi_geometry<T>(rois + k * 5, static_cast<T>(lv.spatial_scale),
                                             pooled_height, pooled_width, sampling_ratio, aligned);
    if (g.too_large) {
      atomicOr(levels.fault, kFaultRoiBox);
      continue;
    }
    const int64_t count = static_cast<int64_t>(g.grid_h) * g.grid_w;
    if (count == 0) continue;
    const T grad_bin = grad[k * gsn + c * gsc + ph * gsh + pw * gsw];
    T* plane = lv.data + g.batch * lv.sn + c * lv.sc;
    for (int iy = 0; iy < g.grid_h; ++iy) {
      const T y = sample_coord(g.start_h, g.bin_h, ph, iy, g.grid_h);
      int y_low, y_high;
      T ly, hy;
      const bool y_in = bilinear_axis(y, lv.height, y_low, y_high, ly, hy);
      for (int ix = 0; ix < g.grid_w; ++ix) {
        const T x = sample_coord(g.start_w, g.bin_w, pw, ix, g.grid_w);
        int x_low, x_high;
        T lx, hx;
        if (!y_in || !bilinear_axis(x, lv.width, x_low, x_high, lx, hx)) continue;
        const T cnt = static_cast<T>(count);
        gpuAtomicAddNoReturn(plane + y_low * lv.sh + x_low * lv.sw, grad_bin * (hy * hx) / cnt);
        gpuAtomicAddNoReturn(plane + y_low * lv.sh + x_high * lv.sw, grad_bin * (hy * lx) / cnt);
        gpuAtomicAddNoReturn(plane + y_high * lv.sh + x_low * lv.sw, grad_bin * (ly * hx) / cnt);
        gpuAtomicAddNoReturn(plane + y_high * lv.sh + x_high * lv.sw, grad_bin * (ly * lx) / cnt);
      }
    }
  }
}

// ---- deterministic backward ---------------------------------------------------------------
//
// A gather formulation: every gradient element is computed by exactly one thread, which visits
// the contributions in a fixed order (RoI index, bin, sampling point, corner), so the result is
// bitwise reproducible. A block owns a kGatherTile x kGatherTile pixel tile of one image and
// kGatherChannels channels of one level. The block first tests each RoI of its image (a
// per-image RoI list, increasing index) against the tile in chunks of kGatherThreads and keeps
// the hits in shared memory, in order; each thread then walks the hits for its own pixel,
// visiting only the sampling rows/columns that can touch that pixel.

// A sampling-row index estimate, clamped before the conversion so that a tiny step (an aligned
// RoI of almost no size) cannot overflow the int.
__device__ inline int candidate_index(double v) {
  return static_cast<int>(fmin(fmax(v, -1e8), 1e8));
}

inline constexpr int kGatherTile = 16;
inline constexpr int kGatherThreads = kGatherTile * kGatherTile;
inline constexpr int kGatherChannels = 16;

template <typename T>
__global__ void __launch_bounds__(kGatherThreads) roi_align_backward_gather_kernel(
    const T* grad, int64_t gsn, int64_t gsc, int64_t gsh, int64_t gsw, LevelView<T> lv,
    int level, const T* rois, const int64_t* roi_levels, const int64_t* roi_order,
    const int64_t* image_offsets, int channels, int pooled_height, int pooled_width,
    int sampling_ratio, bool aligned, int tiles_x, int tiles_y, int level_count, int batch_size,
    int* fault) {
  using Acc = at::opmath_type<T>;
  __shared__ int64_t hits[kGatherThreads];
  __shared__ int flags[kGatherThreads];
  __shared__ int hit_count;

  const int tile = blockIdx.x;
  const int tx0 = (tile % tiles_x) * kGatherTile;
  const int ty0 = (tile / tiles_x) * kGatherTile;
  const int c0 = blockIdx.y * kGatherChannels;
  const int n = blockIdx.z;
  const int x = tx0 + static_cast<int>(threadIdx.x % kGatherTile);
  const int y = ty0 + static_cast<int>(threadIdx.x / kGatherTile);
  const bool active = x < lv.width && y < lv.height;
  const int nc = min(kGatherChannels, channels - c0);
  const T scale = static_cast<T>(lv.spatial_scale);

  Acc acc[kGatherChannels];
#pragma unroll
  for (int j = 0; j < kGatherChannels; ++j) acc[j] = 0;

  const int64_t begin = image_offsets[n];
  const int64_t end = image_offsets[n + 1];
  for (int64_t chunk = begin; chunk < end; chunk += kGatherThreads) {
    // 1. Which RoIs of this chunk (this image, this level) can touch the tile? Sampling points
    //    lie in [start, start + roi size]; bilinear taps reach one pixel beyond; clamping moves
    //    points in [-1, 0] to 0 and [size - 1, size] to size - 1. A 2-pixel margin covers all.
    const int64_t mine = chunk + threadIdx.x;
    bool hit = false;
    int64_t k = -1;
    if (mine < end) {
      k = roi_order[mine];
      // A RoI outside the features sorts into image 0's or the last image's list: skip it.
      const int lvl = roi_levels ? static_cast<int>(roi_levels[k]) : 0;
      if (roi_in_range(rois + k * 5, lvl, level_count, batch_size, fault) &&
          static_cast<int>(rois[k * 5]) == n && lvl == level) {
        const RoiGeometry<T> g = roi_geometry<T>(rois + k * 5, scale, pooled_height, pooled_width,
                                                 sampling_ratio, aligned);
        // (An aligned RoI may be inverted: its samples then run from start backwards.)
        const T end_h = g.start_h + g.bin_h * static_cast<T>(pooled_height);
        const T end_w = g.start_w + g.bin_w * static_cast<T>(pooled_width);
        const T lo_h = min(g.start_h, end_h), hi_h = max(g.start_h, end_h);
        const T lo_w = min(g.start_w, end_w), hi_w = max(g.start_w, end_w);
        if (g.too_large) atomicOr(fault, kFaultRoiBox);
        hit = g.grid_h > 0 && g.grid_w > 0 &&
              lo_h - 2 <= static_cast<T>(ty0 + kGatherTile - 1) &&
              hi_h + 2 >= static_cast<T>(ty0) &&
              lo_w - 2 <= static_cast<T>(tx0 + kGatherTile - 1) &&
              hi_w + 2 >= static_cast<T>(tx0);
      }
    }
    // Compact the hits in RoI order: thread t writes at the number of hits before it.
    flags[threadIdx.x] = hit ? 1 : 0;
    __syncthreads();
    if (threadIdx.x == 0) {
      int count = 0;
      for (int t = 0; t < kGatherThreads; ++t) {
        const int f = flags[t];
        flags[t] = count;
        count += f;
      }
      hit_count = count;
    }
    __syncthreads();
    if (hit) hits[flags[threadIdx.x]] = k;
    __syncthreads();

    // 2. Each thread gathers the contributions of the hits to its pixel.
    if (active) {
      for (int h = 0; h < hit_count; ++h) {
        const int64_t kk = hits[h];
        const RoiGeometry<T> g = roi_geometry<T>(rois + kk * 5, scale, pooled_height,
                                                 pooled_width, sampling_ratio, aligned);
        const T cnt = static_cast<T>(static_cast<int64_t>(g.grid_h) * g.grid_w);
        if (g.batch != n) continue;  // the hit test admitted only RoIs of image n
        // Rows j = ph * grid_h + iy whose sample lies within 2 pixels of y (a tap reaches one
        // pixel, the rest is slack for rounding); each candidate is then recomputed exactly and
        // tested. A non-positive step (inverted aligned RoI) scans every row.
        const int rows = pooled_height * g.grid_h;
        const int cols = pooled_width * g.grid_w;
        const T step_h = g.bin_h / static_cast<T>(g.grid_h);
        const T step_w = g.bin_w / static_cast<T>(g.grid_w);
        int j0 = 0, j1 = rows - 1, i0 = 0, i1 = cols - 1;
        if (step_h > static_cast<T>(0)) {
          j0 = max(0, candidate_index(floor((static_cast<double>(y) - 2 - g.start_h) / step_h - 0.5)) - 1);
          j1 = min(rows - 1, candidate_index(ceil((static_cast<double>(y) + 2 - g.start_h) / step_h - 0.5)) + 1);
        }
        if (step_w > static_cast<T>(0)) {
          i0 = max(0, candidate_index(floor((static_cast<double>(x) - 2 - g.start_w) / step_w - 0.5)) - 1);
          i1 = min(cols - 1, candidate_index(ceil((static_cast<double>(x) + 2 - g.start_w) / step_w - 0.5)) + 1);
        }
        for (int j = j0; j <= j1; ++j) {
          const int ph = j / g.grid_h;
          const int iy = j % g.grid_h;
          const T yy = sample_coord(g.start_h, g.bin_h, ph, iy, g.grid_h);
          int y_low, y_high;
          T ly, hy;
          if (!bilinear_axis(yy, lv.height, y_low, y_high, ly, hy)) continue;
          if (y_low != y && y_high != y) continue;
          for (int i = i0; i <= i1; ++i) {
            const int pw = i / g.grid_w;
            const int ix = i % g.grid_w;
            const T xx = sample_coord(g.start_w, g.bin_w, pw, ix, g.grid_w);
            int x_low, x_high;
            T lx, hx;
            if (!bilinear_axis(xx, lv.width, x_low, x_high, lx, hx)) continue;
            if (x_low != x && x_high != x) continue;
            // The four corners in the forward's order; a corner on this pixel contributes.
            T w = 0;
            if (y_low == y && x_low == x) w += hy * hx;
            if (y_low == y && x_high == x) w += hy * lx;
            if (y_high == y && x_low == x) w += ly * hx;
            if (y_high == y && x_high == x) w += ly * lx;
            if (w == static_cast<T>(0)) continue;
            const T* gp = grad + kk * gsn + ph * gsh + pw * gsw;
            // Fixed trip count with a guard: acc[] stays in registers.
#pragma unroll
            for (int cc = 0; cc < kGatherChannels; ++cc) {
              if (cc < nc) acc[cc] += static_cast<Acc>(gp[(c0 + cc) * gsc] * w / cnt);
            }
          }
        }
      }
    }
    __syncthreads();  // hits[] is rewritten by the next chunk
  }
  if (active) {
    T* out = lv.data + n * lv.sn + y * lv.sh + x * lv.sw;
#pragma unroll
    for (int cc = 0; cc < kGatherChannels; ++cc) {
      if (cc < nc) out[(c0 + cc) * lv.sc] = static_cast<T>(acc[cc]);
    }
  }
}

// FPN level of one RoI (torchvision's LevelMapper), as the CPU kernel computes it.
template <typename T>
__device__ inline int64_t fpn_level_device(const T* box, int64_t k_min, int64_t k_max,
                                           int64_t canonical_scale, int64_t canonical_level) {
  static_assert(std::is_floating_point_v<T>, "levels are computed in float or double");
  const T area = (box[2] - box[0]) * (box[3] - box[1]);
  const T s = sqrt(area);
  const T k = floor(static_cast<T>(canonical_level) + log2_like_host(s / static_cast<T>(canonical_scale)) +
                    static_cast<T>(1e-6));
  if (!(k >= static_cast<T>(k_min))) return 0;
  if (k >= static_cast<T>(k_max)) return k_max - k_min;
  return static_cast<int64_t>(k) - k_min;
}

template <typename T>
__global__ void map_levels_kernel(int64_t n, const T* boxes, int64_t box_stride, int64_t k_min,
                                  int64_t k_max, int64_t canonical_scale, int64_t canonical_level,
                                  int64_t* out) {
  MRCNN_CUDA_1D_KERNEL_LOOP(i, n) {
    out[i] = fpn_level_device(boxes + i * box_stride, k_min, k_max, canonical_scale,
                              canonical_level);
  }
}

}  // namespace mrcnn::ops::cuda
