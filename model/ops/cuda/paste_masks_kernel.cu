// CUDA kernels of mrcnn::paste_masks_in_image and its thresholded variant: one thread per image
// pixel of every detection, writing the interpolated value inside the box's window and 0
// elsewhere (no separate zero fill). Geometry: paste_masks_geometry.h, shared with the CPU.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "model/ops/cuda/cuda_helpers.h"
#include "model/ops/device_faults.h"
#include "model/ops/detail/paste_masks_check.h"
#include "model/ops/detail/paste_masks_geometry.h"

namespace mrcnn::ops {
namespace {

template <typename T>
__device__ inline float padded_at(const T* m, int64_t mh, int64_t mw, int64_t padding, int64_t y,
                                  int64_t x) {
  const int64_t yy = y - padding;
  const int64_t xx = x - padding;
  if (yy < 0 || yy >= mh || xx < 0 || xx >= mw) return 0.0f;
  return static_cast<float>(m[yy * mw + xx]);
}

template <typename T, typename Out, bool kBinary>
__global__ void paste_kernel(int64_t total, const T* masks, int64_t mh, int64_t mw,
                             int64_t padding, const float* boxes, float scale, int64_t im_h,
                             int64_t im_w, T threshold, Out* out, int* fault) {
  MRCNN_CUDA_1D_KERNEL_LOOP(index, total) {
    const int64_t x = index % im_w;
    const int64_t y = (index / im_w) % im_h;
    const int64_t d = index / (im_w * im_h);
    const float* b = boxes + 4 * d;
    if (!(isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(b[3]))) {
      if (x == 0 && y == 0) atomicOr(fault, kFaultPasteBox);  // once per detection
      out[index] = 0;
      continue;
    }
    const detail::PasteBox p = detail::paste_box(b[0], b[1], b[2], b[3], scale, im_h, im_w);
    float v = 0.0f;
    if (y >= p.iy0 && y < p.iy1 && x >= p.ix0 && x < p.ix1) {
      const detail::LinearTap ty = detail::linear_tap(y - p.y0, mh + 2 * padding, p.h);
      const detail::LinearTap tx = detail::linear_tap(x - p.x0, mw + 2 * padding, p.w);
      const T* m = masks + d * mh * mw;
      const float w1 = tx.lambda, w0 = 1.0f - w1;
      const float h1 = ty.lambda, h0 = 1.0f - h1;
      const int64_t y0 = ty.i0, y1 = ty.i0 + ty.step, x0 = tx.i0, x1 = tx.i0 + tx.step;
      // Explicit rounding (no fused multiply-add): the CPU kernel's values.
      const float top = __fadd_rn(__fmul_rn(padded_at(m, mh, mw, padding, y0, x0), w0),
                                  __fmul_rn(padded_at(m, mh, mw, padding, y0, x1), w1));
      const float bottom = __fadd_rn(__fmul_rn(padded_at(m, mh, mw, padding, y1, x0), w0),
                                     __fmul_rn(padded_at(m, mh, mw, padding, y1, x1), w1));
      v = __fadd_rn(__fmul_rn(top, h0), __fmul_rn(bottom, h1));
    }
    if constexpr (kBinary) {
      out[index] = static_cast<T>(v) > threshold ? 1 : 0;
    } else {
      out[index] = static_cast<T>(v);
    }
  }
}

template <bool kBinary>
at::Tensor paste_cuda(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                      int64_t im_w, int64_t padding, double threshold, const char* op) {
  detail::check_paste_inputs(masks, boxes, im_h, im_w, padding, op);
  TORCH_CHECK(masks.is_cuda(), op, ": expected CUDA tensors, got ", masks.device());
  c10::cuda::CUDAGuard device_guard(masks.device());
  at::Tensor out = at::empty({masks.size(0), im_h, im_w},
                             kBinary ? masks.options().dtype(at::kByte) : masks.options());
  const int64_t total = out.numel();
  if (total == 0) return out;
  const at::Tensor m = masks.contiguous();
  const at::Tensor b = boxes.to(at::kFloat).contiguous();
  int* const fault = device_fault_word(masks.device()).data_ptr<int>();
  const float scale = static_cast<float>(static_cast<double>(masks.size(2) + 2 * padding) /
                                         static_cast<double>(masks.size(2)));
  AT_DISPATCH_FLOATING_TYPES(masks.scalar_type(), "mrcnn_paste_masks_cuda", [&] {
    using Out = std::conditional_t<kBinary, uint8_t, scalar_t>;
    paste_kernel<scalar_t, Out, kBinary>
        <<<cuda::grid_for(total), cuda::kThreadsPerBlock, 0, c10::cuda::getCurrentCUDAStream()>>>(
            total, m.const_data_ptr<scalar_t>(), m.size(1), m.size(2), padding,
            b.const_data_ptr<float>(), scale, im_h, im_w, static_cast<scalar_t>(threshold),
            out.mutable_data_ptr<Out>(), fault);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor paste_float_cuda(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                            int64_t im_w, int64_t padding) {
  return paste_cuda<false>(masks, boxes, im_h, im_w, padding, 0.0, "mrcnn::paste_masks_in_image");
}

at::Tensor paste_binary_cuda(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                             int64_t im_w, int64_t padding, double threshold) {
  return paste_cuda<true>(masks, boxes, im_h, im_w, padding, threshold,
                          "mrcnn::paste_masks_in_image_binary");
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("paste_masks_in_image", TORCH_FN(paste_float_cuda));
  m.impl("paste_masks_in_image_binary", TORCH_FN(paste_binary_cuda));
}

}  // namespace mrcnn::ops
