// Greedy NMS on the CPU (internal header shared by the nms kernels and proposal generation).
//
// Boxes are given in visiting order (best first) as separate coordinate arrays. The IoU is
// computed exactly as torchvision's CPU kernel computes it, in T:
//     inter = max(0, min(x2) - max(x1)) * max(0, min(y2) - max(y1))
//     iou   = inter / (area_i + area_j - inter)
// and box j is suppressed when iou > threshold with the threshold in double, which for a T = float
// IoU is the same test as iou > (the largest float <= threshold). The inner loop runs over fixed
// blocks without branches so that it vectorizes; suppressed boxes are tested too (cheaper than
// branching when, as for RPN proposals, most boxes survive).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mrcnn::ops::cpu {

template <typename T>
inline T nms_threshold_as(double threshold) {
  T t = static_cast<T>(threshold);
  if (static_cast<double>(t) > threshold) t = std::nextafter(t, -std::numeric_limits<T>::infinity());
  return t;
}

// Boxes in structure-of-arrays form, already in visiting order.
template <typename T>
struct BoxesSoA {
  std::vector<T> x1, y1, x2, y2, area;

  void resize(size_t n) {
    x1.resize(n);
    y1.resize(n);
    x2.resize(n);
    y2.resize(n);
    area.resize(n);
  }
  void set(size_t i, T a, T b, T c, T d) {
    x1[i] = a;
    y1[i] = b;
    x2[i] = c;
    y2[i] = d;
    area[i] = (c - a) * (d - b);
  }
};

namespace nms_detail {

constexpr int64_t kBlock = 16;

// sup[j] |= iou(i, j) > t for j in [0, n), over arrays already offset to the first candidate.
template <typename T>
inline void suppress_block(T ix1, T iy1, T ix2, T iy2, T iarea, const T* __restrict x1,
                           const T* __restrict y1, const T* __restrict x2,
                           const T* __restrict y2, const T* __restrict area,
                           uint8_t* __restrict sup, T t) {
  for (int64_t j = 0; j < kBlock; ++j) {
    const T xx1 = std::max(ix1, x1[j]);
    const T yy1 = std::max(iy1, y1[j]);
    const T xx2 = std::min(ix2, x2[j]);
    const T yy2 = std::min(iy2, y2[j]);
    const T w = std::max(static_cast<T>(0), xx2 - xx1);
    const T h = std::max(static_cast<T>(0), yy2 - yy1);
    const T inter = w * h;
    const T ovr = inter / (iarea + area[j] - inter);
    sup[j] |= static_cast<uint8_t>(ovr > t);
  }
}

}  // namespace nms_detail

// Runs greedy NMS over boxes 0..n-1 (visiting order). `valid[i] == 0` marks a box that is
// neither kept nor allowed to suppress (nullptr: all valid). Appends the kept positions to
// `keep` (increasing). `scratch` is reused between calls.
template <typename T>
void nms_greedy(const BoxesSoA<T>& b, int64_t n, double threshold, const uint8_t* valid,
                std::vector<uint8_t>& scratch, std::vector<int64_t>& keep) {
  const T t = nms_threshold_as<T>(threshold);
  scratch.assign(static_cast<size_t>(n), 0);
  uint8_t* sup = scratch.data();
  if (valid) {
    for (int64_t i = 0; i < n; ++i) sup[i] = valid[i] ? 0 : 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (sup[i]) continue;
    keep.push_back(i);
    const T ix1 = b.x1[i], iy1 = b.y1[i], ix2 = b.x2[i], iy2 = b.y2[i], ia = b.area[i];
    int64_t j = i + 1;
    for (; j + nms_detail::kBlock <= n; j += nms_detail::kBlock) {
      nms_detail::suppress_block(ix1, iy1, ix2, iy2, ia, b.x1.data() + j, b.y1.data() + j,
                                 b.x2.data() + j, b.y2.data() + j, b.area.data() + j, sup + j, t);
    }
    for (; j < n; ++j) {
      const T xx1 = std::max(ix1, b.x1[j]);
      const T yy1 = std::max(iy1, b.y1[j]);
      const T xx2 = std::min(ix2, b.x2[j]);
      const T yy2 = std::min(iy2, b.y2[j]);
      const T w = std::max(static_cast<T>(0), xx2 - xx1);
      const T h = std::max(static_cast<T>(0), yy2 - yy1);
      const T inter = w * h;
      const T ovr = inter / (ia + b.area[j] - inter);
      sup[j] |= static_cast<uint8_t>(ovr > t);
    }
  }
}

// Descending order of scores, stable (ties: lower index first), NaN first as in torch.sort.
template <typename T>
struct DescendingScore {
  const T* s;
  bool operator()(int64_t a, int64_t b) const {
    const T sa = s[a];
    const T sb = s[b];
    if (std::isnan(sa)) return !std::isnan(sb);
    if (std::isnan(sb)) return false;
    return sa > sb;
  }
};

}  // namespace mrcnn::ops::cpu
