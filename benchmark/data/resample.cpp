#include "benchmark/data/resample.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mrcnn::data {

namespace {

constexpr int kBits = ResampleAxis::kPrecisionBits;
constexpr int32_t kHalf = int32_t{1} << (kBits - 1);

double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

inline uint8_t clip8(int32_t v) {
  if (v >= (int32_t{1} << kBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kBits);
}

// Source rows [y0, y1) resampled horizontally into three planes of out_w bytes per row.
void horizontal_planar(const Image& src, int64_t y0, int64_t y1, const ResampleAxis& ax,
                       uint8_t* const planes[3]) {
  const int64_t out_w = ax.out_size;
  for (int64_t y = y0; y < y1; ++y) {
    const uint8_t* row = src.row(y);
    const int64_t o = (y - y0) * out_w;
    if (ax.out_size == ax.in_size) {  // no horizontal pass (PIL skips it too): deinterleave
      for (int64_t x = 0; x < out_w; ++x) {
        planes[0][o + x] = row[3 * x];
        planes[1][o + x] = row[3 * x + 1];
        planes[2][o + x] = row[3 * x + 2];
      }
      continue;
    }
    for (int64_t xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &ax.coeffs[static_cast<size_t>(xx * ax.ksize)];
      const uint8_t* p = row + static_cast<int64_t>(ax.first[xx]) * 3;
      const int32_t n = ax.count[xx];
      int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
      for (int32_t t = 0; t < n; ++t) {
        s0 += p[3 * t] * k[t];
        s1 += p[3 * t + 1] * k[t];
        s2 += p[3 * t + 2] * k[t];
      }
      planes[0][o + xx] = clip8(s0);
      planes[1][o + xx] = clip8(s1);
      planes[2][o + xx] = clip8(s2);
    }
  }
}

// One output row of one plane: the vertical filter over `plane` (rows start at source row y0).
// Returns a pointer to out_w bytes (either `row_buf` or a row of `plane` when no pass is needed).
const uint8_t* vertical_row(const uint8_t* plane, int64_t y0, int64_t yy, const ResampleAxis& ax,
                            int64_t out_w, int32_t* acc, uint8_t* row_buf) {
  if (ax.out_size == ax.in_size) return plane + (yy - y0) * out_w;
  const int32_t* k = &ax.coeffs[static_cast<size_t>(yy * ax.ksize)];
  const int64_t first = ax.first[yy];
  const int32_t n = ax.count[yy];
  for (int64_t x = 0; x < out_w; ++x) acc[x] = kHalf;
  for (int32_t t = 0; t < n; ++t) {
    const uint8_t* r = plane + (first + t - y0) * out_w;
    const int32_t kt = k[t];
    for (int64_t x = 0; x < out_w; ++x) acc[x] += static_cast<int32_t>(r[x]) * kt;
  }
  for (int64_t x = 0; x < out_w; ++x) row_buf[x] = clip8(acc[x]);
  return row_buf;
}

struct Planar {
  int64_t y0 = 0;  // first source row held
  std::vector<uint8_t> data;
  uint8_t* planes[3] = {nullptr, nullptr, nullptr};
};

// The horizontal pass over exactly the source rows the vertical pass will read.
Planar horizontal_stage(const Image& src, const ResampleAxis& hx, const ResampleAxis& vy) {
  Planar p;
  int64_t y1 = src.height;
  if (vy.out_size != vy.in_size) {
    p.y0 = vy.first.front();
    y1 = static_cast<int64_t>(vy.first.back()) + vy.count.back();
  }
  const int64_t rows = y1 - p.y0;
  const int64_t plane_size = rows * hx.out_size;
  p.data.resize(static_cast<size_t>(plane_size * 3));
  for (int c = 0; c < 3; ++c) p.planes[c] = p.data.data() + c * plane_size;
  horizontal_planar(src, p.y0, y1, hx, p.planes);
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
}

PixelTable::PixelTable(bool to_bgr255, const std::array<float, 3>& mean,
                       const std::array<float, 3>& std)
    : bgr(to_bgr255) {
  for (int c = 0; c < 3; ++c) {
    if (!(std[c] != 0.0f) || !std::isfinite(std[c]) || !std::isfinite(mean[c]))
      throw std::invalid_argument("PixelTable: pixel std must be finite and non-zero and mean finite (channel " +
                                  std::to_string(c) + ")");
    for (int v = 0; v < 256; ++v) {
      float x = static_cast<float>(v) / 255.0f;  // ToTensor
      if (to_bgr255) x = x * 255.0f;              // the reference's to_bgr255
      value[c][v] = (x - mean[c]) / std[c];       // Normalize: sub_, then div_
    }
  }
}

Image resize_bilinear(const Image& src, int64_t out_h, int64_t out_w) {
  check_sizes(src, out_h, out_w, "resize_bilinear");
  if (out_h == src.height && out_w == src.width) return src;
  const ResampleAxis hx(src.width, out_w), vy(src.height, out_h);
  const Planar p = horizontal_stage(src, hx, vy);
  Image out(out_h, out_w);
  std::vector<int32_t> acc(static_cast<size_t>(out_w));
  std::vector<uint8_t> row_buf(static_cast<size_t>(out_w));
  for (int c = 0; c < 3; ++c) {
    for (int64_t yy = 0; yy < out_h; ++yy) {
      const uint8_t* r = vertical_row(p.planes[c], p.y0, yy, vy, out_w, acc.data(), row_buf.data());
      uint8_t* o = out.row(yy) + c;
      for (int64_t x = 0; x < out_w; ++x) o[3 * x] = r[x];
    }
  }
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
  const Planar p = horizontal_stage(src, hx, vy);
  std::vector<int32_t> acc(static_cast<size_t>(out_w));
  std::vector<uint8_t> row_buf(static_cast<size_t>(out_w));
  for (int c = 0; c < 3; ++c) {
    const uint8_t* plane = p.planes[table.source_channel(c)];
    const float* lut = table.value[c].data();
    float* out_plane = dst + c * dst_h * dst_w;
    for (int64_t yy = 0; yy < out_h; ++yy) {
      const uint8_t* r = vertical_row(plane, p.y0, yy, vy, out_w, acc.data(), row_buf.data());
      float* d = out_plane + yy * dst_w;
      if (flip) {
        for (int64_t x = 0; x < out_w; ++x) d[out_w - 1 - x] = lut[r[x]];
      } else {
        for (int64_t x = 0; x < out_w; ++x) d[x] = lut[r[x]];
      }
      if (dst_w > out_w) std::memset(d + out_w, 0, sizeof(float) * static_cast<size_t>(dst_w - out_w));
    }
    if (dst_h > out_h)
      std::memset(out_plane + out_h * dst_w, 0, sizeof(float) * static_cast<size_t>((dst_h - out_h) * dst_w));
  }
}

}  // namespace mrcnn::data
