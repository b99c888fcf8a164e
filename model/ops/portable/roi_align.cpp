// Portable RoIAlign, single and multi-level, and the FPN level map: standard ATen operators only.
//
// The sampling geometry is the native engine's (cpu/roi_align_impl.h), expression for expression
// in the features' dtype: the same sample points, the same clamping at the map's edges, the same
// four bilinear weights, so each tap has the native kernel's position and weight bit for bit.
// What differs is the summation: every output bin is one weighted bag of its taps (4 corners x
// grid x grid rows of a [pixels, C] view of the features), summed by at::embedding_bag, then
// divided by the sample count as the native kernel does. The sum's order is embedding_bag's, so
// results agree with the native kernels to rounding (a few ulp), not bit for bit.
//
// All levels of a pyramid are one flat table ([N * sum(H_l W_l), C], channels last), and every RoI
// carries its level's scale, size and offset into it: one gather for all RoIs of all levels, with
// shapes fixed by K, the pooled size and the sampling ratio (no per-level split, no data-dependent
// shapes; graph-compiling backends such as Habana's need that). The backward is autograd's:
// embedding_bag's dense backward scatters the weighted output gradient into the table.
//
// Adaptive sampling (sampling_ratio <= 0) sizes the grid per RoI; the taps are laid out for the
// largest grid (one host read) with zero weights beyond each RoI's own grid.
#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "model/ops/detail/level_range.h"
#include "model/ops/detail/roi_align_check.h"
#include "model/ops/portable/portable.h"
#include "model/ops/portable/value_checks.h"

