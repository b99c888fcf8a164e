// CPU kernels of mrcnn::multilevel_roi_align, its backward and mrcnn::map_rois_to_levels
// (engine: roi_align_impl.h). One sampling plan covers every RoI over every level. float16/bfloat16
// features are read as they are and pooled in float32; their gradients accumulate in float32.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "model/ops/cpu/roi_align_impl.h"
#include "model/ops/detail/level_range.h"
#include "model/ops/detail/roi_align_check.h"

namespace mrcnn::ops {
namespace {

constexpr const char* kOp = "mrcnn::multilevel_roi_align";

bool wants_channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
}

template <typename T>
std::vector<int64_t> compute_levels(const T* rois, int64_t num_rois, detail::LevelRange range,
                                    int64_t canonical_scale, int64_t canonical_level) {
  std::vector<int64_t> levels(static_cast<size_t>(num_rois));
  at::parallel_for(0, num_rois, 1024, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const T* r = rois + k * 5;
      levels[static_cast<size_t>(k)] = cpu::fpn_level<T>(r[1], r[2], r[3], r[4], range.k_min,
                                                         range.k_max, canonical_scale,
                                                         canonical_level);
    }
  });
  return levels;
}

void check_cpu_rois(const at::Tensor& rois) {
  TORCH_CHECK(rois.device().is_cpu(), kOp, ": expected rois on the CPU, got ", rois.device());
}

at::Tensor multilevel_forward_kernel(at::TensorList features, const at::Tensor& rois,
                                     int64_t output_size, int64_t sampling_ratio, bool aligned,
                                     at::ArrayRef<double> spatial_scales, int64_t canonical_scale,
                                     int64_t canonical_level) {
  const auto range = detail::fpn_level_range(spatial_scales, features.size(), kOp);
  const at::Tensor& f0 = features[0];
  check_cpu_rois(rois);
  detail::check_multilevel_args(features, rois, output_size, canonical_scale, kOp);
  const int64_t batch = f0.size(0);
  const int64_t channels = f0.size(1);
  std::vector<at::Tensor> inputs;
  std::vector<cpu::LevelGeometry> geometry;
  std::vector<bool> cl;
  for (size_t l = 0; l < features.size(); ++l) {
    const at::Tensor& f = features[l];
    TORCH_CHECK(f.device().is_cpu(), kOp, ": expected CPU features, got ", f.device());
    const bool c = wants_channels_last(f);
    cl.push_back(c);
    inputs.push_back(f.contiguous(c ? at::MemoryFormat::ChannelsLast
                                    : at::MemoryFormat::Contiguous));
    geometry.push_back({f.size(2), f.size(3), spatial_scales[l]});
  }
  const int64_t num_rois = rois.size(0);
  const bool out_cl = cl[0];
  at::Tensor output = at::empty(
      {num_rois, channels, output_size, output_size}, f0.options(),
      out_cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  if (output.numel() == 0) return output;
  const at::Tensor rois_c = rois.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, f0.scalar_type(),
                                  "mrcnn_multilevel_roi_align_forward", [&] {
    using C = at::opmath_type<scalar_t>;
    const C* r = rois_c.const_data_ptr<C>();
    const auto levels = compute_levels<C>(r, num_rois, range, canonical_scale, canonical_level);
    const auto plan = cpu::make_sampling_plan<C>(r, num_rois, levels.data(), geometry, batch,
                                                 output_size, output_size, sampling_ratio,
                                                 aligned);
    std::vector<cpu::LevelData<scalar_t>> views;
    for (size_t l = 0; l < inputs.size(); ++l) {
      const at::Tensor& t = inputs[l];
      cpu::LevelData<scalar_t> lv;
      lv.data = const_cast<scalar_t*>(t.const_data_ptr<scalar_t>());
      lv.channels_last = cl[l];
      lv.stride_n = t.size(1) * t.size(2) * t.size(3);
      lv.stride_c = cl[l] ? 1 : t.size(2) * t.size(3);
      views.push_back(lv);
    }
    cpu::roi_align_forward<scalar_t, C>(plan, views, channels,
                                        output.mutable_data_ptr<scalar_t>(), out_cl);
  });
  return output;
}

