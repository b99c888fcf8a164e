// Small datasets built in C++ for the evaluator's unit tests (the pycocotools comparisons use
// the Python generator, coco_gen.py).
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "eval/coco.h"

namespace mrcnn::eval::testing {

// A random dataset of `images` images (ids 1, 3, 5, ...), 4 categories (ids 2, 4, 7, 9; 9 has no
// ground truth), boxes with box-shaped polygon segmentations, some crowd regions; and detections
// near them with tied scores. Deterministic for a seed.
inline std::shared_ptr<Dataset> random_dataset(uint32_t seed, int images,
                                               std::vector<Detection>* dets) {
  std::mt19937 gen(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(gen); };
  auto ds = std::make_shared<Dataset>();
  const uint64_t cats[] = {2, 4, 7, 9};
  for (uint64_t c : cats) ds->categories.push_back({c, "c" + std::to_string(c), ""});
  uint64_t ann_id = 1;
  for (int i = 0; i < images; ++i) {
    const int w = 40 + static_cast<int>(gen() % 80), h = 40 + static_cast<int>(gen() % 80);
    const uint64_t image_id = 2 * static_cast<uint64_t>(i) + 1;
    ds->images.push_back({image_id, w, h, ""});
    const int n = static_cast<int>(gen() % 6);
    for (int j = 0; j < n; ++j) {
      Annotation a;
      a.id = ann_id++;
      a.image_id = image_id;
      a.category_id = cats[gen() % 3];
      const double bw = uni(1, w / 1.5), bh = uni(1, h / 1.5);
      const double x = uni(0, w - bw), y = uni(0, h - bh);
      a.bbox = {x, y, bw, bh};
      a.area = bw * bh * 0.9;
      a.iscrowd = gen() % 10 == 0;
      a.segmentation.kind = Segmentation::Kind::kPolygons;
      a.segmentation.polygons = {{x, y, x + bw, y, x + bw, y + bh, x, y + bh}};
      ds->annotations.push_back(a);
      if (!dets) continue;
      for (int k = 0; k < 3; ++k) {
        Detection d;
        d.image_id = image_id;
        d.category_id = gen() % 5 == 0 ? cats[gen() % 4] : a.category_id;
        d.score = static_cast<double>(gen() % 10) / 10.0;
        d.has_bbox = true;
        const double jx = uni(-4, 4), jy = uni(-4, 4);
        d.bbox = {std::max(0.0, x + jx), std::max(0.0, y + jy), bw * uni(0.7, 1.3), bh * uni(0.7, 1.3)};
        d.segmentation = Segmentation::from_rle(from_box(d.bbox, static_cast<uint32_t>(h),
                                                         static_cast<uint32_t>(w)));
        dets->push_back(std::move(d));
      }
    }
  }
  ds->build_index();
  return ds;
}

}  // namespace mrcnn::eval::testing
