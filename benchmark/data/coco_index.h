// The training-ready form of a COCO split, as flat arrays: what CocoDataset serves. Built from
// the annotation JSON on every run, or prepared once (`mlperf-maskrcnn data prepare`) into a
// binary index beside the JSON that every rank maps read-only: the page cache then holds one
// copy a node, and a rank is training-ready without parsing 448 MB of JSON on the clock.
//
// Both paths produce the same arrays, bit for bit: the index is those arrays written out.
// Coordinates of polygons are kept as hundredths in int32 when every coordinate of the file is
// exactly k/100 in double arithmetic (COCO's all are: two decimals), which halves their size;
// otherwise as doubles. Decoding is checked at build time to give back the parsed double's bits.
//
// The index file (little-endian; `ROOT/annotations/instances_<split>.mrcnn-index`):
//   IndexHeader, then 64-byte-aligned sections (images, boxes, labels, instance_polys,
//   poly_coords, coords, category_ids, category_names, file_names), in that order.
// It records the JSON it came from (size, modification time, SHA-256), the settings that shape
// the arrays (remove_images_without_annotations, legacy_plus_one), the build statistics and the
// SHA-256 of everything after the header. It is refused when stale (the JSON changed: its size,
// or its checksum where only its time changed), when built with other settings, and when corrupt
// (truncated, wrong checksum, unknown version).
//
// Thread-safety: a CocoArrays is immutable; share it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::eval {
class Dataset;
}

namespace mrcnn::data {

// What shapes the arrays: the reference's training or evaluation choices.
struct CocoIndexOptions {
  bool remove_images_without_annotations = true;  // training keeps images with a usable annotation
  bool legacy_plus_one = true;                     // box convention (transforms.h)
  bool operator==(const CocoIndexOptions&) const = default;
};

// What construction kept and dropped (reported, so that a silent skip is never silent).
struct CocoDatasetStats {
  int64_t images_in_file = 0;
  int64_t images_kept = 0;
  int64_t images_dropped_no_annotations = 0;  // training only: no annotation at all
  int64_t images_dropped_only_tiny_boxes = 0; // training only: every box <= 1 px wide or tall
  int64_t crowd_annotations_dropped = 0;
  int64_t boxes_dropped_empty_after_clip = 0;
  int64_t polygons_skipped_too_few_points = 0;
  int64_t instances_without_polygon = 0;
  int64_t instances_kept = 0;

  std::string summary() const;  // one line for the console
};

// One kept image; also its on-disk layout in the index.
struct CocoImageRecord {
  int64_t image_id;
  int32_t width;
  int32_t height;
  int64_t first_instance;  // instances [first_instance, end_instance) of the instance arrays
  int64_t end_instance;
  uint32_t name_offset;    // file_name: file_names[name_offset, name_offset + name_length)
  uint32_t name_length;
};
static_assert(sizeof(CocoImageRecord) == 40);

class CocoArrays {
 public:
  std::span<const CocoImageRecord> images;  // ascending image id
  std::span<const float> boxes;             // 4 a kept instance: XYXY, clipped to the image
  std::span<const int64_t> labels;          // 1..num_classes-1
  std::span<const int64_t> instance_polys;  // instance i owns polygons [v[i], v[i+1])
  std::span<const int64_t> poly_coords;     // polygon j owns coordinates [v[j], v[j+1])
  std::span<const int32_t> coords_centi;    // the coordinates in hundredths, or
  std::span<const double> coords;           // as doubles (exactly one of the two is used)
  std::span<const uint64_t> category_ids;   // ascending; label l is category_ids[l - 1]
  std::vector<std::string> category_names;  // in category_ids' order
  std::span<const char> file_names;
  CocoDatasetStats stats;
  CocoIndexOptions options;

  int64_t num_coords() const { return static_cast<int64_t>(centi() ? coords_centi.size() : coords.size()); }
  bool centi() const { return !coords_centi.empty() || coords.empty(); }
  double coord(int64_t k) const {
    return centi() ? static_cast<double>(coords_centi[static_cast<size_t>(k)]) / 100.0
                   : coords[static_cast<size_t>(k)];
  }
  std::string_view file_name(const CocoImageRecord& r) const {
    return {file_names.data() + r.name_offset, r.name_length};
  }

  // Keeps the storage the spans point into alive: owned vectors, or a read-only file mapping.
  std::shared_ptr<const void> owner;
};

// Throws std::runtime_error naming `file` when the parsed file is not an instances file of the
// release its name says: a person-keypoints file, or info.year differing from the year in the name.
void check_instances_file(const eval::Dataset& coco, const std::string& file);

// Builds the arrays from a parsed annotation file (`file` names it in errors), as the MLPerf
// reference's COCODataset keeps images and instances (coco_dataset.h). Throws
// std::runtime_error naming the file and the annotation on bad input.
CocoArrays build_coco_arrays(const eval::Dataset& coco, const CocoIndexOptions& options, const std::string& file,
                             bool progress);

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
