#include "benchmark/data/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrcnn::data {

namespace {

constexpr int kBits = ResampleAxis::kPrecisionBits;
constexpr int32_t kHalf = int32_t{1} << (kBits - 1);

double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's clip8 (>= 256 << kBits -> 255, <= 0 -> 0, else >> kBits), written branch-free so that
// the loops below vectorize: an arithmetic shift then a clamp gives the same byte.
inline uint8_t clip8(int32_t v) { return static_cast<uint8_t>(std::clamp(v >> kBits, 0, 255)); }

// No horizontal resampling (PIL skips the pass): split the channels, mirrored when `reverse`.
void deinterleave_rows(const Image& src, int64_t y0, int64_t y1, bool reverse, uint8_t* const planes[3]) {
  const int64_t w = src.width;
  for (int64_t y = y0; y < y1; ++y) {
    const uint8_t* row = src.row(y);
    const int64_t o = (y - y0) * w;
    for (int64_t x = 0; x < w; ++x) {
      const int64_t d = o + (reverse ? w - 1 - x : x);
      planes[0][d] = row[3 * x];
      planes[1][d] = row[3 * x + 1];
      planes[2][d] = row[3 * x + 2];
    }
  }
}

// One output row of one plane through the vertical filter: out[x] = clip8(half + sum_t
// rows[t][x] * k[t]) over the row's non-zero taps.
//
// SSE2 has no 32-bit multiply, but it multiplies 16-bit pairs and adds them (pmaddwd). A weight
// k < 2^22 splits into k = kh * 2^11 + kl with kh, kl < 2^11, so for two taps a, b (bytes)
//   a * k0 + b * k1 = ((a * kh0 + b * kh1) << 11) + (a * kl0 + b * kl1),
// both halves one pmaddwd, every partial sum below 2^31: the same integers as PIL's, 16 outputs
// at a time. The final shift and the two saturating packs are exactly clip8.
void vertical_row(const uint8_t* const* rows, const int32_t* k, int taps, int64_t out_w,
                  uint8_t* __restrict out) {
  int64_t x = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; x + 16 <= out_w; x += 16) {
    __m128i acc[4];
    for (__m128i& a : acc) a = _mm_set1_epi32(kHalf);
    for (int t = 0; t < taps; t += 2) {
      const bool pair = t + 1 < taps;
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + x));
      const __m128i b = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t + 1] + x)) : zero;
      const int32_t k0 = k[t], k1 = pair ? k[t + 1] : 0;
      const __m128i kh = _mm_set1_epi32(((k1 >> 11) << 16) | (k0 >> 11));
      const __m128i kl = _mm_set1_epi32(((k1 & 0x7FF) << 16) | (k0 & 0x7FF));
      const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
      const __m128i p[4] = {_mm_unpacklo_epi8(ab_lo, zero), _mm_unpackhi_epi8(ab_lo, zero),
                            _mm_unpacklo_epi8(ab_hi, zero), _mm_unpackhi_epi8(ab_hi, zero)};
      for (int i = 0; i < 4; ++i)
        acc[i] = _mm_add_epi32(acc[i], _mm_add_epi32(_mm_slli_epi32(_mm_madd_epi16(p[i], kh), 11),
                                                     _mm_madd_epi16(p[i], kl)));
    }
    for (__m128i& a : acc) a = _mm_srai_epi32(a, kBits);
    const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc[0], acc[1]), _mm_packs_epi32(acc[2], acc[3]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x), packed);
  }
#endif
  for (; x < out_w; ++x) {
    int32_t s = kHalf;
    for (int t = 0; t < taps; ++t) s += static_cast<int32_t>(rows[t][x]) * k[t];
    out[x] = clip8(s);
  }
}

