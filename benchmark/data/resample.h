// Bilinear image resampling, bit-exact with PIL's Image.resize(size, Image.BILINEAR), which is
// what the reference pipeline (torchvision.transforms.functional.resize on PIL images) runs:
// a separable triangle filter whose support widens with the downscale factor (antialiasing),
// 22-bit fixed-point weights, horizontal pass first, each pass rounded and clamped to 8 bits.
//
// Two entry points:
//   resize_bilinear(img, h, w)          -> a resized 8-bit RGB image (tests, the synthetic writer);
//   resize_normalize_into(img, ..., dst) -> the training path in one sweep: resize, optional
//       horizontal mirror, channel order and per-channel normalization through a 256-entry table,
//       HWC -> CHW, written into a padded float32 slot whose padding is set to 0.
//
// Thread-safety: pure functions of their arguments; a PixelTable is immutable once built.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "benchmark/data/image_codec.h"

namespace mrcnn::data {

// The filter taps of one axis: output i reads inputs first[i] .. first[i]+count[i]-1 with weights
// coeffs[i*ksize .. i*ksize+count[i]) (sum 1 << kPrecisionBits), as PIL computes them.
//
// The same taps as fixed-width windows, for loops with a constant trip count: output i reads
// window_first[i] .. window_first[i]+window-1 with window_coeffs[i*window ..]; the window lies
// inside the input and the taps outside the PIL range have weight 0. All weights are
// non-negative, so integer sums over the window equal PIL's sums exactly.
struct ResampleAxis {
  static constexpr int kPrecisionBits = 32 - 8 - 2;
  int64_t in_size = 0;
  int64_t out_size = 0;
  int64_t ksize = 0;
  std::vector<int32_t> first;
  std::vector<int32_t> count;
  std::vector<int32_t> coeffs;
  int64_t window = 0;  // min(ksize, in_size)
  std::vector<int32_t> window_first;
  std::vector<int32_t> window_coeffs;

  // REQUIRES: in_size > 0, out_size > 0.
  ResampleAxis(int64_t in_size, int64_t out_size);

  // The taps with the outputs in reverse order: resampling with it yields the mirrored image.
  ResampleAxis mirrored() const;
};

// Per output channel c (after the BGR/RGB choice), value[c][v] for source byte v:
//   to_bgr255: (float(v) / 255 * 255 - mean[c]) / std[c]   -- the reference's ToTensor, x255
//   otherwise: (float(v) / 255 - mean[c]) / std[c]          -- torchvision's ToTensor, Normalize
// computed in float32 in that order, so the table equals the reference's arithmetic bit for bit.
// When every entry equals float(v) - offset[c] exactly (the MLPerf preset: BGR 0..255, std 1),
// `subtract_only` is set and resize_normalize_into computes that subtraction with SIMD.
struct PixelTable {
  bool bgr = true;  // output channel 0 is the source's blue
  std::array<std::array<float, 256>, 3> value{};
  bool subtract_only = false;
  std::array<float, 3> offset{};

  // Throws std::invalid_argument on a non-finite mean or a zero or non-finite std.
  PixelTable(bool to_bgr255, const std::array<float, 3>& mean, const std::array<float, 3>& stddev);
  int source_channel(int c) const { return bgr ? 2 - c : c; }
};

Image resize_bilinear(const Image& src, int64_t out_h, int64_t out_w);

// Writes `src` resized to out_h x out_w (mirrored left-right when `flip`), normalized through
// `table`, as planes of a float32 [3, dst_h, dst_w] contiguous buffer at `dst`; every element
// outside the out_h x out_w top-left region is set to 0. REQUIRES: out_h <= dst_h, out_w <= dst_w.
void resize_normalize_into(const Image& src, int64_t out_h, int64_t out_w, bool flip,
                           const PixelTable& table, float* dst, int64_t dst_h, int64_t dst_w);

}  // namespace mrcnn::data
