// A COCO-format detection dataset (annotations/instances_<split>.json + <split>/*.jpg), read with
// the evaluator's COCO reader (eval/coco.h) and served through the Dataset interface.
//
// What it keeps, as the MLPerf reference (maskrcnn-benchmark's COCODataset) does:
//   * images in ascending id order;
//   * training (`remove_images_without_annotations`): an image is kept when it has at least one
//     annotation (crowd ones included) whose box is wider and taller than 1 pixel -- 117,266 of
//     COCO 2017's 118,287 training images; validation keeps every image;
//   * per image, crowd annotations are dropped; boxes become XYXY (see transforms.h for the
//     TO_REMOVE convention), are clipped to the image, and a box left empty by clipping is
//     dropped with its polygons;
//   * labels are contiguous, 1..num_classes-1, in ascending COCO category id (0: background);
//   * polygons with fewer than 3 points are skipped (counted in stats()); an instance may thus
//     keep its box with no polygon at all (an empty mask target, as in the reference).
// Bad input is an error naming the file and the annotation: a non-crowd annotation whose
// segmentation is an RLE (only polygons travel through model::PolygonList), a non-finite box,
// an image file that is missing, corrupt, or whose real size differs from the JSON's.
//
// Thread-safety: immutable after construction; load() may run on many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/data/dataset.h"
#include "benchmark/data/resample.h"
#include "benchmark/data/transforms.h"

namespace mrcnn::data {

struct CocoDatasetOptions {
  std::string annotation_file;  // .../annotations/instances_train2017.json
  std::string image_dir;        // .../train2017
  // The reference's remove_images_without_annotations: on for training, off for evaluation.
  bool remove_images_without_annotations = true;
  TransformOptions transform;   // MLPerf training transform by default
  bool progress = true;         // a progress line while indexing, on stderr

  // A split of a COCO folder (CocoLayout), with the reference's training or evaluation settings.
  static CocoDatasetOptions coco(const std::string& root, const std::string& split, bool train);
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

class CocoDataset final : public Dataset {
 public:
  // Reads and indexes the annotation file. Throws std::runtime_error (eval::CocoError for the
  // JSON itself) naming the file and the element on bad input.
  explicit CocoDataset(const CocoDatasetOptions& options);

  int64_t size() const override { return static_cast<int64_t>(images_.size()); }
  ImageSize original_size(int64_t index) const override;
  ImageSize resized_size(int64_t index) const override;
  SampleTargets load(int64_t index, const EpochKey& key, float* slot, int64_t slot_h,
                     int64_t slot_w) const override;

  int64_t image_id(int64_t index) const;
  std::string image_path(int64_t index) const;
  // Aspect group of every sample (sampler.h), for BatchSampler.
  std::vector<int> aspect_groups() const;
  // The ground truth of sample `index` in source-image pixels (before resize and flip).
  InstanceTargets source_targets(int64_t index) const;

  // Classes: label l (1..num_classes-1) is COCO category category_ids()[l - 1].
  int64_t num_classes() const { return static_cast<int64_t>(category_ids_.size()) + 1; }
  const std::vector<uint64_t>& category_ids() const { return category_ids_; }
  const std::vector<std::string>& category_names() const { return category_names_; }
  uint64_t category_id_of_label(int64_t label) const;  // throws std::out_of_range
  int64_t label_of_category_id(uint64_t id) const;     // throws std::out_of_range

  const CocoDatasetStats& stats() const { return stats_; }
  const CocoDatasetOptions& options() const { return options_; }

 private:
  struct Entry {
    int64_t image_id;
    std::string file_name;
    ImageSize original;
    ImageSize resized;
    int64_t first_instance;  // instances [first_instance, end_instance) in the flat arrays
    int64_t end_instance;
  };
  void check_index(int64_t index) const;

  CocoDatasetOptions options_;
  PixelTable table_;
  std::vector<Entry> images_;
  // Flat per-instance data: XYXY boxes clipped to the source image, labels, polygon ranges.
  std::vector<float> boxes_;
  std::vector<int64_t> labels_;
  std::vector<int64_t> instance_polys_;  // instance i owns polygons [instance_polys_[i], [i+1])
  std::vector<int64_t> poly_coords_;     // polygon j owns coords_[poly_coords_[j], [j+1])
  std::vector<double> coords_;
  std::vector<uint64_t> category_ids_;
  std::vector<std::string> category_names_;
  CocoDatasetStats stats_;
};

}  // namespace mrcnn::data
