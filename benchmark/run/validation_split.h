// The validation side of a run, read once: the split's annotations parsed one time into the
// evaluator's ground truth (eval::Dataset), the data::CocoDataset the loader serves made from that
// same parse (or mapped from the index `data prepare` wrote, where the options allow it), and the
// label map from the dataset's categories. The timed run's validation data and scorer share one
// ValidationSplit, and `eval` reads one: the annotation file is parsed once per run and once per
// `eval`.
//
// Ownership: the ground truth and the dataset are shared (the scorer's evaluator and the loader
// keep them as long as they need them). Thread-safety: immutable once read; share it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/coco_layout.h"
#include "eval/coco.h"

namespace mrcnn::run {

struct ValidationSplit {
  data::CocoLayout layout;
  std::string split;                                   // val2017, ...
  std::shared_ptr<const eval::Dataset> ground_truth;   // the parsed annotations: what is scored against
  std::shared_ptr<const data::CocoDataset> dataset;    // its images and targets, made from ground_truth
  std::vector<uint64_t> label_to_category;             // label_map(dataset->category_ids())

  // Parses options.annotation_file (the split's: assemble's dataset_options) once and makes the
  // rest from it. Throws eval::CocoError or std::runtime_error naming the file and the element on
  // bad input.
  static ValidationSplit read(const data::CocoLayout& layout, const std::string& split,
                              const data::CocoDatasetOptions& options);

  // Throw DataError naming the annotation file: no image to evaluate (what the validation data
  // needs), or no object that is not a crowd region (what the scorer needs: every AP would be -1).
  void check_images() const;
  void check_objects() const;
};

}  // namespace mrcnn::run