// One row of bytes to normalized floats for output channel c: the table lookup, or, where the
// table is exactly float(v) - offset (MLPerf: BGR 0..255, std 1), that subtraction with SIMD.
void normalize_row(const uint8_t* in, int64_t n, const PixelTable& table, int c, float* __restrict out) {
  int64_t x = 0;
#if defined(__SSE2__)
  if (table.subtract_only) {
    const __m128i zero = _mm_setzero_si128();
    const __m128 off = _mm_set1_ps(table.offset[c]);
    for (; x + 16 <= n; x += 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + x));
      const __m128i w[2] = {_mm_unpacklo_epi8(b, zero), _mm_unpackhi_epi8(b, zero)};
      for (int h = 0; h < 2; ++h) {
        _mm_storeu_ps(out + x + 8 * h, _mm_sub_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(w[h], zero)), off));
        _mm_storeu_ps(out + x + 8 * h + 4, _mm_sub_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(w[h], zero)), off));
      }
    }
  }
#endif
  const float* lut = table.value[c].data();
  for (; x < n; ++x) out[x] = lut[in[x]];
}

// Horizontal taps regrouped for the SIMD pass: pairs of adjacent taps (a 16-bit load fetches
// both bytes), weights split into 11-bit halves as in vertical_row, laid out pair-major so that
// the weights of consecutive outputs are contiguous: kh[(j * out + i) * 2 + s] for tap 2j+s.
struct PairedTaps {
  int64_t pairs = 0;
  int64_t out = 0;
  std::vector<int32_t> first;
  std::vector<int16_t> kh, kl;

  explicit PairedTaps(const ResampleAxis& ax)
      : pairs((ax.window + 1) / 2), out(ax.out_size), first(ax.window_first) {
    kh.assign(static_cast<size_t>(pairs * out * 2), 0);
    kl.assign(kh.size(), 0);
    for (int64_t i = 0; i < out; ++i)
      for (int64_t t = 0; t < ax.window; ++t) {
        const int32_t k = ax.window_coeffs[static_cast<size_t>(i * ax.window + t)];
        const auto at = static_cast<size_t>(((t / 2) * out + i) * 2 + t % 2);
        kh[at] = static_cast<int16_t>(k >> 11);
        kl[at] = static_cast<int16_t>(k & 0x7FF);
      }
  }
};

// One row of one plane resampled horizontally. `in` must be readable 2 * pairs bytes past each
// window start (the caller pads its rows).
void horizontal_plane_row(const uint8_t* in, const PairedTaps& h, uint8_t* __restrict out) {
  int64_t x = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  auto word = [&](int64_t i, int64_t j) {
    uint16_t w;
    std::memcpy(&w, in + h.first[static_cast<size_t>(i)] + 2 * j, sizeof w);
    return static_cast<int>(w);
  };
  for (; x + 8 <= h.out; x += 8) {
    __m128i acc[2] = {_mm_set1_epi32(kHalf), _mm_set1_epi32(kHalf)};
    for (int64_t j = 0; j < h.pairs; ++j) {
      __m128i v = zero;  // bytes a_i b_i of outputs x..x+7
      v = _mm_insert_epi16(v, word(x, j), 0);
      v = _mm_insert_epi16(v, word(x + 1, j), 1);
      v = _mm_insert_epi16(v, word(x + 2, j), 2);
      v = _mm_insert_epi16(v, word(x + 3, j), 3);
      v = _mm_insert_epi16(v, word(x + 4, j), 4);
      v = _mm_insert_epi16(v, word(x + 5, j), 5);
      v = _mm_insert_epi16(v, word(x + 6, j), 6);
      v = _mm_insert_epi16(v, word(x + 7, j), 7);
      const __m128i p[2] = {_mm_unpacklo_epi8(v, zero), _mm_unpackhi_epi8(v, zero)};
      const auto base = static_cast<size_t>((j * h.out + x) * 2);
      for (int q = 0; q < 2; ++q) {
        const __m128i kh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&h.kh[base + 8 * q]));
        const __m128i kl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&h.kl[base + 8 * q]));
        acc[q] = _mm_add_epi32(acc[q], _mm_add_epi32(_mm_slli_epi32(_mm_madd_epi16(p[q], kh), 11),
                                                     _mm_madd_epi16(p[q], kl)));
      }
    }
    const __m128i s = _mm_packs_epi32(_mm_srai_epi32(acc[0], kBits), _mm_srai_epi32(acc[1], kBits));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + x), _mm_packus_epi16(s, s));
  }
