#include "eval/rle.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace mrcnn::eval {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("RLE: " + what); }

uint64_t pixels(uint32_t h, uint32_t w) { return static_cast<uint64_t>(h) * w; }

void check_size(uint32_t h, uint32_t w) {
  // Counts are uint32 as in pycocotools: a mask must have fewer than 2^32 pixels.
  if (pixels(h, w) > 0xFFFFFFFFull) {
    bad("mask size " + std::to_string(h) + "x" + std::to_string(w) +
        " has 2^32 pixels or more (counts are 32-bit)");
  }
}

}  // namespace

// ---- encode / decode --------------------------------------------------------------------------

Rle encode_column_major(const uint8_t* mask, uint32_t h, uint32_t w) {
  check_size(h, w);
  Rle r{h, w, {}};
  const size_t n = static_cast<size_t>(pixels(h, w));
  bool cur = false;
  uint32_t run = 0;
  size_t i = 0;
  while (i < n) {
    // Skip a run of equal values quickly, 8 bytes at a time when they are all 0 or all non-zero.
    if (!cur) {
      while (i + 8 <= n) {
        uint64_t v;
        std::memcpy(&v, mask + i, 8);
        if (v != 0) break;
        i += 8;
        run += 8;
      }
    }
    if (i >= n) break;
    const bool b = mask[i] != 0;
    if (b != cur) {
      r.counts.push_back(run);
      run = 0;
      cur = b;
    }
    ++run;
    ++i;
  }
  r.counts.push_back(run);
  return r;
}

Rle encode_row_major(const uint8_t* mask, uint32_t h, uint32_t w) {
  check_size(h, w);
  // A detection's mask is mostly background: find the rows and columns that hold foreground
  // with a fast scan of the rows (8 bytes at a time), then walk down the columns of that
  // rectangle only; the background around it becomes runs by arithmetic.
  uint32_t y0 = h, y1 = 0, x0 = w, x1 = 0;
  for (uint32_t y = 0; y < h; ++y) {
    const uint8_t* row = mask + static_cast<size_t>(y) * w;
    uint32_t x = 0;
    for (; x + 8 <= w; x += 8) {
      uint64_t v;
      std::memcpy(&v, row + x, 8);
      if (v != 0) break;
    }
    while (x < w && row[x] == 0) ++x;
    if (x == w) continue;
    uint32_t last = w - 1;
    while (row[last] == 0) --last;
    y0 = std::min(y0, y);
    y1 = y;
    x0 = std::min(x0, x);
    x1 = std::max(x1, last);
  }
  Rle r{h, w, {}};
  if (y0 == h) {
    r.counts.push_back(static_cast<uint32_t>(pixels(h, w)));
    return r;
  }
  bool cur = false;
  uint32_t run = static_cast<uint32_t>(static_cast<uint64_t>(x0) * h);  // zeros before column x0
  for (uint32_t x = x0; x <= x1; ++x) {
    run += y0;  // zeros above the rectangle (cur is false here, see below)
    const uint8_t* col = mask + x;
    for (uint32_t y = y0; y <= y1; ++y) {
      const bool b = col[static_cast<size_t>(y) * w] != 0;
      if (b != cur) {
        r.counts.push_back(run);
        run = 0;
        cur = b;
      }
      ++run;
    }
    if (y1 + 1 < h) {
      // Zeros below the rectangle end the column in background.
      if (cur) {
        r.counts.push_back(run);
        run = 0;
        cur = false;
      }
      run += h - 1 - y1;
    } else if (x < x1 && y0 > 0 && cur) {
      // The column ends in foreground and the next starts with background rows above y0.
      r.counts.push_back(run);
      run = 0;
      cur = false;
    }
  }
  if (cur && x1 + 1 < w) {
    r.counts.push_back(run);
    run = 0;
    cur = false;
  }
  run += static_cast<uint32_t>(static_cast<uint64_t>(w - 1 - x1) * h);  // zeros after column x1
  r.counts.push_back(run);
  return r;
}

namespace {
void check_counts_fit(const Rle& rle) {
  uint64_t total = 0;
  for (uint32_t c : rle.counts) total += c;
  if (total != pixels(rle.h, rle.w)) {
    bad("counts add up to " + std::to_string(total) + " pixels, expected h*w = " +
        std::to_string(pixels(rle.h, rle.w)));
  }
}
}  // namespace

