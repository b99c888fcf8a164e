#include "benchmark/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "benchmark/data/rng.h"

namespace mrcnn::data {

void TransformOptions::validate() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument("TransformOptions: " + what); };
  if (min_size <= 0) bad("min_size must be positive, got " + std::to_string(min_size));
  if (max_size > 0 && max_size < min_size)
    bad("max_size must be >= min_size (or <= 0 for no limit), got " + std::to_string(max_size));
  if (!(flip_probability >= 0.0 && flip_probability <= 1.0))
    bad("flip_probability must be in [0, 1], got " + std::to_string(flip_probability));
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite(pixel_mean[c])) bad("pixel_mean[" + std::to_string(c) + "] must be finite");
    if (!std::isfinite(pixel_std[c]) || pixel_std[c] == 0.0f)
      bad("pixel_std[" + std::to_string(c) + "] must be finite and non-zero");
  }
}

ImageSize reference_resize_size(ImageSize source, int64_t min_size, int64_t max_size) {
  const int64_t w = source.width, h = source.height;
  if (w <= 0 || h <= 0 || min_size <= 0)
    throw std::invalid_argument("reference_resize_size: sizes must be positive, got image " +
                                std::to_string(h) + "x" + std::to_string(w) + " and min_size " +
                                std::to_string(min_size));
  int64_t size = min_size;
  if (max_size > 0) {
    const auto lo = static_cast<double>(std::min(w, h));
    const auto hi = static_cast<double>(std::max(w, h));
    if (hi / lo * static_cast<double>(size) > static_cast<double>(max_size))
      // Python's round(): half to even, which std::nearbyint does in the default rounding mode.
      size = static_cast<int64_t>(std::nearbyint(static_cast<double>(max_size) * lo / hi));
  }
  if ((w <= h && w == size) || (h <= w && h == size)) return {h, w};
  if (w < h)
    return {static_cast<int64_t>(static_cast<double>(size * h) / static_cast<double>(w)), size};
  return {size, static_cast<int64_t>(static_cast<double>(size * w) / static_cast<double>(h))};
}

bool flip_decision(uint64_t seed, int64_t epoch, int64_t index, double p) {
  if (p <= 0.0) return false;
  if (p >= 1.0) return true;
  Rng rng(seeding::flip_seed(seed, epoch, index));
  return rng.uniform01() < p;
}

std::array<float, 4> coco_box_to_xyxy(const std::array<float, 4>& b, bool legacy_plus_one) {
  const float one = legacy_plus_one ? 1.0f : 0.0f;
  return {b[0], b[1], b[0] + std::max(b[2] - one, 0.0f), b[1] + std::max(b[3] - one, 0.0f)};
}

bool clip_box(std::array<float, 4>& b, ImageSize image, bool legacy_plus_one) {
  const float one = legacy_plus_one ? 1.0f : 0.0f;
  const float xmax = static_cast<float>(image.width) - one;
  const float ymax = static_cast<float>(image.height) - one;
  b[0] = std::clamp(b[0], 0.0f, xmax);
  b[1] = std::clamp(b[1], 0.0f, ymax);
  b[2] = std::clamp(b[2], 0.0f, xmax);
  b[3] = std::clamp(b[3], 0.0f, ymax);
  return b[2] > b[0] && b[3] > b[1];
}

void resize_targets(InstanceTargets& t, ImageSize from, ImageSize to) {
  if (from.width <= 0 || from.height <= 0)
    throw std::invalid_argument("resize_targets: source size must be positive");
  const double rw = static_cast<double>(to.width) / static_cast<double>(from.width);
  const double rh = static_cast<double>(to.height) / static_cast<double>(from.height);
  // The reference multiplies float32 boxes by the Python float ratio in float32.
  const auto fw = static_cast<float>(rw), fh = static_cast<float>(rh);
  for (size_t i = 0; i < t.boxes.size(); i += 4) {
    t.boxes[i] *= fw;
    t.boxes[i + 1] *= fh;
    t.boxes[i + 2] *= fw;
    t.boxes[i + 3] *= fh;
  }
  for (size_t i = 0; i + 1 < t.coords.size(); i += 2) {
    t.coords[i] *= rw;
    t.coords[i + 1] *= rh;
  }
}

void flip_targets(InstanceTargets& t, int64_t width, bool legacy_plus_one) {
  const float one = legacy_plus_one ? 1.0f : 0.0f;
  const auto w = static_cast<float>(width);
  for (size_t i = 0; i < t.boxes.size(); i += 4) {
    const float x1 = t.boxes[i], x2 = t.boxes[i + 2];
    t.boxes[i] = (w - x2) - one;
    t.boxes[i + 2] = (w - x1) - one;
  }
  const double wd = static_cast<double>(width), oned = legacy_plus_one ? 1.0 : 0.0;
  for (size_t i = 0; i < t.coords.size(); i += 2) t.coords[i] = (wd - t.coords[i]) - oned;
}

}  // namespace mrcnn::data