#endif
  for (; x < h.out; ++x) {
    int32_t s = kHalf;
    const uint8_t* p = in + h.first[static_cast<size_t>(x)];
    for (int64_t t = 0; t < 2 * h.pairs; ++t) {
      const auto at = static_cast<size_t>(((t / 2) * h.out + x) * 2 + t % 2);
      s += static_cast<int32_t>(p[t]) * (h.kh[at] * 2048 + h.kl[at]);
    }
    out[x] = clip8(s);
  }
}

// Vertical resampling of one plane row by row; `emit(yy, row)` receives each output row.
template <typename Emit>
void vertical_pass(const uint8_t* plane, int64_t y0, const ResampleAxis& vy, int64_t out_w, Emit&& emit) {
  if (vy.out_size == vy.in_size) {  // no vertical pass (PIL skips it too)
    for (int64_t yy = 0; yy < vy.out_size; ++yy) emit(yy, plane + (yy - y0) * out_w);
    return;
  }
  std::vector<uint8_t> row(static_cast<size_t>(out_w));
  std::vector<const uint8_t*> rows(static_cast<size_t>(vy.window));
  std::vector<int32_t> k(static_cast<size_t>(vy.window));
  for (int64_t yy = 0; yy < vy.out_size; ++yy) {
    int taps = 0;
    for (int64_t t = 0; t < vy.window; ++t) {
      const int32_t kt = vy.window_coeffs[static_cast<size_t>(yy * vy.window + t)];
      if (kt == 0) continue;  // zero weights add nothing: skip the row
      rows[static_cast<size_t>(taps)] = plane + (vy.window_first[static_cast<size_t>(yy)] + t - y0) * out_w;
      k[static_cast<size_t>(taps++)] = kt;
    }
    vertical_row(rows.data(), k.data(), taps, out_w, row.data());
    emit(yy, row.data());
  }
}

struct Planar {
  int64_t y0 = 0;  // first source row held
  std::unique_ptr<uint8_t[]> data;
  uint8_t* planes[3] = {nullptr, nullptr, nullptr};
};

// The horizontal pass over exactly the source rows the vertical pass will read, mirrored when
// `flip` (the output columns in reverse order: the same bytes as mirroring the result).
Planar horizontal_stage(const Image& src, const ResampleAxis& hx, const ResampleAxis& vy, bool flip) {
  Planar p;
  int64_t y1 = src.height;
  if (vy.out_size != vy.in_size) {
    p.y0 = vy.window_first.front();
    y1 = static_cast<int64_t>(vy.window_first.back()) + vy.window;
  }
  const int64_t rows = y1 - p.y0;
  const int64_t plane_size = rows * hx.out_size;
  p.data.reset(new uint8_t[static_cast<size_t>(plane_size * 3)]);
  for (int c = 0; c < 3; ++c) p.planes[c] = p.data.get() + c * plane_size;
  if (hx.out_size == hx.in_size) {
    deinterleave_rows(src, p.y0, y1, flip, p.planes);
    return p;
  }
  // Split the channels into zero-padded planar rows, then filter each plane row.
  const PairedTaps taps(flip ? hx.mirrored() : hx);
  const int64_t stride = src.width + 2 * taps.pairs + 16;
  std::vector<uint8_t> split(static_cast<size_t>(3 * stride), 0);
  uint8_t* const in[3] = {split.data(), split.data() + stride, split.data() + 2 * stride};
  for (int64_t y = p.y0; y < y1; ++y) {
    const uint8_t* row = src.row(y);
    for (int64_t x = 0; x < src.width; ++x) {
      in[0][x] = row[3 * x];
      in[1][x] = row[3 * x + 1];
      in[2][x] = row[3 * x + 2];
    }
    for (int c = 0; c < 3; ++c) horizontal_plane_row(in[c], taps, p.planes[c] + (y - p.y0) * hx.out_size);
  }
  return p;
}