void decode_column_major(const Rle& rle, uint8_t* out) {
  check_counts_fit(rle);
  uint8_t v = 0;
  for (uint32_t c : rle.counts) {
    std::memset(out, v, c);
    out += c;
    v ^= 1;
  }
}

void decode_row_major(const Rle& rle, uint8_t* out) {
  check_counts_fit(rle);
  const uint32_t h = rle.h, w = rle.w;
  uint64_t pos = 0;  // column-major position
  uint8_t v = 0;
  for (uint32_t c : rle.counts) {
    for (uint64_t e = pos + c; pos < e; ++pos) {
      const uint64_t x = pos / h, y = pos - x * h;
      out[y * w + x] = v;
    }
    v ^= 1;
  }
}

// ---- compressed strings -------------------------------------------------------------------------
// Like LEB128 but 5 data bits and a continuation bit per character, offset by 48 so that every
// character is printable ('0'..'o'); from the fourth count on, the difference to the count two
// places back is stored (runs of alternating values tend to be similar).

std::string to_string(const Rle& rle) {
  std::string s;
  s.reserve(rle.counts.size() * 2);
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    int64_t x = rle.counts[i];
    if (i > 2) x -= static_cast<int64_t>(rle.counts[i - 2]);
    bool more = true;
    while (more) {
      char c = static_cast<char>(x & 0x1f);
      x >>= 5;
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      s.push_back(static_cast<char>(c + 48));
    }
  }
  return s;
}

namespace {
// Decodes compressed counts, handing each run length to sink(value) in order; checks the
// characters, the value ranges and that the runs add up to h*w.
template <class Sink>
void decode_string(std::string_view s, uint32_t h, uint32_t w, Sink&& sink) {
  check_size(h, w);
  size_t p = 0, m = 0;
  uint64_t total = 0;
  uint32_t back2 = 0, back1 = 0;  // the counts two places and one place back
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= s.size()) bad("compressed counts end in the middle of a value (truncated string)");
      const int c = static_cast<unsigned char>(s[p]) - 48;
      if (c < 0 || c > 63) {
        bad(std::string("compressed counts hold an invalid character at position ") +
            std::to_string(p) + " (valid: '0'..'o')");
      }
      if (k > 11) bad("compressed counts hold a value longer than 64 bits");  // 13 groups: 65 bits
      x |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= static_cast<int64_t>(~0ull << (5 * k));
    }
    if (m > 2) x += static_cast<int64_t>(back2);
    if (x < 0 || x > 0xFFFFFFFFll) {
      bad("compressed counts decode to an invalid run length " + std::to_string(x) + " (run " +
          std::to_string(m) + ")");
    }
    total += static_cast<uint64_t>(x);
    sink(static_cast<uint32_t>(x));
    back2 = back1;
    back1 = static_cast<uint32_t>(x);
    ++m;
  }
  if (total != pixels(h, w)) {
    bad("compressed counts add up to " + std::to_string(total) + " pixels, but size [" +
        std::to_string(h) + ", " + std::to_string(w) + "] has " + std::to_string(pixels(h, w)));
  }
}
}  // namespace

Rle from_string(std::string_view s, uint32_t h, uint32_t w) {
  Rle r{h, w, {}};
  r.counts.reserve(s.size());
  decode_string(s, h, w, [&](uint32_t v) { r.counts.push_back(v); });
  return r;
}

void check_string(std::string_view s, uint32_t h, uint32_t w) {
  decode_string(s, h, w, [](uint32_t) {});
}

Rle from_counts(std::vector<uint32_t> counts, uint32_t h, uint32_t w) {
  check_size(h, w);
  Rle r{h, w, std::move(counts)};
  check_counts_fit(r);
  return r;
}

// ---- polygons -----------------------------------------------------------------------------------
// The rasterization of pycocotools' rleFrPoly, step for step: the vertices are scaled by 5 and
// rounded, the boundary is walked densely between them, every crossing of a pixel column centre
// becomes a boundary point (x, ceil(y)), and the sorted column-major positions of those points are
// the run boundaries. The dense walk is streamed instead of stored, so far-away vertices cost time
// proportional to their distance but no memory.

