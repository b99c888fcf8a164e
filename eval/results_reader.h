// The COCO results reader: a results file (a JSON array of detections) into Detection values
// (coco.h), read in parallel pieces with a fast path for the usual detection.
//
// Errors are CocoError, one line naming the file, the byte offset (line, column), the element
// and what was expected, as the sequential JsonCursor reader words them.
//
// Threads: a call runs on up to ResultsReadOptions::threads threads (the caller's included),
// joined before it returns; calls are independent and may run concurrently. Ownership: see
// load_results.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "eval/coco.h"

namespace mrcnn::eval {

// Reads a results file: a JSON array of detections. Only the file's own validity is checked here
// (syntax, types, finite numbers, non-negative box sizes, well-formed segmentations); whether the
// ids exist in the ground truth is checked when the results are evaluated against it. An empty
// array is refused (pycocotools cannot load one either); build an empty vector in memory instead.
//
// load_results maps the file and the detections' compressed counts refer to it (no copy): the
// mapping lives as long as any of them (or a copy) does, even after the file is deleted. Replace
// a results file by renaming a new one over it, as this project's writers do, not by rewriting it
// in place while something reads it (a file truncated under a mapping faults its reader).
// parse_results copies what it keeps from `json`.
std::vector<Detection> load_results(const std::string& path);
std::vector<Detection> parse_results(std::string_view json, const std::string& source);

// How the results reader works (the defaults are what the two functions above use). The array is
// cut into one piece per thread at element boundaries; each piece is parsed on its own thread
// and the detections are concatenated in file order. Each element goes through a fast path for
// the usual shape ({"image_id", "category_id", "score", "bbox", "segmentation": compressed RLE},
// keys in any order, no escapes but \\ \" \/ in the counts); anything else (other keys,
// polygons, uncompressed RLE, other escapes, ...) is read by JsonCursor. The fast path learns
// an element's layout (its bytes around the values) and reads the next elements by comparing
// those bytes and converting only the values, as long as they match. A cut is trusted only when
// the piece before it ends exactly there; otherwise, and whenever anything is malformed, the
// whole text is read again in one sequential pass through JsonCursor alone, which gives the
// error message (file, byte, line, column, element, expectation). The detections and the errors
// are the same whatever the options.
struct ResultsReadOptions {
  int threads = 0;                   // 0: all hardware threads
  size_t min_piece_bytes = 1 << 20;  // texts shorter than two of these are read on one thread
  bool fast_path = true;             // false with threads = 1: JsonCursor alone (the reference)
};
std::vector<Detection> load_results(const std::string& path, const ResultsReadOptions& options);
std::vector<Detection> parse_results(std::string_view json, const std::string& source,
                                     const ResultsReadOptions& options);

}  // namespace mrcnn::eval
