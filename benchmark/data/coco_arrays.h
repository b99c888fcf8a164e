// The training-ready form of a COCO split, as flat arrays: what CocoDataset serves. Built from
// the parsed annotation JSON on every run (here), or read from the binary index that `data
// prepare` writes beside the JSON (coco_index.h): both give the same arrays, bit for bit.
//
// Coordinates of polygons are kept as hundredths in int32 when every coordinate of the file is
// exactly k/100 in double arithmetic (COCO's all are: two decimals), which halves their size;
// otherwise as doubles. Decoding is checked at build time to give back the parsed double's bits.
//
// Thread-safety: a CocoArrays is immutable; share it freely.
#pragma once

#include <cstdint>
#include <memory>
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

}  // namespace mrcnn::data