namespace {

// The vertices scaled by 5 and rounded as the reference's casts do, the first one repeated at the
// end (the closing edge). Throws on a vertex that is not finite or beyond +-1e8 (5 * v must stay
// in int range, as the reference's casts need).
void upsample_vertices(const double* xy, size_t k, std::vector<int>& x, std::vector<int>& y) {
  constexpr double kScale = 5;
  constexpr double kMaxCoord = 1e8;
  x.assign(k + 1, 0);
  y.assign(k + 1, 0);
  for (size_t j = 0; j < k; ++j) {
    const double vx = xy[2 * j], vy = xy[2 * j + 1];
    if (!std::isfinite(vx) || !std::isfinite(vy) || std::fabs(vx) > kMaxCoord ||
        std::fabs(vy) > kMaxCoord) {
      bad("polygon vertex " + std::to_string(j) + " is not finite or beyond +-1e8");
    }
    x[j] = static_cast<int>(kScale * vx + .5);
    y[j] = static_cast<int>(kScale * vy + .5);
  }
  if (k > 0) {
    x[k] = x[0];
    y[k] = y[0];
  }
}

// The reference's first loop, streamed: visit(u, v) for every dense integer point of every edge
// of the upsampled polygon, in the reference's order (an edge is walked from the end with the
// smaller major coordinate, its points then visited from the far end when it was flipped).
template <class Visit>
void walk_edges(const std::vector<int>& x, const std::vector<int>& y, size_t k, Visit&& visit) {
  for (size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    if (dx == 0 && dy == 0) {
      // A repeated vertex: one point whose column equals its neighbours', so it never becomes a
      // boundary point (the reference computes 0/0 here and never uses the result).
      visit(xs, ys);
      continue;
    }
    const double s = dx >= dy ? static_cast<double>(ye - ys) / dx : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        visit(t + xs, static_cast<int>(ys + s * t + .5));
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        visit(static_cast<int>(xs + s * t + .5), t + ys);
      }
    }
  }
}

// The reference's second loop, applied to each dense point in turn: a point visited right after
// another may become a boundary point, kept as its column-major position x * h + y.
class BoundaryPoints {
 public:
  BoundaryPoints(uint32_t h, uint32_t w)
      : h_(h), w_last_(static_cast<double>(static_cast<uint64_t>(w) - 1)) {}

  void visit(int u, int v) {
    // (xd + .5) / 5 - .5 is a whole number exactly when xd = 5n + 2; test that in integers
    // first (4 of 5 points fail it), then take the reference's floating-point path unchanged.
    constexpr double kScale = 5;
    const int xi_raw = u < pu_ ? u : u - 1;
    if (have_prev_ && u != pu_ && ((xi_raw % 5) + 5) % 5 == 2) {
      double xd = static_cast<double>(xi_raw);
      xd = (xd + .5) / kScale - .5;
      if (!(std::floor(xd) != xd || xd < 0 || xd > w_last_)) {
        double yd = static_cast<double>(v < pv_ ? v : pv_);
        yd = (yd + .5) / kScale - .5;
        if (yd < 0) yd = 0;
        else if (yd > h_) yd = h_;
        yd = std::ceil(yd);
        const int xi = static_cast<int>(xd), yi = static_cast<int>(yd);
        positions_.push_back(static_cast<uint32_t>(xi * static_cast<int>(h_) + yi));
      }
    }
    pu_ = u;
    pv_ = v;
    have_prev_ = true;
  }

  std::vector<uint32_t> take() { return std::move(positions_); }

 private:
  uint32_t h_;
  double w_last_;  // w - 1; only read when w >= 1
  bool have_prev_ = false;
  int pu_ = 0, pv_ = 0;
  std::vector<uint32_t> positions_;
};

// The runs between the sorted boundary positions, h * w closing the last one; a run of length 0
// (coinciding points) joins its neighbours, as the reference's RLE does.
Rle runs_between(std::vector<uint32_t> a, uint32_t h, uint32_t w) {
  a.push_back(static_cast<uint32_t>(pixels(h, w)));
  std::sort(a.begin(), a.end());
  uint32_t p = 0;
  for (uint32_t& v : a) {
    const uint32_t t = v;
    v -= p;
    p = t;
  }
  Rle r{h, w, {}};
  r.counts.reserve(a.size());
  size_t j = 0;
  r.counts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      r.counts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) r.counts.back() += a[j++];
    }
  }
  return r;
}

}  // namespace

