// From the network's detections to COCO results, in one place for every command (the timed run's
// scorer, eval, predict): contiguous labels mapped to COCO category ids through the label map,
// boxes as (x, y, width, height) with the data's box convention, masks run-length encoded, as
// eval::Detection values that the COCO evaluator (eval/) scores without a JSON round trip.
//
// The label map: label_to_category[label] is the COCO category id of contiguous label `label`
// (1..num_classes-1); entry 0 (background) is never read. Labels follow the categories in
// ascending id order (80 COCO categories -> labels 1..80), as data::CocoDataset numbers them.
//
// Thread-safety: pure functions of their arguments. to_coco_detections runs on the calling
// thread and LibTorch's intra-op threads (one mask per task).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/coco.h"
#include "model/structures.h"

namespace mrcnn::run {

// The label map of a dataset's categories (any order): 0, then the ids in ascending order.
std::vector<uint64_t> label_map(std::vector<uint64_t> category_ids);
// Labels that are their own ids (1..num_classes-1), when no dataset names the classes.
std::vector<uint64_t> identity_label_map(int64_t num_classes);

// int64 [D] COCO category ids of labels [D]. Throws std::invalid_argument naming the first label
// outside 1..label_to_category.size()-1.
at::Tensor to_category_ids(const at::Tensor& labels, const std::vector<uint64_t>& label_to_category);

// One eval::Detection per detection of `detections` (its image_id; boxes and scores in double;
// the mask RLE-encoded when masks are present, otherwise no segmentation). Throws
// std::invalid_argument on a label outside the map or inconsistent detection fields.
std::vector<eval::Detection> to_coco_detections(const model::Detections& detections,
                                                const std::vector<uint64_t>& label_to_category);

// The COCO results of one image's detections, appended to `out`: to_coco_detections, with the
// reference's inclusive-pixel widths (x2 - x1 + 1) when the data uses its legacy box convention
// (data.legacy_plus_one), as the MLPerf reference reports its boxes.
void to_coco_results(const model::Detections& detections, const std::vector<uint64_t>& label_to_category,
                     bool legacy_plus_one, std::vector<eval::Detection>& out);

// One result as a COCO results JSON object: image_id, category_id, bbox, score and, when the
// detection has a mask, its segmentation as compressed RLE ({"size": [h, w], "counts": "..."}).
nlohmann::ordered_json to_json(const eval::Detection& detection);

}  // namespace mrcnn::run
