// The CPU RoIAlign engine shared by roi_align and multilevel_roi_align (internal header).
//
// Work is done in two phases:
//   1. a sampling plan: for every RoI, every output bin and every sampling point, the four pixel
//      positions and bilinear weights (the "pre-calc" of Caffe2/torchvision). The geometry is
//      shared by all channels, which is the key to speed: it is computed once per RoI instead of
//      once per (RoI, channel) as torchvision's backward does;
//   2. the channel loops: forward splits (RoI, channel) or (RoI, bin) items across threads;
//      backward splits channels, so each gradient element is owned by one thread and accumulated
//      in the same order (RoI, bin, sample) whatever the thread count: deterministic.
// Both memory formats are handled natively: NCHW walks one H x W plane per channel, NHWC
// accumulates whole channel vectors per sample point.
//
// The forward reads features of a storage type T and computes in C (the plan's type): C = T for
// float32/float64, float32 for float16/bfloat16 features (each value widened as it is read, the
// sums, weights and the division in float32, the result rounded once to T). The backward runs in
// C alone: the op casts its incoming gradient to C and its result back (roi_align_kernel.cpp).
//
// Arithmetic follows torchvision's roi_align kernels step for step (same expressions, same
// order) so that results agree to rounding.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace mrcnn::ops::cpu {

// Geometry of one feature level.
struct LevelGeometry {
  int64_t height = 0;
  int64_t width = 0;
  double spatial_scale = 1.0;
};

// One sampling point: 4 pixel offsets (y * W + x in the level's plane) and bilinear weights.
// A point outside the map has all weights 0 (and offsets 0).
template <typename T>
struct SamplePoint {
  int32_t pos[4];
  T w[4];
};

// Per-RoI plan: where its sampling points start, its grid and its (batch, level).
struct RoiPlan {
  int64_t batch = 0;
  int64_t level = 0;
  int64_t begin = 0;   // first SamplePoint; points ordered (ph, pw, iy, ix)
  int32_t grid_h = 0;  // sampling points per bin, vertically
  int32_t grid_w = 0;
};

template <typename T>
struct SamplingPlan {
  std::vector<RoiPlan> rois;
  std::vector<SamplePoint<T>> points;
  int64_t pooled_height = 0;
  int64_t pooled_width = 0;
};

// FPN level of one box (torchvision's LevelMapper, computed in T as torchvision computes it in
// the boxes' dtype). A box of zero area maps to k_min; an inverted box (negative area, whose
// square root is NaN) is mapped to k_min as well rather than left unpooled.
template <typename T>
inline int64_t fpn_level(T x1, T y1, T x2, T y2, int64_t k_min, int64_t k_max,
                         int64_t canonical_scale, int64_t canonical_level) {
  const T area = (x2 - x1) * (y2 - y1);
  const T s = std::sqrt(area);
  const T k = std::floor(static_cast<T>(canonical_level) +
                         std::log2(s / static_cast<T>(canonical_scale)) + static_cast<T>(1e-6));
  if (!(k >= static_cast<T>(k_min))) return 0;  // also NaN
  if (k >= static_cast<T>(k_max)) return k_max - k_min;
  return static_cast<int64_t>(k) - k_min;
}