Rle from_polygon(const double* xy, size_t k, uint32_t h, uint32_t w) {
  check_size(h, w);
  std::vector<int> x, y;
  upsample_vertices(xy, k, x, y);
  BoundaryPoints points(h, w);
  if (w > 0 && h > 0) walk_edges(x, y, k, [&](int u, int v) { points.visit(u, v); });
  return runs_between(points.take(), h, w);
}

Rle from_polygons(std::span<const std::vector<double>> polygons, uint32_t h, uint32_t w) {
  if (polygons.empty()) return Rle{h, w, {static_cast<uint32_t>(pixels(h, w))}};
  std::vector<Rle> parts;
  parts.reserve(polygons.size());
  for (const auto& poly : polygons) {
    if (poly.size() % 2 != 0) bad("polygon with an odd number of coordinates");
    parts.push_back(from_polygon(poly.data(), poly.size() / 2, h, w));
  }
  return merge(parts, false);
}

Rle from_box(const std::array<double, 4>& bb, uint32_t h, uint32_t w) {
  const double xs = bb[0], xe = xs + bb[2];
  const double ys = bb[1], ye = ys + bb[3];
  const double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
  return from_polygon(xy, 4, h, w);
}

void rasterize_polygons(const double* coords, const int64_t* offsets, size_t num_polygons,
                        uint32_t h, uint32_t w, uint8_t* out) {
  check_size(h, w);
  std::memset(out, 0, static_cast<size_t>(pixels(h, w)));
  for (size_t j = 0; j < num_polygons; ++j) {
    const int64_t begin = offsets[j], end = offsets[j + 1];
    if (begin < 0 || end < begin || (end - begin) % 2 != 0) {
      bad("polygon " + std::to_string(j) + " has offsets [" + std::to_string(begin) + ", " +
          std::to_string(end) + "): expected a non-negative, even-length range");
    }
    const Rle r = from_polygon(coords + begin, static_cast<size_t>(end - begin) / 2, h, w);
    uint64_t pos = 0;
    bool v = false;
    for (uint32_t c : r.counts) {
      if (v) {
        for (uint64_t e = pos + c; pos < e; ++pos) {
          const uint64_t x = pos / h, y = pos - x * h;
          out[y * w + x] = 1;
        }
      } else {
        pos += c;
      }
      v = !v;
    }
  }
}

// ---- merge, area, bbox, IoU ---------------------------------------------------------------------

Rle merge(const Rle& A, const Rle& B, bool intersect) {
  if (A.h != B.h || A.w != B.w) {
    bad("cannot merge masks of different sizes [" + std::to_string(A.h) + ", " +
        std::to_string(A.w) + "] and [" + std::to_string(B.h) + ", " + std::to_string(B.w) + "]");
  }
  Rle out{A.h, A.w, {}};
  if (A.counts.empty() || B.counts.empty()) {
    // Only a 0-pixel mask has no counts; pycocotools reads past the end here. Both are empty.
    out.counts = A.counts.empty() ? B.counts : A.counts;
    return out;
  }
  out.counts.reserve(A.counts.size() + B.counts.size());
  uint32_t ca = A.counts[0], cb = B.counts[0], cc = 0, ct = 1;
  bool v = false, va = false, vb = false;
  size_t a = 1, b = 1;
  while (ct > 0) {
    const uint32_t c = std::min(ca, cb);
    cc += c;
    ct = 0;
    ca -= c;
    if (!ca && a < A.counts.size()) {
      ca = A.counts[a++];
      va = !va;
    }
    ct += ca;
    cb -= c;
    if (!cb && b < B.counts.size()) {
      cb = B.counts[b++];
      vb = !vb;
    }
    ct += cb;
    const bool vp = v;
    v = intersect ? (va && vb) : (va || vb);
    if (v != vp || ct == 0) {
      out.counts.push_back(cc);
      cc = 0;
    }
  }
  return out;
}

Rle merge(std::span<const Rle> rles, bool intersect) {
  if (rles.empty()) return Rle{};
  Rle acc = rles[0];
  for (size_t i = 1; i < rles.size(); ++i) acc = merge(acc, rles[i], intersect);
  return acc;
}

uint32_t area(const Rle& rle) {
  uint32_t a = 0;
  for (size_t j = 1; j < rle.counts.size(); j += 2) a += rle.counts[j];
  return a;
}

