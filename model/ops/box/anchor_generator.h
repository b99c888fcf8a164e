// FPN anchors, identical to torchvision's AnchorGenerator (models/detection/anchor_utils.py):
//   * cell anchors per level: for each aspect ratio r (in the given order) and each size s of the
//     level, h = sqrt(r), w = 1/h, the box round((-w*s, -h*s, w*s, h*s) / 2) (float32, round half
//     to even), centred on 0;
//   * strides per level: (image_height / H_l, image_width / W_l) in integer division of the
//     padded image size by the grid size (so P6 of an 800-high image has stride 800/13 = 61,
//     exactly as torchvision);
//   * anchors per level: [H_l * W_l * A, 4] float32 whatever the features' dtype (torchvision
//     follows the features' dtype; for float32 features the two are identical), ordered by location row-major (y, then x),
//     then by cell anchor, each cell anchor shifted by (x * stride_w, y * stride_h).
// That is the order in which generate_proposals reads objectness and deltas.
//
// Thread-safety: immutable after construction; const methods are safe to call concurrently.
// No cache: the anchors of an 800x1344 batch take about a millisecond; callers may keep them.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <array>
#include <cstdint>
#include <vector>

namespace mrcnn::ops {

class AnchorGenerator {
 public:
  // sizes[l]: anchor sizes of level l (Mask R-CNN FPN: {{32}, {64}, {128}, {256}, {512}});
  // aspect_ratios: height/width ratios shared by every level ({0.5, 1, 2}).
  // Throws std::invalid_argument on empty lists or values that are not finite and > 0.
  AnchorGenerator(std::vector<std::vector<double>> sizes, std::vector<double> aspect_ratios);

  // The Mask R-CNN R50-FPN configuration: sizes 32, 64, 128, 256, 512 (one per level P2..P6),
  // aspect ratios 0.5, 1, 2.
  static AnchorGenerator fpn_default();

  int64_t num_levels() const { return static_cast<int64_t>(sizes_.size()); }
  // A: anchors per location of `level`.
  int64_t num_anchors_per_location(int64_t level = 0) const;

  // [A, 4] float32 centred cell anchors of `level` (CPU).
  at::Tensor cell_anchors(int64_t level) const;

  // Anchors of every level for a padded image of image_size = (height, width) whose feature
  // maps have grid_sizes[l] = (H_l, W_l); one [H_l*W_l*A, 4] float32 tensor per level, created
  // with `options` (device). Throws std::invalid_argument if the number of grids differs from
  // num_levels() or a size is not > 0.
  std::vector<at::Tensor> operator()(const std::vector<std::array<int64_t, 2>>& grid_sizes,
                                     std::array<int64_t, 2> image_size,
                                     const at::TensorOptions& options = {}) const;

  // Same, with the grid sizes read from feature maps [N, C, H_l, W_l] (device taken from them).
  std::vector<at::Tensor> operator()(at::TensorList features,
                                     std::array<int64_t, 2> image_size) const;

 private:
  std::vector<std::vector<double>> sizes_;  // per level
  std::vector<double> aspect_ratios_;
  std::vector<at::Tensor> cell_anchors_;    // per level, [A, 4] float32 CPU, made once
};

}  // namespace mrcnn::ops
