// Helpers of the model tests: a tiny Mask R-CNN configuration that builds and runs in well under a
// second on the CPU, and synthetic images with rectangles and triangles as ground truth.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <array>
#include <cstdint>
#include <vector>

#include "model/options.h"
#include "model/structures.h"

namespace mrcnn::model::testing {

inline ModelOptions tiny_options() {
  ModelOptions o;
  o.num_classes = 4;
  o.backbone.depth = 18;
  o.backbone.base_channels = 8;
  o.backbone.freeze_at = 2;
  o.fpn.out_channels = 16;
  o.rpn.pre_nms_top_n_train = 300;
  o.rpn.pre_nms_top_n_test = 200;
  o.rpn.post_nms_top_n_train = 200;
  o.rpn.post_nms_top_n_test = 100;
  o.rpn.post_nms_per_batch_train = false;
  o.rpn.batch_size_per_image = 64;
  o.box_head.representation_size = 32;
  o.box_head.batch_size_per_image = 32;
  o.mask_head.conv_channels = 8;
  o.mask_head.num_convs = 2;
  return o;
}

// One synthetic image: a smooth background plus `objects` shapes (rectangles and right
// triangles) of distinct intensities; ground truth in the image's pixels.
struct SyntheticImage {
  at::Tensor image;  // float32 [3, h, w], roughly zero-mean
  at::Tensor boxes;  // float32 [G, 4]
  at::Tensor labels; // int64 [G]
  PolygonList polygons;
};

inline SyntheticImage synthetic_image(int64_t h, int64_t w, int objects, uint64_t seed,
                                      int64_t num_classes = 4) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  SyntheticImage s;
  s.image = at::randn({3, h, w}, gen) * 0.1;
  std::vector<float> boxes;
  std::vector<int64_t> labels;
  std::vector<double> coords;
  std::vector<int64_t> poly_offsets{0}, inst_offsets{0};
  for (int k = 0; k < objects; ++k) {
    const auto u = at::rand({6}, gen);
    const double bw = 12 + u[0].item<double>() * (w / 2.0), bh = 12 + u[1].item<double>() * (h / 2.0);
    const double x1 = u[2].item<double>() * (w - bw - 1), y1 = u[3].item<double>() * (h - bh - 1);
    const double x2 = x1 + bw, y2 = y1 + bh;
    const bool triangle = u[4].item<double>() > 0.5;
    const int64_t label = 1 + static_cast<int64_t>(u[5].item<double>() * (num_classes - 1)) % (num_classes - 1);
    const double value = -1.0 + 2.0 * static_cast<double>(label) / static_cast<double>(num_classes);
    const at::Tensor ys = at::arange(h, at::kDouble).view({-1, 1}).add_(0.5);
    const at::Tensor xs = at::arange(w, at::kDouble).view({1, -1}).add_(0.5);
    at::Tensor inside = (xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2);
    if (triangle) inside = inside & ((xs - x1) / bw + (ys - y1) / bh <= 1.0);
    s.image.masked_fill_(inside.unsqueeze(0).expand({3, h, w}), value);
    boxes.insert(boxes.end(), {static_cast<float>(x1), static_cast<float>(y1),
                               static_cast<float>(x2), static_cast<float>(y2)});
    labels.push_back(label);
    if (triangle)
      coords.insert(coords.end(), {x1, y1, x2, y1, x1, y2});
    else
      coords.insert(coords.end(), {x1, y1, x2, y1, x2, y2, x1, y2});
    poly_offsets.push_back(static_cast<int64_t>(coords.size()));
    inst_offsets.push_back(static_cast<int64_t>(poly_offsets.size() - 1));
  }
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  s.boxes = at::tensor(boxes, at::TensorOptions().dtype(at::kFloat)).view({-1, 4});
  s.labels = at::tensor(labels, i64);
  s.polygons.coords = at::tensor(coords, at::TensorOptions().dtype(at::kDouble));
  s.polygons.poly_offsets = at::tensor(poly_offsets, i64);
  s.polygons.instance_offsets = at::tensor(inst_offsets, i64);
  return s;
}

// A padded batch of the images: padded to a multiple of 32 at least `min_pad` (h, w), ground
// truth padded to at least `min_gt` rows.
inline Batch make_batch(const std::vector<SyntheticImage>& images, std::vector<int64_t> ids,
                        std::array<int64_t, 2> min_pad = {0, 0}, int64_t min_gt = 0) {
  int64_t hp = min_pad[0], wp = min_pad[1], g = min_gt;
  for (const auto& s : images) {
    hp = std::max(hp, s.image.size(1));
    wp = std::max(wp, s.image.size(2));
    g = std::max(g, s.boxes.size(0));
  }
  hp = (hp + 31) / 32 * 32;
  wp = (wp + 31) / 32 * 32;
  const int64_t n = static_cast<int64_t>(images.size());
  Batch b;
  b.images = at::zeros({n, 3, hp, wp});
  b.image_sizes = at::zeros({n, 2}, at::kLong);
  b.gt_boxes = at::zeros({n, g, 4});
  b.gt_labels = at::zeros({n, g}, at::kLong);
  b.gt_counts = at::zeros({n}, at::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const auto& s = images[static_cast<size_t>(i)];
    const int64_t h = s.image.size(1), w = s.image.size(2), c = s.boxes.size(0);
    b.images[i].slice(1, 0, h).slice(2, 0, w).copy_(s.image);
    b.image_sizes[i][0] = h;
    b.image_sizes[i][1] = w;
    b.gt_boxes[i].slice(0, 0, c).copy_(s.boxes);
    b.gt_labels[i].slice(0, 0, c).copy_(s.labels);
    b.gt_counts[i] = c;
    b.gt_polygons.push_back(s.polygons);
  }
  b.image_ids = std::move(ids);
  b.original_sizes = b.image_sizes.clone();
  return b;
}

}  // namespace mrcnn::model::testing
