// Host-side launch code shared by the CUDA RoIAlign ops (single and multi-level): views of the
// levels, per-image RoI lists for the deterministic backward, and the three launches. Every
// launch runs on the current stream of the tensors' device and is checked.
#pragma once

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "model/ops/cuda/roi_align_device.cuh"
#include "model/ops/device_faults.h"

namespace mrcnn::ops::cuda {

// The fault word of the tensor's device, for the kernels (device_faults.h).
inline int* fault_word(const at::Tensor& like) {
  return device_fault_word(like.device()).data_ptr<int>();
}

template <typename T>
LevelView<T> level_view(const at::Tensor& t, double spatial_scale) {
  LevelView<T> v;
  v.data = t.data_ptr<T>();
  v.sn = t.stride(0);
  v.sc = t.stride(1);
  v.sh = t.stride(2);
  v.sw = t.stride(3);
  v.height = static_cast<int>(t.size(2));
  v.width = static_cast<int>(t.size(3));
  v.spatial_scale = static_cast<float>(spatial_scale);
  return v;
}

// Whether the kernels give consecutive threads consecutive channels (bin_index): on channels-last
// maps, unless MRCNN_ROI_ALIGN_SPATIAL_THREADS=1 asks for torchvision's order everywhere (for A/B
// timings; the results are the same bits).
inline bool channels_fastest(int64_t channel_stride) {
  static const bool spatial = [] {
    const char* v = std::getenv("MRCNN_ROI_ALIGN_SPATIAL_THREADS");
    return v != nullptr && std::string(v) == "1";
  }();
  return channel_stride == 1 && !spatial;
}

template <typename T>
void launch_forward(const LevelViews<T>& levels, const at::Tensor& rois,
                    const at::Tensor& roi_levels, int64_t channels, int64_t pooled_height,
                    int64_t pooled_width, int64_t sampling_ratio, bool aligned,
                    at::Tensor& output) {
  const int64_t n = output.numel();
  if (n == 0) return;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  roi_align_forward_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, stream>>>(
      n, levels, rois.const_data_ptr<at::opmath_type<T>>(),
      roi_levels.defined() ? roi_levels.const_data_ptr<int64_t>() : nullptr,
      static_cast<int>(channels), static_cast<int>(pooled_height), static_cast<int>(pooled_width),
      static_cast<int>(sampling_ratio), aligned, channels_fastest(levels.level[0].sc),
      output.data_ptr<T>(), output.stride(0),
      output.stride(1), output.stride(2), output.stride(3));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Backward into `grads` (one per level, allocated by the caller: zeroed for the atomic path,
// uninitialized for the deterministic one, which writes every element).
template <typename T>
void launch_backward(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& roi_levels,
                     std::vector<at::Tensor>& grads, const std::vector<double>& scales,
                     int64_t batch_size, int64_t channels, int64_t pooled_height,
                     int64_t pooled_width, int64_t sampling_ratio, bool aligned,
                     bool deterministic) {
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t* lv_ptr = roi_levels.defined() ? roi_levels.const_data_ptr<int64_t>() : nullptr;
  if (!deterministic) {
    const int64_t n = grad.numel();
    if (n == 0) return;
    LevelViews<T> views;
    views.count = static_cast<int>(grads.size());
    views.batch_size = static_cast<int>(batch_size);
    views.fault = fault_word(grad);
    for (size_t l = 0; l < grads.size(); ++l) views.level[l] = level_view<T>(grads[l], scales[l]);
    roi_align_backward_atomic_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, stream>>>(
        n, grad.const_data_ptr<T>(), grad.stride(0), grad.stride(1), grad.stride(2),
        grad.stride(3), views, rois.const_data_ptr<T>(), lv_ptr, static_cast<int>(channels),
        static_cast<int>(pooled_height), static_cast<int>(pooled_width),
        static_cast<int>(sampling_ratio), aligned, channels_fastest(views.level[0].sc));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  // Per-image RoI lists in increasing RoI index: a stable sort of the batch indices, and the
  // offsets of each image in it (counts by one-hot sums: no host synchronization).
  const at::Tensor batch_idx = rois.select(1, 0).to(at::kLong);
  const auto [sorted_idx, sorted_order] =
      batch_idx.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor order = sorted_order.contiguous();
  // offsets[n] = RoIs with an index below n: invalid indices (< 0, >= N) fall outside every
  // image's window, so they cannot shift the valid ones (the kernels flag them).
  const at::Tensor offsets =
      at::searchsorted(sorted_idx, at::arange(batch_size + 1, batch_idx.options())).contiguous();
  int* const fault = fault_word(grad);
  for (size_t l = 0; l < grads.size(); ++l) {
    at::Tensor& g = grads[l];
    if (g.numel() == 0) continue;
    const LevelView<T> view = level_view<T>(g, scales[l]);
    const int tiles_x = static_cast<int>(ceil_div(view.width, kGatherTile));
    const int tiles_y = static_cast<int>(ceil_div(view.height, kGatherTile));
    const dim3 blocks(static_cast<unsigned>(tiles_x * tiles_y),
                      static_cast<unsigned>(ceil_div(channels, kGatherChannels)),
                      static_cast<unsigned>(batch_size));
    TORCH_CHECK(blocks.y <= 65535 && blocks.z <= 65535,
                "roi_align deterministic backward: too many channels or images (", channels,
                ", ", batch_size, ")");
    roi_align_backward_gather_kernel<T><<<blocks, kGatherThreads, 0, stream>>>(
        grad.const_data_ptr<T>(), grad.stride(0), grad.stride(1), grad.stride(2), grad.stride(3),
        view, static_cast<int>(l), rois.const_data_ptr<T>(), lv_ptr,
        order.const_data_ptr<int64_t>(), offsets.const_data_ptr<int64_t>(),
        static_cast<int>(channels), static_cast<int>(pooled_height),
        static_cast<int>(pooled_width), static_cast<int>(sampling_ratio), aligned, tiles_x,
        tiles_y, static_cast<int>(grads.size()), static_cast<int>(batch_size), fault);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// Allocates a gradient buffer in the requested format: zeros for the atomic path, uninitialized
// for the deterministic one (it writes every element). `options` carry the accumulation dtype
// (float32 for a float16/bfloat16 gradient).
inline at::Tensor make_grad_buffer(at::IntArrayRef sizes, const at::TensorOptions& options,
                                   bool channels_last, bool deterministic) {
  at::Tensor t = at::empty(sizes, options, channels_last ? at::MemoryFormat::ChannelsLast
                                                         : at::MemoryFormat::Contiguous);
  if (!deterministic) t.zero_();
  return t;
}

inline bool deterministic_backward() {
  return at::globalContext().deterministicAlgorithms();
}

}  // namespace mrcnn::ops::cuda
