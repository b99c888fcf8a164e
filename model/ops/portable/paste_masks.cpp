// Portable mask paste: torchvision's paste_masks_in_image (paste_masks.h) composed of standard
// ATen operators, bit-identical to the CPU kernel (cpu/paste_masks_kernel.cpp).
//
// The geometry is paste_masks_geometry.h's, expression for expression in float32 on tensors: per
// detection the expanded integer box; per detection and image column x ([D, W]) and image row y
// ([D, H]) the bilinear source index, step and weight (linear_tap). The interpolation is separable
// in the kernel's order: each padded mask row is interpolated at every image column first
// (a [D, M + 2p, W] tensor, small), then two of those rows are gathered per image row and combined
// as (top * h0) + (bottom * h1), every product and sum a separately rounded float32 operation, as
// in the kernel. Pixels outside the box's window (or of a box that misses the image) are 0. The
// values are float32 whatever the masks' dtype (the kernel reads them as float) and stored in it;
// the binary variant compares them in the masks' dtype, `> threshold`, as the kernel does.
//
// Detections go in chunks of about 2^24 image pixels, so memory stays at the output plus two
// chunk-sized float intermediates (the binary variant never holds all the float values).
// A non-finite box throws on the CPU (the kernel's message); elsewhere it sets kFaultPasteBox in
// the fault word and pastes nothing, as the CUDA kernel does.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>

#include "model/ops/detail/paste_masks_check.h"
#include "model/ops/portable/portable.h"
#include "model/ops/portable/value_checks.h"

