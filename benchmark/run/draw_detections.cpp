#include "benchmark/run/draw_detections.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace mrcnn::run {
namespace {

// A distinct, saturated colour per label.
std::array<uint8_t, 3> label_colour(int64_t label) {
  static constexpr std::array<std::array<uint8_t, 3>, 10> kPalette{{{230, 25, 75}, {60, 180, 75}, {255, 225, 25},
                                                                   {0, 130, 200}, {245, 130, 48}, {145, 30, 180},
                                                                   {70, 240, 240}, {240, 50, 230}, {210, 245, 60},
                                                                   {250, 190, 212}}};
  return kPalette[static_cast<size_t>(label) % kPalette.size()];
}

}  // namespace

void draw(data::Image& img, const model::Detections& d, double threshold) {
  const int64_t h = img.height, w = img.width;
  for (int64_t i = 0; i < d.size(); ++i) {
    if (d.scores[i].item<double>() < threshold) continue;
    const auto c = label_colour(d.labels[i].item<int64_t>());
    if (d.masks.defined()) {
      const at::Tensor m = d.masks[i].contiguous();
      const uint8_t* mp = m.data_ptr<uint8_t>();
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          if (mp[y * w + x]) {
            uint8_t* px = img.row(y) + 3 * x;
            for (int k = 0; k < 3; ++k) px[k] = static_cast<uint8_t>(0.55 * px[k] + 0.45 * c[k]);
          }
    }
    const at::Tensor b = d.boxes[i].to(at::kCPU, at::kDouble);
    const auto x1 = std::clamp<int64_t>(static_cast<int64_t>(b[0].item<double>()), 0, w - 1);
    const auto y1 = std::clamp<int64_t>(static_cast<int64_t>(b[1].item<double>()), 0, h - 1);
    const auto x2 = std::clamp<int64_t>(static_cast<int64_t>(b[2].item<double>()), 0, w - 1);
    const auto y2 = std::clamp<int64_t>(static_cast<int64_t>(b[3].item<double>()), 0, h - 1);
    auto put = [&](int64_t x, int64_t y) {
      if (x < 0 || y < 0 || x >= w || y >= h) return;
      uint8_t* px = img.row(y) + 3 * x;
      px[0] = c[0], px[1] = c[1], px[2] = c[2];
    };
    for (int t = 0; t < 2; ++t) {
      for (int64_t x = x1; x <= x2; ++x) put(x, y1 + t), put(x, y2 - t);
      for (int64_t y = y1; y <= y2; ++y) put(x1 + t, y), put(x2 - t, y);
    }
  }
}

}  // namespace mrcnn::run
