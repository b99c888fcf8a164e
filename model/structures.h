// Value types that carry per-image data between the data pipeline, the ops and the network.
//
// Conventions, everywhere in the project:
//   * boxes are XYXY in absolute pixels of the image they refer to (resized image inside the
//     model, original image in Detections), float32;
//   * labels are contiguous class indices 1..num_classes-1 (0 is background); the data pipeline
//     maps COCO category ids to them and back;
//   * a padded batch carries each image's true size (`image_sizes`, the reference's
//     orig_image_dims) and ground-truth count (`gt_counts`, orig_gt_counts); nothing beyond them
//     may influence a loss or a detection.
// Header-only: the data pipeline, the ops library and the model all include it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mrcnn::model {

// Polygons of many instances, flattened into three CPU tensors:
//   instance i owns polygons instance_offsets[i] .. instance_offsets[i+1]-1,
//   polygon j owns coords[poly_offsets[j] .. poly_offsets[j+1]) = x0, y0, x1, y1, ...
// Coordinates are float64 pixels (COCO polygons are float; float64 keeps rasterization
// identical to pycocotools'). An instance may have several polygons (occluded objects).
struct PolygonList {
  at::Tensor coords;            // float64 [C], C even
  at::Tensor poly_offsets;      // int64 [P+1], poly_offsets[0] == 0, poly_offsets[P] == C
  at::Tensor instance_offsets;  // int64 [I+1], instance_offsets[0] == 0, instance_offsets[I] == P

  static PolygonList empty() {
    auto i64 = at::TensorOptions().dtype(at::kLong);
    return {at::empty({0}, at::TensorOptions().dtype(at::kDouble)), at::zeros({1}, i64),
            at::zeros({1}, i64)};
  }

  int64_t num_instances() const { return instance_offsets.numel() - 1; }
  int64_t num_polygons() const { return poly_offsets.numel() - 1; }

  // Throws std::invalid_argument if the offsets are inconsistent.
  void check() const {
    auto fail = [](const std::string& what) { throw std::invalid_argument("PolygonList: " + what); };
    if (coords.dim() != 1 || coords.scalar_type() != at::kDouble) fail("coords must be float64 [C]");
    if (poly_offsets.dim() != 1 || poly_offsets.scalar_type() != at::kLong || poly_offsets.numel() < 1)
      fail("poly_offsets must be int64 [P+1]");
    if (instance_offsets.dim() != 1 || instance_offsets.scalar_type() != at::kLong ||
        instance_offsets.numel() < 1)
      fail("instance_offsets must be int64 [I+1]");
    if (coords.numel() % 2 != 0) fail("coords must hold x,y pairs");
    if (poly_offsets[-1].item<int64_t>() != coords.numel()) fail("poly_offsets must end at coords.numel()");
    if (instance_offsets[-1].item<int64_t>() != num_polygons())
      fail("instance_offsets must end at the number of polygons");
  }
};

// One training batch, padded. Produced by the data pipeline, consumed by model::MaskRCNN.
struct Batch {
  at::Tensor images;       // float32 [N,3,Hp,Wp], normalized; Hp, Wp multiples of 32; padding is 0
  at::Tensor image_sizes;  // int64 [N,2]: (h, w) of each image after resize, before padding
  at::Tensor gt_boxes;     // float32 [N,G,4] XYXY in resized-image pixels; rows >= gt_counts[i] are 0
  at::Tensor gt_labels;    // int64 [N,G] contiguous labels; padding 0
  at::Tensor gt_counts;    // int64 [N]
  std::vector<PolygonList> gt_polygons;  // per image, instances in gt_boxes order (resized coords)
  std::vector<int64_t> image_ids;        // COCO image ids
  at::Tensor original_sizes;             // int64 [N,2]: (h, w) of the source images

  int64_t size() const { return images.defined() ? images.size(0) : 0; }
};

// Detections of one image, in that image's original coordinates.
struct Detections {
  at::Tensor boxes;   // float32 [D,4] XYXY
  at::Tensor scores;  // float32 [D]
  at::Tensor labels;  // int64 [D] contiguous labels
  at::Tensor masks;   // uint8 [D,H,W] binary masks at the original size (undefined if not computed)
  int64_t image_id = -1;

  int64_t size() const { return boxes.defined() ? boxes.size(0) : 0; }
};

}  // namespace mrcnn::model