namespace mrcnn::ops::portable {
namespace {

// The level each RoI is pooled from, as per-RoI tensors ([K, 1] each, on the RoIs' device).
struct RoiLevels {
  at::Tensor scale;   // spatial scale, features' dtype
  at::Tensor height;  // level height, features' dtype (the edge tests compare in it)
  at::Tensor width;
  at::Tensor offset;  // first row of the level in one image's part of the table, int64
  at::Tensor row_width;  // level width as int64 (row-major pixel index)
};

// Taps of every output bin: rows of the table and their bilinear weights, [B, T] each for
// B = K * PH * PW bins and T = 4 * grid_h * grid_w taps; count [K] samples per RoI.
struct Taps {
  at::Tensor rows;
  at::Tensor weights;
  at::Tensor count;
};

// One axis of the sampling grid: sample coordinates [K, P, G] for P bins of G samples, and the
// two neighbouring pixel indices and weights along the axis (native: roi_align_impl.h, pass 2).
struct Axis {
  at::Tensor low, high;      // int64 [K, P, G]
  at::Tensor w_low, w_high;  // [K, P, G]
  at::Tensor inside;         // bool [K, P, G]: the sample is within [-1, size]
};

Axis sample_axis(const at::Tensor& start, const at::Tensor& bin, const at::Tensor& grid,
                 int64_t pooled, int64_t max_grid, const at::Tensor& size) {
  const auto opts = start.options();
  const at::Tensor p = at::arange(pooled, opts).view({1, pooled, 1});
  const at::Tensor g = (at::arange(max_grid, opts) + 0.5).view({1, 1, max_grid});
  // yy = roi_start + ph * bin + (iy + .5) * bin / grid, evaluated in that order.
  const at::Tensor b3 = bin.view({-1, 1, 1});
  at::Tensor y = (start.view({-1, 1, 1}) + p * b3) + (g * b3) / grid.view({-1, 1, 1}).to(opts);
  const at::Tensor s = size.view({-1, 1, 1});
  Axis a;
  a.inside = (y >= -1.0).logical_and_(y <= s);
  y = at::where(y <= 0, at::zeros({}, opts), y);
  at::Tensor low = y.floor();
  const at::Tensor top = s - 1;
  const at::Tensor at_edge = low >= top;
  low = at::where(at_edge, top, low);
  y = at::where(at_edge, low, y);
  const at::Tensor l = y - low;
  a.w_low = 1 - l;
  a.w_high = l;
  a.low = low.to(at::kLong);
  a.high = at::where(at_edge, a.low, a.low + 1);
  return a;
}

// The taps of every bin (roi_align_impl.h's sampling plan as tensors). rois: [K, 5] contiguous in
// the compute dtype; `batch_rows` = rows of the table per image.
Taps make_taps(const at::Tensor& rois, const at::Tensor& ok, const RoiLevels& lv,
               int64_t batch_rows, int64_t ph, int64_t pw, int64_t sampling_ratio, bool aligned) {
  const int64_t num = rois.size(0);
  const auto opts = rois.options();
  at::Tensor keep_roi = ok;
  const double offset = aligned ? 0.5 : 0.0;
  const at::Tensor sw = rois.select(1, 1).view({-1, 1}) * lv.scale - offset;
  const at::Tensor sh = rois.select(1, 2).view({-1, 1}) * lv.scale - offset;
  at::Tensor rw = (rois.select(1, 3).view({-1, 1}) * lv.scale - offset) - sw;
  at::Tensor rh = (rois.select(1, 4).view({-1, 1}) * lv.scale - offset) - sh;
  if (!aligned) {  // malformed RoIs are forced to be 1x1 (torchvision, Detectron)
    rw = rw.clamp_min(1);
    rh = rh.clamp_min(1);
  }
  const at::Tensor bin_h = rh / static_cast<double>(ph);
  const at::Tensor bin_w = rw / static_cast<double>(pw);
  at::Tensor gh, gw;
  int64_t max_h = sampling_ratio, max_w = sampling_ratio;
  if (sampling_ratio > 0) {
    gh = gw = at::full({num, 1}, sampling_ratio, opts.dtype(at::kLong));
  } else {
    const at::Tensor grid_h = bin_h.ceil().clamp_min(0);  // aligned RoIs of negative size: 0
    const at::Tensor grid_w = bin_w.ceil().clamp_min(0);
    const at::Tensor huge = (grid_h > (1 << 20)).logical_or_(grid_w > (1 << 20)).view(-1);
    check_values(huge, kFaultRoiBox, [&](int64_t k) {
      return c10::str("roi_align: rois[", k, "] needs a sampling grid of ",
                      static_cast<int64_t>(grid_h[k][0].item<double>()), "x",
                      static_cast<int64_t>(grid_w[k][0].item<double>()),
                      " per bin; the box is too large");
    });
    // Off the CPU such a RoI is pooled as zeros with a 1x1 grid, so that it sizes nothing.
    keep_roi = keep_roi.logical_and(huge.logical_not());
    gh = at::where(huge.view({-1, 1}), 1.0, grid_h).to(at::kLong);
    gw = at::where(huge.view({-1, 1}), 1.0, grid_w).to(at::kLong);
    max_h = num > 0 ? std::max<int64_t>(gh.max().item<int64_t>(), 1) : 1;
    max_w = num > 0 ? std::max<int64_t>(gw.max().item<int64_t>(), 1) : 1;
  }
  const Axis y = sample_axis(sh, bin_h, gh, ph, max_h, lv.height);
  const Axis x = sample_axis(sw, bin_w, gw, pw, max_w, lv.width);
  // Broadcast to [K, PH, PW, GH, GW]: y over (ph, iy), x over (pw, ix).
  auto yv = [&](const at::Tensor& t) { return t.view({num, ph, 1, max_h, 1}); };
  auto xv = [&](const at::Tensor& t) { return t.view({num, 1, pw, 1, max_w}); };
  at::Tensor keep =
      yv(y.inside).logical_and(xv(x.inside)).logical_and_(keep_roi.view({num, 1, 1, 1, 1}));
  if (sampling_ratio <= 0) {
    const at::Tensor iy = at::arange(max_h, opts.dtype(at::kLong)).view({1, 1, 1, max_h, 1});
    const at::Tensor ix = at::arange(max_w, opts.dtype(at::kLong)).view({1, 1, 1, 1, max_w});
    keep = keep.logical_and(iy < gh.view({num, 1, 1, 1, 1}))
               .logical_and(ix < gw.view({num, 1, 1, 1, 1}));
  }
  const at::Tensor base = (rois.select(1, 0).to(at::kLong) * batch_rows).view({num, 1, 1, 1, 1}) +
                          lv.offset.view({num, 1, 1, 1, 1});
  const at::Tensor stride = lv.row_width.view({num, 1, 1, 1, 1});
  const at::Tensor zero_w = at::zeros({}, opts);
  const at::Tensor zero_i = at::zeros({}, opts.dtype(at::kLong));
  std::vector<at::Tensor> rows, weights;
  for (const auto& [yi, yw] : {std::pair{y.low, y.w_low}, std::pair{y.high, y.w_high}}) {
    for (const auto& [xi, xw] : {std::pair{x.low, x.w_low}, std::pair{x.high, x.w_high}}) {
      // w = hy * hx etc. in the features' dtype, as the native plan computes them.
      weights.push_back(at::where(keep, yv(yw) * xv(xw), zero_w));
      rows.push_back(at::where(keep, base + yv(yi) * stride + xv(xi), zero_i));
    }
  }
  // Taps of one bin: (iy, ix, corner), 4 * GH * GW of them.
  auto per_bin = [&](std::vector<at::Tensor>& t) {
    return at::stack(t, -1).reshape({num * ph * pw, 4 * max_h * max_w});
  };
  Taps taps;
  taps.rows = per_bin(rows);
  taps.weights = per_bin(weights);
  taps.count = (gh * gw).clamp_min(1).view({num, 1, 1, 1}).to(opts);
  return taps;
}

// Value checks of the RoIs, the native messages (roi_align_impl.h, pass 1). Returns the RoIs
// whose values can be pooled (all, on the CPU, where a bad one throws).
at::Tensor check_roi_values(const at::Tensor& rois, int64_t batch_size) {
  const at::Tensor finite = rois.isfinite();
  check_values(finite.logical_not(), kFaultRoiBox, [&](int64_t i) {
    return c10::str("roi_align: rois[", i / 5, ", ", i % 5, "] is ", rois.view(-1)[i].item<double>(),
                    "; expected a finite value");
  });
  const at::Tensor b = rois.select(1, 0);
  const at::Tensor bad_batch =
      (b < 0).logical_or_(b >= static_cast<double>(batch_size)).logical_or_(b != b.floor());
  check_values(bad_batch, kFaultRoiBatchIndex, [&](int64_t k) {
    return "roi_align: rois[" + std::to_string(k) + ", 0] = " +
           c10::str(b[k].item<double>()) + " is not a batch index in [0, " +
           std::to_string(batch_size) + ")";
  });
  return finite.all(1).logical_and_(bad_batch.logical_not());
}

// The pyramid as one table [N * rows, C] (channels last) and its per-level offsets.
std::pair<at::Tensor, std::vector<int64_t>> flat_table(at::TensorList levels) {
  std::vector<at::Tensor> parts;
  std::vector<int64_t> offsets;
  int64_t rows = 0;
  for (const at::Tensor& f : levels) {
    offsets.push_back(rows);
    rows += f.size(2) * f.size(3);
    parts.push_back(f.permute({0, 2, 3, 1}).reshape({f.size(0), -1, f.size(1)}));
  }
  at::Tensor table = parts.size() == 1 ? parts[0] : at::cat(parts, 1);
  return {table.reshape({-1, table.size(2)}), offsets};
}

// Pools every RoI from its level (`level`: int64 [K] indices into `levels`).
at::Tensor pool(at::TensorList levels, const at::Tensor& rois_in, const at::Tensor& level,
                at::ArrayRef<double> scales, int64_t ph, int64_t pw, int64_t sampling_ratio,
                bool aligned) {
  // A float32 island under autocast, as the native ops' autocast kernels: no op below is cast.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const at::Tensor& f0 = levels[0];
  // float32 or float64: the public functions cast reduced precision (float32_island).
  const at::ScalarType dt = f0.scalar_type();
  const bool cl = f0.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
  const int64_t num = rois_in.size(0), batch = f0.size(0), channels = f0.size(1);
  auto [table, offsets] = flat_table(levels);
  const int64_t batch_rows = table.size(0) / std::max<int64_t>(batch, 1);
  at::Tensor rois = rois_in.to(dt).contiguous();
  const at::Tensor ok = check_roi_values(rois, batch);
  if (batch == 0) {  // every RoI names a missing image (a fault off the CPU): nothing to read
    return at::zeros({num, channels, ph, pw}, f0.options())
        .contiguous(cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  }
  // A RoI that cannot be pooled (only off the CPU) reads image 0 with zero weights: zeros, as
  // the CUDA kernels write.
  rois = at::where(ok.view({-1, 1}), rois, at::zeros({}, rois.options()));
  const auto lopts = rois.options();
  std::vector<double> h, w;
  std::vector<int64_t> wi;
  for (const at::Tensor& f : levels) {
    h.push_back(static_cast<double>(f.size(2)));
    w.push_back(static_cast<double>(f.size(3)));
    wi.push_back(f.size(3));
  }
  auto per_roi = [&](auto values, at::ScalarType t) {
    return at::tensor(values, at::TensorOptions().dtype(t)).to(lopts.device()).index_select(0, level)
        .view({-1, 1});
  };
  RoiLevels lv{per_roi(std::vector<double>(scales.begin(), scales.end()), dt), per_roi(h, dt),
               per_roi(w, dt), per_roi(offsets, at::kLong), per_roi(wi, at::kLong)};
  const Taps taps = make_taps(rois, ok, lv, batch_rows, ph, pw, sampling_ratio, aligned);
  at::Tensor out;
  if (num == 0) {
    out = table.narrow(0, 0, 0).view({0, ph, pw, channels});  // still a function of the input
  } else {
    const int64_t bins = taps.rows.size(0), per_bag = taps.rows.size(1);
    const at::Tensor bag_offsets = at::arange(bins, lopts.dtype(at::kLong)) * per_bag;
    out = std::get<0>(at::embedding_bag(table, taps.rows.reshape(-1), bag_offsets, false, 0,
                                        false, taps.weights.reshape(-1)));
    out = out.view({num, ph, pw, channels}) / taps.count;
  }
  out = out.permute({0, 3, 1, 2});
  return out.contiguous(cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
}

at::Tensor roi_align_float(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                           int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                           bool aligned) {
  constexpr const char* kOp = "mrcnn::roi_align";
  TORCH_CHECK(input.device() == rois.device(), kOp, ": expected input and rois on one device, ",
              "got ", input.device(), " and ", rois.device());
  detail::check_roi_align_args(input, rois, pooled_height, pooled_width, kOp);
  const bool empty_map = input.size(2) == 0 || input.size(3) == 0;
  if (input.size(1) == 0 || (rois.size(0) == 0 && empty_map)) {  // nothing to pool
    const bool cl = input.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
    return at::empty({rois.size(0), input.size(1), pooled_height, pooled_width}, input.options(),
                     cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  }
  detail::check_nonempty_map(input, kOp);
  const at::Tensor level = at::zeros({rois.size(0)}, rois.options().dtype(at::kLong));
  return pool({input}, rois, level, {spatial_scale}, pooled_height, pooled_width, sampling_ratio,
              aligned);
}

// float16/bfloat16 features pool in float32 with float32 RoIs, as the native ops' autocast
// kernels do (under autocast the model hands float32 RoIs with bfloat16 features); the result is
// cast back to the features' dtype.
bool reduced(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

std::vector<at::Tensor> float32_island(at::TensorList features) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& f : features) out.push_back(reduced(f.scalar_type()) ? f.to(at::kFloat) : f);
  return out;
}

at::Tensor island_rois(const at::Tensor& rois, at::ScalarType features) {
  return reduced(features) && reduced(rois.scalar_type()) ? rois.to(at::kFloat) : rois;
}

}  // namespace

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                     int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                     bool aligned) {
  const at::Tensor in = float32_island({input})[0];
  return roi_align_float(in, island_rois(rois, input.scalar_type()), spatial_scale, pooled_height,
                         pooled_width, sampling_ratio, aligned)
      .to(input.scalar_type());
}

at::Tensor map_rois_to_levels(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                              int64_t canonical_scale, int64_t canonical_level) {
  detail::check_level_map_args(rois, k_min, k_max);
  const at::Tensor b = rois.size(1) == 5 ? rois.narrow(1, 1, 4) : rois;
  // torchvision's LevelMapper in the boxes' dtype (cpu/roi_align_impl.h's fpn_level).
  const at::Tensor area = (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
  const at::Tensor k =
      ((at::log2(area.sqrt() / static_cast<double>(canonical_scale)) +
        static_cast<double>(canonical_level)) + 1e-6).floor();
  // Written as (level + log2) in the native kernel; addition commutes exactly in IEEE arithmetic.
  const at::Tensor levels = k.clamp(static_cast<double>(k_min), static_cast<double>(k_max))
                                .to(at::kLong) - k_min;
  // Not (k >= k_min), NaN included, is the lowest level.
  return at::where(k >= static_cast<double>(k_min), levels, at::zeros_like(levels));
}

at::Tensor multilevel_roi_align(at::TensorList features, const at::Tensor& rois,
                                int64_t output_size, int64_t sampling_ratio, bool aligned,
                                at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                                int64_t canonical_level) {
  constexpr const char* kOp = "mrcnn::multilevel_roi_align";
  const auto range = detail::fpn_level_range(spatial_scales, features.size(), kOp);
  const at::ScalarType dtype = features[0].scalar_type();
  const std::vector<at::Tensor> feats = float32_island(features);
  const at::Tensor r = island_rois(rois, dtype);
  const at::Tensor& f0 = feats[0];
  detail::check_multilevel_args(feats, r, output_size, canonical_scale, kOp);
  TORCH_CHECK(r.device() == f0.device(), kOp, ": expected rois on ", f0.device(), ", got ",
              r.device());
  const at::Tensor level =
      map_rois_to_levels(r, range.k_min, range.k_max, canonical_scale, canonical_level);
  return pool(feats, r, level, spatial_scales, output_size, output_size, sampling_ratio, aligned)
      .to(dtype);
}

namespace {

TORCH_LIBRARY_FRAGMENT(mrcnn_portable, m) {
  m.def(
      "roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
      "int pooled_width, int sampling_ratio, bool aligned) -> Tensor",
      TORCH_FN(portable::roi_align));
  m.def(
      "multilevel_roi_align(Tensor[] features, Tensor rois, int output_size, int sampling_ratio, "
      "bool aligned, float[] spatial_scales, int canonical_scale=224, int canonical_level=4) "
      "-> Tensor",
      TORCH_FN(portable::multilevel_roi_align));
  m.def(
      "map_rois_to_levels(Tensor rois, int k_min, int k_max, int canonical_scale=224, "
      "int canonical_level=4) -> Tensor",
      TORCH_FN(portable::map_rois_to_levels));
}

}  // namespace
}  // namespace mrcnn::ops::portable