void check_sizes(const Image& src, int64_t out_h, int64_t out_w, const char* who) {
  if (src.height <= 0 || src.width <= 0 ||
      src.rgb.size() != static_cast<size_t>(src.height * src.width * 3))
    throw std::invalid_argument(std::string(who) + ": source image is empty or inconsistent");
  if (out_h <= 0 || out_w <= 0)
    throw std::invalid_argument(std::string(who) + ": output size must be positive, got " +
                                std::to_string(out_h) + "x" + std::to_string(out_w));
}

}  // namespace

ResampleAxis::ResampleAxis(int64_t in, int64_t out) : in_size(in), out_size(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument("ResampleAxis: sizes must be positive, got " + std::to_string(in) +
                                " -> " + std::to_string(out));
  // PIL's precompute_coeffs with the bilinear (triangle, support 1) filter, box = (0, in).
  const double scale = static_cast<double>(static_cast<float>(in)) / static_cast<double>(out);
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 1.0 * filterscale;
  ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  first.resize(static_cast<size_t>(out));
  count.resize(static_cast<size_t>(out));
  coeffs.assign(static_cast<size_t>(out * ksize), 0);
  std::vector<double> k(static_cast<size_t>(ksize));
  for (int64_t xx = 0; xx < out; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);  // truncation, as PIL's (int)
    if (xmin < 0) xmin = 0;
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in) xmax = in;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = triangle((static_cast<double>(x + xmin) - center + 0.5) * ss);
      k[static_cast<size_t>(x)] = w;
      ww += w;
    }
    for (int64_t x = 0; x < ksize; ++x) {
      double w = x < xmax ? k[static_cast<size_t>(x)] : 0.0;
      if (x < xmax && ww != 0.0) w /= ww;
      const double scaled = w * static_cast<double>(int64_t{1} << kPrecisionBits);
      coeffs[static_cast<size_t>(xx * ksize + x)] =
          static_cast<int32_t>(w < 0 ? -0.5 + scaled : 0.5 + scaled);
    }
    first[static_cast<size_t>(xx)] = static_cast<int32_t>(xmin);
    count[static_cast<size_t>(xx)] = static_cast<int32_t>(xmax);
  }
  // Fixed-width windows over the non-zero taps only (2 wide for any upscale, where ksize is 3),
  // placed early enough to stay inside the input.
  std::vector<int64_t> lo(static_cast<size_t>(out)), hi(static_cast<size_t>(out));
  window = 1;
  for (int64_t xx = 0; xx < out; ++xx) {
    const int64_t f = first[static_cast<size_t>(xx)], n = count[static_cast<size_t>(xx)];
    int64_t a = -1, b = -1;
    for (int64_t t = 0; t < n; ++t)
      if (coeffs[static_cast<size_t>(xx * ksize + t)] != 0) {
        if (a < 0) a = f + t;
        b = f + t;
      }
    if (a < 0) a = b = f;  // no weight at all (cannot happen with the triangle): a zero window
    lo[static_cast<size_t>(xx)] = a;
    hi[static_cast<size_t>(xx)] = b;
    window = std::max(window, b - a + 1);
  }
  window = std::min(window, in);
  window_first.resize(static_cast<size_t>(out));
  window_coeffs.assign(static_cast<size_t>(out * window), 0);
  for (int64_t xx = 0; xx < out; ++xx) {
    const int64_t f = first[static_cast<size_t>(xx)], n = count[static_cast<size_t>(xx)];
    const int64_t start = std::max<int64_t>(0, std::min(lo[static_cast<size_t>(xx)], in - window));
    window_first[static_cast<size_t>(xx)] = static_cast<int32_t>(start);
    for (int64_t t = 0; t < n; ++t) {
      const int32_t k = coeffs[static_cast<size_t>(xx * ksize + t)];
      if (k != 0) window_coeffs[static_cast<size_t>(xx * window + f + t - start)] = k;
    }
  }
}