std::array<double, 4> to_bbox(const Rle& rle) {
  const uint32_t h = rle.h;
  const size_t m = (rle.counts.size() / 2) * 2;
  if (m == 0) return {0, 0, 0, 0};
  uint32_t xs = rle.w, ys = h, xe = 0, ye = 0, cc = 0;
  for (size_t j = 0; j < m; ++j) {
    const uint32_t start = cc;
    cc += rle.counts[j];
    if (j % 2 == 0 || rle.counts[j] == 0) continue;  // background, or an empty foreground run
    const uint32_t y_start = start % h, x_start = start / h;
    const uint32_t y_end = (cc - 1) % h, x_end = (cc - 1) / h;
    xs = std::min(xs, x_start);
    xe = std::max(xe, x_end);
    if (x_start < x_end) {
      ys = 0;  // the run wraps into the next column: it spans every row
      ye = h - 1;
    } else {
      ys = std::min(ys, y_start);
      ye = std::max(ye, y_end);
    }
  }
  // As in the reference, an RLE with counts but no foreground gives xs = w > xe = 0: the
  // unsigned differences wrap. Reproduce the arithmetic exactly.
  return {static_cast<double>(xs), static_cast<double>(ys), static_cast<double>(xe - xs + 1),
          static_cast<double>(ye - ys + 1)};
}

Overlap overlap(const Rle& A, const Rle& B) {
  Overlap o;
  if (A.counts.empty() || B.counts.empty()) return o;
  uint32_t ca = A.counts[0], cb = B.counts[0];
  bool va = false, vb = false;
  size_t a = 1, b = 1;
  const size_t ka = A.counts.size(), kb = B.counts.size();
  for (;;) {
    const uint32_t c = std::min(ca, cb);
    if (va || vb) {
      o.union_ += c;
      if (va && vb) o.intersection += c;
    }
    ca -= c;
    if (!ca && a < ka) {
      ca = A.counts[a++];
      va = !va;
    }
    cb -= c;
    if (!cb && b < kb) {
      cb = B.counts[b++];
      vb = !vb;
    }
    if (ca + static_cast<uint64_t>(cb) == 0) break;
  }
  return o;
}

double box_iou(const double* D, const double* G, bool crowd) {
  const double ga = G[2] * G[3];
  const double da = D[2] * D[3];
  const double w = std::fmin(D[2] + D[0], G[2] + G[0]) - std::fmax(D[0], G[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(D[3] + D[1], G[3] + G[1]) - std::fmax(D[1], G[1]);
  if (h <= 0) return 0;
  const double i = w * h;
  const double u = crowd ? da : da + ga - i;
  return i / u;
}

namespace {
double mask_iou_given_boxes(const Rle& dt, const Rle& gt, bool crowd, const double* db,
                            const double* gb) {
  if (!(box_iou(db, gb, crowd) > 0)) return 0;
  if (dt.h != gt.h || dt.w != gt.w) return -1;
  const Overlap o = overlap(dt, gt);
  // pycocotools accumulates in uint32: identical for masks under 2^32 pixels (checked on input).
  const uint32_t i = static_cast<uint32_t>(o.intersection);
  uint32_t u = static_cast<uint32_t>(o.union_);
  if (i == 0) u = 1;
  else if (crowd) u = area(dt);
  return static_cast<double>(i) / static_cast<double>(u);
}
}  // namespace

double iou(const Rle& dt, const Rle& gt, bool crowd) {
  const auto db = to_bbox(dt), gb = to_bbox(gt);
  return mask_iou_given_boxes(dt, gt, crowd, db.data(), gb.data());
}

void iou_matrix(std::span<const Rle> dt, std::span<const Rle> gt, const uint8_t* crowd,
                double* out, const std::array<double, 4>* dt_boxes,
                const std::array<double, 4>* gt_boxes) {
  std::vector<std::array<double, 4>> db, gb;
  if (!dt_boxes) {
    db.reserve(dt.size());
    for (const Rle& r : dt) db.push_back(to_bbox(r));
    dt_boxes = db.data();
  }
  if (!gt_boxes) {
    gb.reserve(gt.size());
    for (const Rle& r : gt) gb.push_back(to_bbox(r));
    gt_boxes = gb.data();
  }
  const size_t G = gt.size();
  for (size_t d = 0; d < dt.size(); ++d) {
    for (size_t g = 0; g < G; ++g) {
      out[d * G + g] = mask_iou_given_boxes(dt[d], gt[g], crowd && crowd[g], dt_boxes[d].data(),
                                            gt_boxes[g].data());
    }
  }
}

}  // namespace mrcnn::eval
