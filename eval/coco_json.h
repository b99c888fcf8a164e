// Internal to the two COCO readers (coco.cpp: ground truth; results_reader.cpp: detections):
// the JSON elements both read the same way, so that a bbox or a segmentation is accepted, and
// refused with the same words, whichever file it is in.
//
// Thread-safety: pure functions of their arguments; each call reads through its own JsonCursor.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "eval/coco.h"
#include "eval/json_cursor.h"
#include "eval/mapped_file.h"

namespace mrcnn::eval::detail {

// The JSON file at `path`, mapped for one parse; CocoError naming the path when it cannot be read.
std::shared_ptr<const MappedFile> map_json_file(const std::string& path);

// Rethrows JsonError as CocoError (one error type for callers of coco.h and results_reader.h).
template <class F>
auto with_coco_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const JsonError& e) {
    throw CocoError(e.what());
  }
}

// [x, y, w, h]: four finite numbers, w and h not negative; `present` is false for [].
void read_bbox(JsonCursor& c, std::array<double, 4>& bb, bool& present);

// An image or mask dimension: an integer in [0, 2^31-1].
uint32_t read_dim(JsonCursor& c);

// "segmentation": [[x,y,...], ...] | {"size": [h, w], "counts": [..] | "..."} | null
void read_segmentation(JsonCursor& c, Segmentation& s, std::string& scratch);

}  // namespace mrcnn::eval::detail