// Checks the RoIs (finite coordinates, integral batch index in [0, batch_size)) and builds the
// plan. `levels` gives each RoI's level (nullptr: all level 0). rois: contiguous [K, 5].
template <typename T>
SamplingPlan<T> make_sampling_plan(const T* rois, int64_t num_rois, const int64_t* levels,
                                   const std::vector<LevelGeometry>& geometry,
                                   int64_t batch_size, int64_t pooled_height,
                                   int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  SamplingPlan<T> plan;
  plan.pooled_height = pooled_height;
  plan.pooled_width = pooled_width;
  plan.rois.resize(static_cast<size_t>(num_rois));
  const int64_t bins = pooled_height * pooled_width;

  // Pass 1 (serial, cheap): validate, size each RoI's grid, prefix-sum the offsets.
  int64_t total = 0;
  for (int64_t k = 0; k < num_rois; ++k) {
    const T* r = rois + k * 5;
    for (int j = 0; j < 5; ++j) {
      TORCH_CHECK(std::isfinite(static_cast<double>(r[j])), "roi_align: rois[", k, ", ", j,
                  "] is ", static_cast<double>(r[j]), "; expected a finite value");
    }
    const double b = static_cast<double>(r[0]);
    TORCH_CHECK(b >= 0 && b < static_cast<double>(batch_size) && b == std::floor(b),
                "roi_align: rois[", k, ", 0] = ", b, " is not a batch index in [0, ", batch_size,
                ")");
    RoiPlan& p = plan.rois[static_cast<size_t>(k)];
    p.batch = static_cast<int64_t>(b);
    p.level = levels ? levels[k] : 0;
    const LevelGeometry& g = geometry[static_cast<size_t>(p.level)];
    const T scale = static_cast<T>(g.spatial_scale);
    const T offset = aligned ? static_cast<T>(0.5) : static_cast<T>(0.0);
    T roi_width = (r[3] * scale - offset) - (r[1] * scale - offset);
    T roi_height = (r[4] * scale - offset) - (r[2] * scale - offset);
    if (!aligned) {
      // Malformed RoIs are forced to be 1x1 (torchvision, Detectron).
      roi_width = std::max(roi_width, static_cast<T>(1));
      roi_height = std::max(roi_height, static_cast<T>(1));
    }
    int64_t gh = sampling_ratio > 0
                     ? sampling_ratio
                     : static_cast<int64_t>(std::ceil(roi_height / static_cast<T>(pooled_height)));
    int64_t gw = sampling_ratio > 0
                     ? sampling_ratio
                     : static_cast<int64_t>(std::ceil(roi_width / static_cast<T>(pooled_width)));
    gh = std::max<int64_t>(gh, 0);  // aligned RoIs of negative size sample nothing
    gw = std::max<int64_t>(gw, 0);
    TORCH_CHECK(gh <= (1 << 20) && gw <= (1 << 20), "roi_align: rois[", k,
                "] needs a sampling grid of ", gh, "x", gw, " per bin; the box is too large");
    p.grid_h = static_cast<int32_t>(gh);
    p.grid_w = static_cast<int32_t>(gw);
    p.begin = total;
    total += bins * gh * gw;
  }
  plan.points.resize(static_cast<size_t>(total));

  // Pass 2 (parallel over RoIs): the sampling points. Each RoI writes its own range.
  at::parallel_for(0, num_rois, 16, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const T* r = rois + k * 5;
      const RoiPlan& p = plan.rois[static_cast<size_t>(k)];
      const LevelGeometry& g = geometry[static_cast<size_t>(p.level)];
      const int64_t height = g.height;
      const int64_t width = g.width;
      const T scale = static_cast<T>(g.spatial_scale);
      // Do not round: this implementation detail is critical (torchvision).
      const T offset = aligned ? static_cast<T>(0.5) : static_cast<T>(0.0);
      const T roi_start_w = r[1] * scale - offset;
      const T roi_start_h = r[2] * scale - offset;
      const T roi_end_w = r[3] * scale - offset;
      const T roi_end_h = r[4] * scale - offset;
      T roi_width = roi_end_w - roi_start_w;
      T roi_height = roi_end_h - roi_start_h;
      if (!aligned) {
        roi_width = std::max(roi_width, static_cast<T>(1));
        roi_height = std::max(roi_height, static_cast<T>(1));
      }
      const T bin_size_h = roi_height / static_cast<T>(pooled_height);
      const T bin_size_w = roi_width / static_cast<T>(pooled_width);
      const int32_t gh = p.grid_h;
      const int32_t gw = p.grid_w;
      SamplePoint<T>* out = plan.points.data() + p.begin;
      for (int64_t ph = 0; ph < pooled_height; ++ph) {
        for (int64_t pw = 0; pw < pooled_width; ++pw) {
          for (int32_t iy = 0; iy < gh; ++iy) {
            const T yy = roi_start_h + static_cast<T>(ph) * bin_size_h +
                         static_cast<T>(iy + .5f) * bin_size_h / static_cast<T>(gh);
            for (int32_t ix = 0; ix < gw; ++ix) {
              const T xx = roi_start_w + static_cast<T>(pw) * bin_size_w +
                           static_cast<T>(ix + .5f) * bin_size_w / static_cast<T>(gw);
              T y = yy;
              T x = xx;
              SamplePoint<T>& s = *out++;
              if (!(y >= -1.0 && y <= static_cast<T>(height) && x >= -1.0 &&
                    x <= static_cast<T>(width))) {
                s = SamplePoint<T>{{0, 0, 0, 0}, {0, 0, 0, 0}};  // outside the map
                continue;
              }
              if (y <= 0) y = 0;
              if (x <= 0) x = 0;
              int64_t y_low = static_cast<int64_t>(y);
              int64_t x_low = static_cast<int64_t>(x);
              int64_t y_high;
              int64_t x_high;
              if (y_low >= height - 1) {
                y_high = y_low = height - 1;
                y = static_cast<T>(y_low);
              } else {
                y_high = y_low + 1;
              }
              if (x_low >= width - 1) {
                x_high = x_low = width - 1;
                x = static_cast<T>(x_low);
              } else {
                x_high = x_low + 1;
              }
              const T ly = y - static_cast<T>(y_low);
              const T lx = x - static_cast<T>(x_low);
              const T hy = static_cast<T>(1) - ly;
              const T hx = static_cast<T>(1) - lx;
              s.pos[0] = static_cast<int32_t>(y_low * width + x_low);
              s.pos[1] = static_cast<int32_t>(y_low * width + x_high);
              s.pos[2] = static_cast<int32_t>(y_high * width + x_low);
              s.pos[3] = static_cast<int32_t>(y_high * width + x_high);
              s.w[0] = hy * hx;
              s.w[1] = hy * lx;
              s.w[2] = ly * hx;
              s.w[3] = ly * lx;
            }
          }
        }
      }
    }
  });
  return plan;
}

