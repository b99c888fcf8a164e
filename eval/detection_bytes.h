// COCO results as bytes: the wire format that gathers every rank's detections onto rank 0 (the
// harness's Communicator::gather_bytes carries the bytes): a flat little-endian record per
// detection (ids, score, box, segmentation of any kind). The format is private to one run: both
// ends are the same binary. Thread-safety: pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "eval/coco.h"

namespace mrcnn::eval {

std::string encode_detections(const std::vector<Detection>& dets);
// Appends the decoded detections to `out`; throws std::runtime_error on a truncated or malformed
// buffer.
void decode_detections(std::string_view bytes, std::vector<Detection>& out);

}  // namespace mrcnn::eval
