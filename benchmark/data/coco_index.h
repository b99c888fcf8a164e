// The prepared COCO index: the arrays of coco_arrays.h written once (`mlperf-maskrcnn data
// prepare`) into a binary file beside the JSON that every rank maps read-only: the page cache
// then holds one copy a node, and a rank is training-ready without parsing 448 MB of JSON on the
// clock. The index is those arrays written out: what it gives back equals a build from the JSON.
//
// The index file (little-endian; `ROOT/annotations/instances_<split>.mrcnn-index`):
//   IndexHeader, then 64-byte-aligned sections (images, boxes, labels, instance_polys,
//   poly_coords, coords, category_ids, category_names, file_names), in that order.
// It records the JSON it came from (size, modification time, SHA-256), the settings that shape
// the arrays (remove_images_without_annotations, legacy_plus_one), the build statistics and the
// SHA-256 of everything after the header. It is refused when stale (the JSON changed: its size,
// or its checksum where only its time changed), when built with other settings, and when corrupt
// (truncated, wrong checksum, unknown version).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "benchmark/data/coco_arrays.h"

namespace mrcnn::data {

// The JSON an index was built from, as recorded in it.
struct IndexSource {
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
  std::string sha256;  // hex
};
IndexSource describe_source(const std::string& json_path);  // hashes the file

// Writes `arrays` to `index_path` (through a temporary file renamed into place: a reader never
// sees half an index). Throws std::runtime_error naming the path when it cannot be written.
void write_coco_index(const std::string& index_path, const CocoArrays& arrays, const IndexSource& source);

// The outcome of opening an index for a JSON.
struct IndexOpen {
  enum class Status { kCurrent, kAbsent, kStale, kOtherOptions, kOtherVersion };
  Status status = Status::kAbsent;
  std::string reason;               // why it is not used (empty when current)
  std::optional<CocoArrays> arrays; // set when current
  bool json_hashed = false;         // the JSON's checksum was needed (its time changed)
};

// Maps `index_path` and checks it against `json_path` and `options`. A current index is mapped
// and its payload checksum verified. Absent, stale, other settings or an older format version:
// a status and a reason (the caller decides whether the JSON serves instead). A corrupt index
// (truncated, bad magic, checksum mismatch, sections out of bounds) throws std::runtime_error
// naming the index and saying to run `data prepare` again.
IndexOpen open_coco_index(const std::string& index_path, const std::string& json_path, const CocoIndexOptions& options);

// The index file's format version (bumped on any layout change; an index of another version is
// stale, not corrupt).
inline constexpr uint32_t kCocoIndexVersion = 1;

}  // namespace mrcnn::data
