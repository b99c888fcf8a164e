// COCO results as bytes, for gathering every rank's detections onto rank 0
// (Communicator::gather_bytes): a flat little-endian record per detection (ids, score, box,
// segmentation of any kind). The format is private to one run: both ends are the same binary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "eval/coco.h"

namespace mrcnn::comm {

std::string encode_detections(const std::vector<eval::Detection>& dets);
// Appends the decoded detections to `out`; throws std::runtime_error on a truncated or malformed
// buffer.
void decode_detections(std::string_view bytes, std::vector<eval::Detection>& out);

}  // namespace mrcnn::comm