// A feature level as the kernels see it: base pointer and strides in elements. For NCHW the
// plane of (n, c) starts at data + n * stride_n + c * stride_c and pixels are contiguous; for
// NHWC the channel vector of pixel pos starts at data + n * stride_n + pos * channels.
template <typename T>
struct LevelData {
  T* data = nullptr;
  int64_t stride_n = 0;
  int64_t stride_c = 0;
  bool channels_last = false;
};

// Channels processed together in the NHWC loops: a fixed trip count lets -O2 vectorize them.
inline constexpr int64_t kChannelBlock = 16;
// Channel planes walked together by the NCHW loops (independent memory streams).
inline constexpr int64_t kPlaneBlock = 8;

template <typename T, typename C>
inline void accumulate_sample(C* __restrict acc, const T* __restrict v1, const T* __restrict v2,
                              const T* __restrict v3, const T* __restrict v4, C w1, C w2, C w3,
                              C w4, int64_t n) {
  int64_t c = 0;
  for (; c + kChannelBlock <= n; c += kChannelBlock) {
    for (int64_t j = 0; j < kChannelBlock; ++j) {
      acc[c + j] += w1 * static_cast<C>(v1[c + j]) + w2 * static_cast<C>(v2[c + j]) +
                    w3 * static_cast<C>(v3[c + j]) + w4 * static_cast<C>(v4[c + j]);
    }
  }
  for (; c < n; ++c) {
    acc[c] += w1 * static_cast<C>(v1[c]) + w2 * static_cast<C>(v2[c]) +
              w3 * static_cast<C>(v3[c]) + w4 * static_cast<C>(v4[c]);
  }
}

template <typename T>
inline void scatter_sample(T* __restrict dst, const T* __restrict g, T w, int64_t n) {
  int64_t c = 0;
  for (; c + kChannelBlock <= n; c += kChannelBlock) {
    for (int64_t j = 0; j < kChannelBlock; ++j) dst[c + j] += g[c + j] * w;
  }
  for (; c < n; ++c) dst[c] += g[c] * w;
}

