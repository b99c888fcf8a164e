// A COCO-format detection dataset (annotations/instances_<split>.json + <split>/*.jpg), served
// through the Dataset interface from the flat arrays of coco_index.h: built from the JSON (read
// with the evaluator's COCO reader, eval/coco.h, or already read by the caller, who also scores
// against it), or mapped from the index `data prepare` wrote.
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
#include <utility>
#include <vector>

#include "benchmark/data/coco_index.h"
#include "benchmark/data/dataset.h"
#include "benchmark/data/resample.h"
#include "benchmark/data/transforms.h"

namespace mrcnn::data {

struct CocoDatasetOptions {
  std::string annotation_file;  // .../annotations/instances_train2017.json
  std::string image_dir;        // .../train2017
  std::string index_file;       // .../instances_train2017.mrcnn-index (coco_index.h)
  // "auto": the index when present and current, else the JSON; "index": the index or an error;
  // "json": the JSON.
  std::string source = "json";
  // The reference's remove_images_without_annotations: on for training, off for evaluation.
  bool remove_images_without_annotations = true;
  TransformOptions transform;   // MLPerf training transform by default
  bool progress = true;         // a progress line while indexing, on stderr

  // A split of a COCO folder (CocoLayout), with the reference's training or evaluation settings.
  static CocoDatasetOptions coco(const std::string& root, const std::string& split, bool train);
};

// Where the arrays came from, for the console, the log and the benchmark.
struct CocoDatasetSource {
  bool index = false;  // mapped from the prepared index (else built from the JSON)
  std::string note;    // why the JSON served where an index was allowed ("" otherwise)
  double seconds = 0;  // reading (and checking) the annotations into training-ready arrays
                       // (from annotations the caller parsed: building the arrays alone)
};

class CocoDataset final : public Dataset {
 public:
  // Reads the annotations as options.source says. Throws std::runtime_error (eval::CocoError for
  // the JSON itself) naming the file and the element on bad input, and naming the index when
  // "index" was asked for and it is absent, stale, or corrupt.
  explicit CocoDataset(const CocoDatasetOptions& options);
  // The same from annotations already parsed from options.annotation_file (not read again; not
  // kept: the arrays are built from it, or mapped from the index where options.source says so).
  CocoDataset(const CocoDatasetOptions& options, const eval::Dataset& parsed);
  // Serves arrays already built or mapped (their options must be the dataset options').
  CocoDataset(const CocoDatasetOptions& options, CocoArrays arrays, CocoDatasetSource source);

  int64_t size() const override { return static_cast<int64_t>(arrays_.images.size()); }
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
  const std::vector<std::string>& category_names() const { return arrays_.category_names; }
  uint64_t category_id_of_label(int64_t label) const;  // throws std::out_of_range
  int64_t label_of_category_id(uint64_t id) const;     // throws std::out_of_range

  const CocoDatasetStats& stats() const { return arrays_.stats; }
  const CocoDatasetOptions& options() const { return options_; }
  const CocoDatasetSource& source() const { return source_; }
  const CocoArrays& arrays() const { return arrays_; }

  // The arrays' settings for these dataset options.
  static CocoIndexOptions index_options(const CocoDatasetOptions& options);

 private:
  CocoDataset(const CocoDatasetOptions& options, std::pair<CocoArrays, CocoDatasetSource> read);
  void check_index(int64_t index) const;
  const CocoImageRecord& record(int64_t index) const { return arrays_.images[static_cast<size_t>(index)]; }

  CocoDatasetOptions options_;
  PixelTable table_;
  CocoArrays arrays_;
  CocoDatasetSource source_;
  std::vector<ImageSize> resized_;        // per image: the transform's size (options-dependent)
  std::vector<uint64_t> category_ids_;    // arrays_.category_ids, for the accessor's type
};

}  // namespace mrcnn::data
