// Detections drawn over their image, for people to look at (predict): each mask blended at 45 %
// in its label's colour, each box outlined (2 px), for detections at or above a score.
#pragma once

#include "benchmark/data/image_codec.h"
#include "model/structures.h"

namespace mrcnn::run {

// Draws into `image` (the original image the detections' coordinates refer to), in place.
void draw(data::Image& image, const model::Detections& detections, double score_threshold);

}  // namespace mrcnn::run
