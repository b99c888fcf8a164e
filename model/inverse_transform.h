// The data pipeline's resize undone for a batch's detections: boxes from the pixels of the resized
// image the network saw to those of the original image (ratios in float32, as torchvision's
// resize_boxes computes them), and each detection's mask probabilities pasted into the original
// image and thresholded.
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include <vector>

#include "model/roi_heads.h"
#include "model/structures.h"

namespace mrcnn::model {

// One Detections per image of `batch`: raw[i] in the coordinates of image i as resized
// (batch.image_sizes), mapped to batch.original_sizes (the resized size where undefined), with
// the batch's image ids. Masks: probabilities > mask_threshold after pasting.
std::vector<Detections> to_original_image(const std::vector<RawDetections>& raw, const Batch& batch,
                                          double mask_threshold);

}  // namespace mrcnn::model
