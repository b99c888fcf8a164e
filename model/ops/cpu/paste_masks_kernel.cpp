// CPU kernels of mrcnn::paste_masks_in_image and its thresholded variant. One detection is one
// task: its image plane is zeroed and only the window its box covers is interpolated.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/ops/detail/paste_masks_check.h"
#include "model/ops/detail/paste_masks_geometry.h"

namespace mrcnn::ops {
namespace {

// Writes detection d's pasted mask through `put(row_ptr, x, value)`; `plane` is zeroed first.
template <typename T, typename Out, typename Put>
void paste_all(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h, int64_t im_w,
               int64_t padding, Out* out, Put put) {
  const int64_t num = masks.size(0);
  const int64_t mh = masks.size(1);
  const int64_t mw = masks.size(2);
  const int64_t ph = mh + 2 * padding;  // padded mask size
  const int64_t pw = mw + 2 * padding;
  // torchvision: scale = float(M + 2 * padding) / M with M = the mask's last dimension.
  const float scale = static_cast<float>(static_cast<double>(mw + 2 * padding) /
                                         static_cast<double>(mw));
  const T* m = masks.const_data_ptr<T>();
  const float* b = boxes.const_data_ptr<float>();
  const int64_t plane = im_h * im_w;
  at::parallel_for(0, num, 1, [&](int64_t d0, int64_t d1) {
    std::vector<detail::LinearTap> xs;
    for (int64_t d = d0; d < d1; ++d) {
      Out* o = out + d * plane;
      std::memset(o, 0, static_cast<size_t>(plane) * sizeof(Out));
      const float* bb = b + 4 * d;
      TORCH_CHECK(std::isfinite(bb[0]) && std::isfinite(bb[1]) && std::isfinite(bb[2]) &&
                      std::isfinite(bb[3]),
                  "mrcnn::paste_masks_in_image: boxes[", d, "] is not finite");
      const detail::PasteBox p = detail::paste_box(bb[0], bb[1], bb[2], bb[3], scale, im_h, im_w);
      if (p.ix1 <= p.ix0 || p.iy1 <= p.iy0) continue;
      // Value of padded-mask pixel (y, x): 0 in the padding.
      const T* md = m + d * mh * mw;
      auto at_padded = [&](int64_t y, int64_t x) -> float {
        const int64_t yy = y - padding;
        const int64_t xx = x - padding;
        if (yy < 0 || yy >= mh || xx < 0 || xx >= mw) return 0.0f;
        return static_cast<float>(md[yy * mw + xx]);
      };
      xs.resize(static_cast<size_t>(p.ix1 - p.ix0));
      for (int64_t x = p.ix0; x < p.ix1; ++x) {
        xs[static_cast<size_t>(x - p.ix0)] = detail::linear_tap(x - p.x0, pw, p.w);
      }
      for (int64_t y = p.iy0; y < p.iy1; ++y) {
        const detail::LinearTap ty = detail::linear_tap(y - p.y0, ph, p.h);
        const float h1 = ty.lambda;
        const float h0 = 1.0f - h1;
        Out* row = o + y * im_w;
        for (int64_t x = p.ix0; x < p.ix1; ++x) {
          const detail::LinearTap& tx = xs[static_cast<size_t>(x - p.ix0)];
          const float w1 = tx.lambda;
          const float w0 = 1.0f - w1;
          const int64_t y0 = ty.i0, y1 = ty.i0 + ty.step;
          const int64_t x0 = tx.i0, x1 = tx.i0 + tx.step;
          // ATen's bilinear upsample: rows first interpolated along x, then combined along y.
          const float top = at_padded(y0, x0) * w0 + at_padded(y0, x1) * w1;
          const float bottom = at_padded(y1, x0) * w0 + at_padded(y1, x1) * w1;
          put(row, x, top * h0 + bottom * h1);
        }
      }
    }
  });
}

at::Tensor paste_kernel(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                        int64_t im_w, int64_t padding) {
  detail::check_paste_inputs(masks, boxes, im_h, im_w, padding, "mrcnn::paste_masks_in_image");
  at::Tensor out = at::empty({masks.size(0), im_h, im_w}, masks.options());
  if (out.numel() == 0) return out;
  const at::Tensor m = masks.contiguous();
  const at::Tensor b = boxes.to(at::kFloat).contiguous();
  AT_DISPATCH_FLOATING_TYPES(masks.scalar_type(), "mrcnn_paste_masks", [&] {
    paste_all<scalar_t, scalar_t>(m, b, im_h, im_w, padding, out.mutable_data_ptr<scalar_t>(),
                                  [](scalar_t* row, int64_t x, float v) {
                                    row[x] = static_cast<scalar_t>(v);
                                  });
  });
  return out;
}

at::Tensor paste_binary_kernel(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                               int64_t im_w, int64_t padding, double threshold) {
  detail::check_paste_inputs(masks, boxes, im_h, im_w, padding,
                             "mrcnn::paste_masks_in_image_binary");
  at::Tensor out = at::empty({masks.size(0), im_h, im_w}, masks.options().dtype(at::kByte));
  if (out.numel() == 0) return out;
  const at::Tensor m = masks.contiguous();
  const at::Tensor b = boxes.to(at::kFloat).contiguous();
  AT_DISPATCH_FLOATING_TYPES(masks.scalar_type(), "mrcnn_paste_masks_binary", [&] {
    // Threshold the value the float paste would store, compared in the masks' dtype as
    // `tensor > python_float` compares.
    const scalar_t thr = static_cast<scalar_t>(threshold);
    paste_all<scalar_t, uint8_t>(m, b, im_h, im_w, padding, out.mutable_data_ptr<uint8_t>(),
                                 [thr](uint8_t* row, int64_t x, float v) {
                                   row[x] = static_cast<scalar_t>(v) > thr;
                                 });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("paste_masks_in_image", TORCH_FN(paste_kernel));
  m.impl("paste_masks_in_image_binary", TORCH_FN(paste_binary_kernel));
}

}  // namespace mrcnn::ops