namespace mrcnn::ops::portable {
namespace {

constexpr int64_t kChunkPixels = int64_t{1} << 24;

// The expanded box of each detection (paste_masks_geometry.h paste_box), int64 [n, 1] each.
struct Box {
  at::Tensor x0, y0, x2, y2;  // inclusive corners
  at::Tensor w, h;            // size of the resized mask, >= 1
};

Box expand_boxes(const at::Tensor& boxes, float scale) {
  const at::Tensor bx1 = boxes.narrow(1, 0, 1), by1 = boxes.narrow(1, 1, 1);
  const at::Tensor bx2 = boxes.narrow(1, 2, 1), by2 = boxes.narrow(1, 3, 1);
  const double s = static_cast<double>(scale);  // exact: the float scale again
  const at::Tensor w_half = ((bx2 - bx1) * 0.5) * s;
  const at::Tensor h_half = ((by2 - by1) * 0.5) * s;
  const at::Tensor x_c = (bx2 + bx1) * 0.5;
  const at::Tensor y_c = (by2 + by1) * 0.5;
  Box b;  // .to(torch.int64): truncation toward zero
  b.x0 = (x_c - w_half).to(at::kLong);
  b.y0 = (y_c - h_half).to(at::kLong);
  b.x2 = (x_c + w_half).to(at::kLong);
  b.y2 = (y_c + h_half).to(at::kLong);
  b.w = (b.x2 - b.x0 + 1).clamp_min(1);
  b.h = (b.y2 - b.y0 + 1).clamp_min(1);
  return b;
}

// linear_tap for every destination index dst [n, N] of a resize from in_size to out_size [n, 1]:
// sample i0 with weight w0 = 1 - lambda and i1 = i0 + step with weight w1 = lambda.
struct Taps {
  at::Tensor i0, i1;  // int64 [n, N]
  at::Tensor w0, w1;  // float [n, N]
};

Taps linear_taps(const at::Tensor& dst, int64_t in_size, const at::Tensor& out_size) {
  const at::Tensor scale = static_cast<double>(in_size) / out_size.to(at::kFloat);
  const at::Tensor src = ((scale * (dst.to(at::kFloat) + 0.5)) - 0.5).clamp_min(0.0);
  const at::Tensor i = src.to(at::kLong).clamp_max(in_size - 1);  // src >= 0: truncation is floor
  Taps t;
  t.w1 = (src - i.to(at::kFloat)).clamp(0.0, 1.0);
  t.w0 = 1.0 - t.w1;
  t.i0 = i;
  t.i1 = i + (i < in_size - 1).to(at::kLong);
  return t;
}

// Flat row indices [n * N] of rows `index` [n, N] of each detection's [R, C] table stacked as
// [n * R, C].
at::Tensor flat_rows(const at::Tensor& index, int64_t rows) {
  const at::Tensor base = at::arange(index.size(0), index.options()).mul_(rows).unsqueeze(1);
  return (index + base).reshape({-1});
}

// Writes the float32 values of n detections into dst [n, im_h, im_w] (contiguous): masks float
// [n, M, M], boxes float [n, 4] (finite; `skip` [n] pastes nothing).
void paste_values(const at::Tensor& masks, const at::Tensor& boxes, const at::Tensor& skip,
                  int64_t padding, float scale, const at::Tensor& dst) {
  const int64_t n = dst.size(0), im_h = dst.size(1), im_w = dst.size(2);
  const at::Tensor padded =
      at::constant_pad_nd(masks, {padding, padding, padding, padding}, 0.0);  // [n, ph, pw]
  const int64_t ph = padded.size(1), pw = padded.size(2);
  const Box box = expand_boxes(boxes, scale);
  const at::Tensor xs = at::arange(im_w, box.x0.options()).unsqueeze(0);
  const at::Tensor ys = at::arange(im_h, box.y0.options()).unsqueeze(0);
  const Taps tx = linear_taps(xs - box.x0, pw, box.w);  // [n, W]
  const Taps ty = linear_taps(ys - box.y0, ph, box.h);  // [n, H]
  // The window: x0 <= x <= x2 and y0 <= y <= y2 within the image.
  const at::Tensor keep = skip.logical_not().unsqueeze(1);
  const at::Tensor row_in = (ys >= box.y0).logical_and_(ys <= box.y2).logical_and_(keep);
  const at::Tensor col_in = (xs >= box.x0).logical_and_(xs <= box.x2).logical_and_(keep);
  // Along x, every padded row at every image column, top * w0 + bottom * w1 per the kernel:
  // [n, W, ph] -> [n, ph, W]; 0 outside the window's columns, and a row of 0s appended for the
  // image rows outside it (0 * h0 + 0 * h1 is the kernel's +0 there: the weights are in [0, 1]).
  const at::Tensor columns = padded.transpose(1, 2).contiguous().view({n * pw, ph});
  const at::Tensor along_x =
      (columns.index_select(0, flat_rows(tx.i0, pw)).view({n, im_w, ph}) * tx.w0.unsqueeze(2)) +
      (columns.index_select(0, flat_rows(tx.i1, pw)).view({n, im_w, ph}) * tx.w1.unsqueeze(2));
  const at::Tensor table =
      at::cat({along_x.transpose(1, 2).masked_fill(col_in.logical_not().unsqueeze(1), 0.0),
               at::zeros({n, 1, im_w}, along_x.options())},
              1)
          .view({n * (ph + 1), im_w});
  const at::Tensor y0 = at::where(row_in, ty.i0, ph), y1 = at::where(row_in, ty.i1, ph);
  // Along y: (top * h0) + (bottom * h1), each operation rounded as in the kernel.
  at::Tensor out = dst.view({n * im_h, im_w});
  at::index_select_out(out, table, 0, flat_rows(y0, ph + 1));
  dst.mul_(ty.w0.unsqueeze(2));
  const at::Tensor bottom = table.index_select(0, flat_rows(y1, ph + 1)).view({n, im_h, im_w});
  dst.add_(bottom.mul_(ty.w1.unsqueeze(2)));
}

// Both variants: the float result in the masks' dtype, or (threshold) uint8 value > threshold.
at::Tensor paste(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h, int64_t im_w,
                 int64_t padding, std::optional<double> threshold, const char* op) {
  detail::check_paste_inputs(masks, boxes, im_h, im_w, padding, op);
  const at::ScalarType dtype = masks.scalar_type();
  at::Tensor out = at::empty({masks.size(0), im_h, im_w},
                             masks.options().dtype(threshold ? at::kByte : dtype));
  if (out.numel() == 0) return out;
  const at::Tensor b = boxes.to(at::kFloat);
  const at::Tensor bad = b.isfinite().all(1).logical_not();
  check_values(bad, kFaultPasteBox, [](int64_t d) {
    return "mrcnn::paste_masks_in_image: boxes[" + std::to_string(d) + "] is not finite";
  });
  const at::Tensor safe = b.masked_fill(bad.unsqueeze(1), 0.0f);
  const at::Tensor m = masks.to(at::kFloat);
  // torchvision: scale = float(M + 2 * padding) / M with M = the mask's last dimension.
  const int64_t mw = masks.size(2);
  const auto scale =
      static_cast<float>(static_cast<double>(mw + 2 * padding) / static_cast<double>(mw));
  // The float result is written in place; other dtypes and the binary variant go through a
  // float chunk.
  const bool direct = !threshold && dtype == at::kFloat;
  const int64_t chunk = std::max<int64_t>(1, kChunkPixels / (im_h * im_w));
  for (int64_t d = 0; d < masks.size(0); d += chunk) {
    const int64_t n = std::min(chunk, masks.size(0) - d);
    const at::Tensor dst = direct ? out.narrow(0, d, n) : at::empty({n, im_h, im_w}, m.options());
    paste_values(m.narrow(0, d, n), safe.narrow(0, d, n), bad.narrow(0, d, n), padding, scale, dst);
    if (threshold) {
      out.narrow(0, d, n).copy_(dst.to(dtype).gt(*threshold));
    } else if (!direct) {
      out.narrow(0, d, n).copy_(dst);
    }
  }
  return out;
}

}  // namespace

at::Tensor paste_masks_in_image(const at::Tensor& masks, const at::Tensor& boxes, int64_t im_h,
                                int64_t im_w, int64_t padding) {
  return paste(masks, boxes, im_h, im_w, padding, std::nullopt, "mrcnn::paste_masks_in_image");
}

at::Tensor paste_masks_in_image_binary(const at::Tensor& masks, const at::Tensor& boxes,
                                       int64_t im_h, int64_t im_w, int64_t padding,
                                       double threshold) {
  return paste(masks, boxes, im_h, im_w, padding, threshold, "mrcnn::paste_masks_in_image_binary");
}

TORCH_LIBRARY_FRAGMENT(mrcnn_portable, m) {
  m.def(
      "paste_masks_in_image(Tensor masks, Tensor boxes, int im_h, int im_w, int padding=1) "
      "-> Tensor",
      TORCH_FN(portable::paste_masks_in_image));
  m.def(
      "paste_masks_in_image_binary(Tensor masks, Tensor boxes, int im_h, int im_w, "
      "int padding=1, float threshold=0.5) -> Tensor",
      TORCH_FN(portable::paste_masks_in_image_binary));
}

}  // namespace mrcnn::ops::portable