std::vector<at::Tensor> multilevel_backward_kernel(
    const at::Tensor& grad, const at::Tensor& rois, at::ArrayRef<double> spatial_scales,
    int64_t output_size, int64_t sampling_ratio, bool aligned, int64_t canonical_scale,
    int64_t canonical_level, int64_t batch_size, int64_t channels, at::IntArrayRef level_heights,
    at::IntArrayRef level_widths, at::IntArrayRef level_channels_last) {
  const size_t num_levels = level_heights.size();
  const auto range = detail::fpn_level_range(spatial_scales, num_levels, kOp);
  check_cpu_rois(rois);
  detail::check_multilevel_backward_args(grad, rois, channels, output_size, canonical_scale,
                                         level_heights, level_widths, level_channels_last, kOp);
  // Reduced-precision gradients accumulate in float32, rounded once at the end.
  const at::ScalarType dtype = grad.scalar_type();
  const at::ScalarType acc = detail::roi_dtype_for(dtype);
  std::vector<at::Tensor> grads;
  std::vector<cpu::LevelGeometry> geometry;
  for (size_t l = 0; l < num_levels; ++l) {
    // (at::zeros ignores a memory format in its options: allocate, then zero.)
    grads.push_back(at::empty({batch_size, channels, level_heights[l], level_widths[l]},
                              grad.options().dtype(acc),
                              level_channels_last[l] ? at::MemoryFormat::ChannelsLast
                                                     : at::MemoryFormat::Contiguous)
                        .zero_());
    geometry.push_back({level_heights[l], level_widths[l], spatial_scales[l]});
  }
  if (grad.numel() == 0) return detail::rounded_to(std::move(grads), dtype);
  // The incoming gradient is read in the layout of the first level (see roi_align_kernel.cpp).
  const bool grad_cl = level_channels_last[0] != 0;
  const at::Tensor grad_c = grad.to(acc).contiguous(grad_cl ? at::MemoryFormat::ChannelsLast
                                                            : at::MemoryFormat::Contiguous);
  const at::Tensor rois_c = rois.contiguous();
  const int64_t num_rois = rois.size(0);
  AT_DISPATCH_FLOATING_TYPES(acc, "mrcnn_multilevel_roi_align_backward", [&] {
    const scalar_t* r = rois_c.const_data_ptr<scalar_t>();
    const auto levels = compute_levels<scalar_t>(r, num_rois, range, canonical_scale,
                                                 canonical_level);
    const auto plan = cpu::make_sampling_plan<scalar_t>(r, num_rois, levels.data(), geometry,
                                                        batch_size, output_size, output_size,
                                                        sampling_ratio, aligned);
    std::vector<cpu::LevelData<scalar_t>> views;
    for (size_t l = 0; l < num_levels; ++l) {
      cpu::LevelData<scalar_t> lv;
      lv.data = grads[l].mutable_data_ptr<scalar_t>();
      lv.channels_last = level_channels_last[l] != 0;
      lv.stride_n = channels * level_heights[l] * level_widths[l];
      lv.stride_c = lv.channels_last ? 1 : level_heights[l] * level_widths[l];
      views.push_back(lv);
    }
    cpu::roi_align_backward<scalar_t>(plan, views, channels, grad_c.const_data_ptr<scalar_t>(),
                                      grad_cl);
  });
  return detail::rounded_to(std::move(grads), dtype);
}

at::Tensor map_rois_to_levels_kernel(const at::Tensor& rois, int64_t k_min, int64_t k_max,
                                     int64_t canonical_scale, int64_t canonical_level) {
  detail::check_level_map_args(rois, k_min, k_max);
  const at::Tensor boxes = (rois.size(1) == 5 ? rois.narrow(1, 1, 4) : rois).contiguous();
  at::Tensor out = at::empty({rois.size(0)}, rois.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(rois.scalar_type(), "mrcnn_map_rois_to_levels", [&] {
    const scalar_t* b = boxes.const_data_ptr<scalar_t>();
    int64_t* o = out.mutable_data_ptr<int64_t>();
    for (int64_t k = 0; k < boxes.size(0); ++k) {
      o[k] = cpu::fpn_level<scalar_t>(b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3], k_min,
                                      k_max, canonical_scale, canonical_level);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("multilevel_roi_align", TORCH_FN(multilevel_forward_kernel));
  m.impl("_multilevel_roi_align_backward", TORCH_FN(multilevel_backward_kernel));
  m.impl("map_rois_to_levels", TORCH_FN(map_rois_to_levels_kernel));
}

}  // namespace mrcnn::ops