// Forward. `levels[l]` are read-only views of the inputs; `output` is [K, C, PH, PW] contiguous
// (NCHW) or [K, PH, PW, C] physically (channels-last output). T: the features' storage type, C:
// the plan's (compute) type.
template <typename T, typename C = T>
void roi_align_forward(const SamplingPlan<C>& plan, const std::vector<LevelData<T>>& levels,
                       int64_t channels, T* output, bool output_channels_last) {
  const int64_t num_rois = static_cast<int64_t>(plan.rois.size());
  const int64_t bins = plan.pooled_height * plan.pooled_width;
  if (output_channels_last) {
    // One item = one (RoI, bin): a whole channel vector.
    at::parallel_for(0, num_rois * bins, 8, [&](int64_t i0, int64_t i1) {
      std::vector<C> acc(static_cast<size_t>(channels));
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t k = i / bins;
        const int64_t bin = i % bins;
        const RoiPlan& p = plan.rois[static_cast<size_t>(k)];
        const LevelData<T>& lv = levels[static_cast<size_t>(p.level)];
        std::fill(acc.begin(), acc.end(), C(0));
        T* out = output + i * channels;
        if (lv.channels_last) {
          const T* base = lv.data + p.batch * lv.stride_n;
          const int64_t per_bin = static_cast<int64_t>(p.grid_h) * p.grid_w;
          const SamplePoint<C>* s = plan.points.data() + p.begin + bin * per_bin;
          for (int64_t q = 0; q < per_bin; ++q, ++s) {
            accumulate_sample<T, C>(acc.data(), base + s->pos[0] * channels,
                              base + s->pos[1] * channels, base + s->pos[2] * channels,
                              base + s->pos[3] * channels, s->w[0], s->w[1], s->w[2], s->w[3],
                              channels);
          }
        } else {
          const int64_t per_bin = static_cast<int64_t>(p.grid_h) * p.grid_w;
          const SamplePoint<C>* s0 = plan.points.data() + p.begin + bin * per_bin;
          for (int64_t c = 0; c < channels; ++c) {
            const T* plane = lv.data + p.batch * lv.stride_n + c * lv.stride_c;
            C v = 0;
            const SamplePoint<C>* s = s0;
            for (int64_t q = 0; q < per_bin; ++q, ++s) {
              v += s->w[0] * static_cast<C>(plane[s->pos[0]]) +
                   s->w[1] * static_cast<C>(plane[s->pos[1]]) +
                   s->w[2] * static_cast<C>(plane[s->pos[2]]) +
                   s->w[3] * static_cast<C>(plane[s->pos[3]]);
            }
            acc[static_cast<size_t>(c)] = v;
          }
        }
        const C count = static_cast<C>(std::max<int64_t>(int64_t{p.grid_h} * p.grid_w, 1));
        for (int64_t c = 0; c < channels; ++c) {
          out[c] = static_cast<T>(acc[static_cast<size_t>(c)] / count);
        }
      }
    });
    return;
  }
  // NCHW output: one item = one RoI and a block of kPlaneBlock channels. The channels of a block
  // are walked together, sample point by sample point: their planes are far apart in memory,
  // so the loads are independent cache misses that the core can overlap (one channel at a
  // time is a chain of misses). Each output value is still summed in (sample) order.
  const int64_t blocks = (channels + kPlaneBlock - 1) / kPlaneBlock;
  at::parallel_for(0, num_rois * blocks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t k = i / blocks;
      const int64_t c0 = (i % blocks) * kPlaneBlock;
      const int64_t nc = std::min(kPlaneBlock, channels - c0);
      const RoiPlan& p = plan.rois[static_cast<size_t>(k)];
      const LevelData<T>& lv = levels[static_cast<size_t>(p.level)];
      const int64_t per_bin = static_cast<int64_t>(p.grid_h) * p.grid_w;
      const C count = static_cast<C>(std::max<int64_t>(per_bin, 1));
      const T* planes[kPlaneBlock];
      int64_t tap_stride = 1;
      for (int64_t j = 0; j < kPlaneBlock; ++j) {
        const int64_t c = c0 + std::min(j, nc - 1);  // a short block repeats its last channel
        planes[j] = lv.channels_last ? lv.data + p.batch * lv.stride_n + c
                                     : lv.data + p.batch * lv.stride_n + c * lv.stride_c;
      }
      if (lv.channels_last) tap_stride = channels;
      const SamplePoint<C>* s = plan.points.data() + p.begin;
      for (int64_t bin = 0; bin < bins; ++bin) {
        C v[kPlaneBlock] = {};
        for (int64_t q = 0; q < per_bin; ++q, ++s) {
          const int64_t o0 = s->pos[0] * tap_stride, o1 = s->pos[1] * tap_stride;
          const int64_t o2 = s->pos[2] * tap_stride, o3 = s->pos[3] * tap_stride;
          for (int64_t j = 0; j < kPlaneBlock; ++j) {
            const T* pl = planes[j];
            v[j] += s->w[0] * static_cast<C>(pl[o0]) + s->w[1] * static_cast<C>(pl[o1]) +
                    s->w[2] * static_cast<C>(pl[o2]) + s->w[3] * static_cast<C>(pl[o3]);
          }
        }
        for (int64_t j = 0; j < nc; ++j) {
          output[(k * channels + c0 + j) * bins + bin] = static_cast<T>(v[j] / count);
        }
      }
    }
  });
}

