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
// Header-only: the data pipeline and the model include it; the ops take only their own types
// (model/ops/polygon_list.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/ops/polygon_list.h"

namespace mrcnn::model {

// Polygons of many instances (model/ops/polygon_list.h): the ops' own value type.
using ops::PolygonList;

// One training batch, padded. Produced by the data pipeline, consumed by model::MaskRCNN.
// The model reads image_sizes, gt_counts and original_sizes on the host: on a GPU, keep them in
// host memory (data::batch_to does) so that reading them blocks nothing; any device works.
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