ResampleAxis ResampleAxis::mirrored() const {
  ResampleAxis m = *this;
  for (int64_t i = 0; i < out_size; ++i) {
    const auto src = static_cast<size_t>(out_size - 1 - i), dst = static_cast<size_t>(i);
    m.first[dst] = first[src];
    m.count[dst] = count[src];
    m.window_first[dst] = window_first[src];
    std::copy_n(coeffs.begin() + static_cast<int64_t>(src) * ksize, ksize, m.coeffs.begin() + static_cast<int64_t>(dst) * ksize);
    std::copy_n(window_coeffs.begin() + static_cast<int64_t>(src) * window, window,
                m.window_coeffs.begin() + static_cast<int64_t>(dst) * window);
  }
  return m;
}

PixelTable::PixelTable(bool to_bgr255, const std::array<float, 3>& mean,
                       const std::array<float, 3>& stddev)
    : bgr(to_bgr255) {
  subtract_only = true;
  for (int c = 0; c < 3; ++c) {
    if (!(stddev[c] != 0.0f) || !std::isfinite(stddev[c]) || !std::isfinite(mean[c]))
      throw std::invalid_argument("PixelTable: pixel std must be finite and non-zero and mean finite (channel " +
                                  std::to_string(c) + ")");
    offset[c] = mean[c];
    for (int v = 0; v < 256; ++v) {
      float x = static_cast<float>(v) / 255.0f;  // ToTensor
      if (to_bgr255) x = x * 255.0f;              // the reference's to_bgr255
      value[c][v] = (x - mean[c]) / stddev[c];    // Normalize: sub_, then div_
      if (value[c][v] != static_cast<float>(v) - offset[c]) subtract_only = false;
    }
  }
}

Image resize_bilinear(const Image& src, int64_t out_h, int64_t out_w) {
  check_sizes(src, out_h, out_w, "resize_bilinear");
  if (out_h == src.height && out_w == src.width) return src;
  const ResampleAxis hx(src.width, out_w), vy(src.height, out_h);
  const Planar p = horizontal_stage(src, hx, vy, /*flip=*/false);
  Image out(out_h, out_w);
  for (int c = 0; c < 3; ++c)
    vertical_pass(p.planes[c], p.y0, vy, out_w, [&](int64_t yy, const uint8_t* r) {
      uint8_t* o = out.row(yy) + c;
      for (int64_t x = 0; x < out_w; ++x) o[3 * x] = r[x];
    });
  return out;
}

void resize_normalize_into(const Image& src, int64_t out_h, int64_t out_w, bool flip,
                           const PixelTable& table, float* dst, int64_t dst_h, int64_t dst_w) {
  check_sizes(src, out_h, out_w, "resize_normalize_into");
  if (out_h > dst_h || out_w > dst_w)
    throw std::invalid_argument("resize_normalize_into: image " + std::to_string(out_h) + "x" +
                                std::to_string(out_w) + " does not fit the slot " +
                                std::to_string(dst_h) + "x" + std::to_string(dst_w));
  const ResampleAxis hx(src.width, out_w), vy(src.height, out_h);
  // Mirroring happens in the horizontal pass, so the rest runs forward.
  const Planar p = horizontal_stage(src, hx, vy, flip);
  for (int c = 0; c < 3; ++c) {
    float* out_plane = dst + c * dst_h * dst_w;
    vertical_pass(p.planes[table.source_channel(c)], p.y0, vy, out_w, [&](int64_t yy, const uint8_t* r) {
      float* d = out_plane + yy * dst_w;
      normalize_row(r, out_w, table, c, d);
      if (dst_w > out_w) std::memset(d + out_w, 0, sizeof(float) * static_cast<size_t>(dst_w - out_w));
    });
    if (dst_h > out_h)
      std::memset(out_plane + out_h * dst_w, 0, sizeof(float) * static_cast<size_t>((dst_h - out_h) * dst_w));
  }
}

}  // namespace mrcnn::data
