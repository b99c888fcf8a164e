// Internal helper of the mask-paste kernels (CPU and CUDA, host and device code): torchvision's
// box expansion and bilinear source coordinates, written once.
#pragma once

#include <c10/macros/Macros.h>

#include <cstdint>

namespace mrcnn::ops::detail {

// float arithmetic rounded step by step on the device too (nvcc would otherwise fuse a multiply
// and an add into one FMA, and a truncated box coordinate could then differ from the CPU's).
C10_HOST_DEVICE inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
C10_HOST_DEVICE inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
C10_HOST_DEVICE inline float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// Where one mask goes: the expanded integer box (x0, y0, x2, y2) and the size (w, h) of the
// resized mask, as torchvision's expand_boxes + paste_mask_in_image compute them; and the
// image window [ix0, ix1) x [iy0, iy1) it covers (empty when the box misses the image).
struct PasteBox {
  int64_t x0 = 0, y0 = 0;
  int64_t w = 1, h = 1;
  int64_t ix0 = 0, ix1 = 0, iy0 = 0, iy1 = 0;
};

// box: x1, y1, x2, y2 in float32 (the dtype torchvision computes the expansion in);
// scale = (M + 2 * padding) / M rounded to float32.
C10_HOST_DEVICE inline PasteBox paste_box(float bx1, float by1, float bx2, float by2, float scale,
                                          int64_t im_h, int64_t im_w) {
  const float w_half = mul_rn(mul_rn(sub_rn(bx2, bx1), 0.5f), scale);
  const float h_half = mul_rn(mul_rn(sub_rn(by2, by1), 0.5f), scale);
  const float x_c = mul_rn(add_rn(bx2, bx1), 0.5f);
  const float y_c = mul_rn(add_rn(by2, by1), 0.5f);
  // .to(torch.int64): truncation toward zero.
  const int64_t x0 = static_cast<int64_t>(sub_rn(x_c, w_half));
  const int64_t y0 = static_cast<int64_t>(sub_rn(y_c, h_half));
  const int64_t x2 = static_cast<int64_t>(add_rn(x_c, w_half));
  const int64_t y2 = static_cast<int64_t>(add_rn(y_c, h_half));
  PasteBox p;
  p.x0 = x0;
  p.y0 = y0;
  p.w = x2 - x0 + 1;
  p.h = y2 - y0 + 1;
  if (p.w < 1) p.w = 1;
  if (p.h < 1) p.h = 1;
  p.ix0 = x0 > 0 ? x0 : 0;
  p.iy0 = y0 > 0 ? y0 : 0;
  p.ix1 = x2 + 1 < im_w ? x2 + 1 : im_w;
  p.iy1 = y2 + 1 < im_h ? y2 + 1 : im_h;
  if (p.ix1 < p.ix0) p.ix1 = p.ix0;
  if (p.iy1 < p.iy0) p.iy1 = p.iy0;
  return p;
}

// Bilinear source index and weight along one axis of an align_corners=false resize from
// `in_size` to `out_size` (ATen's area_pixel_compute_source_index + guard_index_and_lambda, in
// float): sample i0 with weight 1 - lambda and i0 + step with weight lambda.
struct LinearTap {
  int64_t i0 = 0;
  int64_t step = 0;
  float lambda = 0;
};

C10_HOST_DEVICE inline LinearTap linear_tap(int64_t dst, int64_t in_size, int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  float src = sub_rn(mul_rn(scale, add_rn(static_cast<float>(dst), 0.5f)), 0.5f);
  if (src < 0) src = 0;
  LinearTap t;
  int64_t i = static_cast<int64_t>(src);  // src >= 0: truncation is floor
  if (i > in_size - 1) i = in_size - 1;
  float l = sub_rn(src, static_cast<float>(i));
  if (l < 0) l = 0;
  if (l > 1) l = 1;
  t.i0 = i;
  t.step = i < in_size - 1 ? 1 : 0;
  t.lambda = l;
  return t;
}

}  // namespace mrcnn::ops::detail
