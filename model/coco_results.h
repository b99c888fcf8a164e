// From the network's detections to COCO results: contiguous labels mapped to COCO category ids
// through the dataset's label map, boxes as (x, y, width, height), masks run-length encoded, as
// eval::Detection values that the COCO evaluator (eval/) scores without a JSON round trip.
//
// The label map: label_to_category[label] is the COCO category id of contiguous label `label`
// (1..num_classes-1); entry 0 (background) is never read. The data pipeline builds it from the
// dataset's categories in id order (80 COCO categories -> labels 1..80).
//
// Thread-safety: pure functions of their arguments. to_coco_detections runs on the calling
// thread and LibTorch's intra-op threads (one mask per task).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "eval/coco.h"
#include "model/structures.h"

namespace mrcnn::model {

// int64 [D] COCO category ids of labels [D]. Throws std::invalid_argument naming the first label
// outside 1..label_to_category.size()-1.
at::Tensor to_category_ids(const at::Tensor& labels, const std::vector<uint64_t>& label_to_category);

// One eval::Detection per detection of `detections` (its image_id; boxes and scores in double;
// the mask RLE-encoded when masks are present, otherwise no segmentation). Throws
// std::invalid_argument on a label outside the map or inconsistent detection fields.
std::vector<eval::Detection> to_coco_detections(const Detections& detections,
                                                const std::vector<uint64_t>& label_to_category);

}  // namespace mrcnn::model