// Backward. `grad` is [K, C, PH, PW] contiguous (grad_channels_last false) or [K, PH, PW, C]
// physically; `levels[l]` are the zero-initialized gradients of the inputs (any mix of formats).
// Threads split the channels; each gradient element is accumulated by one thread in
// (RoI, bin, sample) order, so the result does not depend on the thread count.
template <typename T>
void roi_align_backward(const SamplingPlan<T>& plan, const std::vector<LevelData<T>>& levels,
                        int64_t channels, const T* grad, bool grad_channels_last) {
  const int64_t num_rois = static_cast<int64_t>(plan.rois.size());
  const int64_t bins = plan.pooled_height * plan.pooled_width;
  const int64_t num_blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  at::parallel_for(0, num_blocks, 1, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kChannelBlock;
    const int64_t c1 = std::min(channels, b1 * kChannelBlock);
    for (int64_t k = 0; k < num_rois; ++k) {
      const RoiPlan& p = plan.rois[static_cast<size_t>(k)];
      const LevelData<T>& lv = levels[static_cast<size_t>(p.level)];
      const int64_t per_bin = static_cast<int64_t>(p.grid_h) * p.grid_w;
      if (per_bin == 0) continue;
      const T count = static_cast<T>(per_bin);
      const SamplePoint<T>* s0 = plan.points.data() + p.begin;
      if (lv.channels_last && grad_channels_last) {
        T* base = lv.data + p.batch * lv.stride_n + c0;
        const int64_t n = c1 - c0;
        for (int64_t bin = 0; bin < bins; ++bin) {
          const T* g = grad + (k * bins + bin) * channels + c0;
          const SamplePoint<T>* s = s0 + bin * per_bin;
          for (int64_t q = 0; q < per_bin; ++q, ++s) {
            for (int j = 0; j < 4; ++j) {
              if (s->w[j] == T(0)) continue;  // outside the map or on a pixel edge
              scatter_sample(base + s->pos[j] * channels, g, s->w[j] / count, n);
            }
          }
        }
        continue;
      }
      // Blocks of kPlaneBlock channels: independent scatter streams (see the forward).
      for (int64_t cb = c0; cb < c1; cb += kPlaneBlock) {
        const int64_t nc = std::min(kPlaneBlock, c1 - cb);
        T* dst[kPlaneBlock];
        const int64_t dst_stride = lv.channels_last ? channels : 1;
        for (int64_t j = 0; j < nc; ++j) {
          dst[j] = lv.channels_last ? lv.data + p.batch * lv.stride_n + cb + j
                                    : lv.data + p.batch * lv.stride_n + (cb + j) * lv.stride_c;
        }
        const SamplePoint<T>* s = s0;
        for (int64_t bin = 0; bin < bins; ++bin) {
          T g[kPlaneBlock];
          for (int64_t j = 0; j < nc; ++j) {
            g[j] = grad_channels_last ? grad[(k * bins + bin) * channels + cb + j]
                                      : grad[(k * channels + cb + j) * bins + bin];
          }
          for (int64_t q = 0; q < per_bin; ++q, ++s) {
            const int64_t o0 = s->pos[0] * dst_stride, o1 = s->pos[1] * dst_stride;
            const int64_t o2 = s->pos[2] * dst_stride, o3 = s->pos[3] * dst_stride;
            // torchvision computes grad * w_i / count; grad * (w_i / count) saves the divisions
            // per channel and differs by an ulp.
            const T w0 = s->w[0] / count, w1 = s->w[1] / count;
            const T w2 = s->w[2] / count, w3 = s->w[3] / count;
            for (int64_t j = 0; j < nc; ++j) {
              T* d = dst[j];
              d[o0] += g[j] * w0;
              d[o1] += g[j] * w1;
              d[o2] += g[j] * w2;
              d[o3] += g[j] * w3;
            }
          }
        }
      }
    }
  });
}

}  // namespace mrcnn::ops::cpu
