#include "benchmark/run/validation_split.h"

#include <algorithm>

#include "benchmark/run/coco_results.h"
#include "benchmark/run/timed_run.h"

namespace mrcnn::run {

ValidationSplit ValidationSplit::read(const data::CocoLayout& layout, const std::string& split,
                                      const data::CocoDatasetOptions& options) {
  auto ground_truth = std::make_shared<const eval::Dataset>(eval::load_dataset(options.annotation_file));
  auto dataset = std::make_shared<const data::CocoDataset>(options, *ground_truth);
  std::vector<uint64_t> labels = label_map(dataset->category_ids());
  return {.layout = layout,
          .split = split,
          .ground_truth = std::move(ground_truth),
          .dataset = std::move(dataset),
          .label_to_category = std::move(labels)};
}

void ValidationSplit::check_images() const {
  if (dataset->size() == 0) throw DataError(layout.annotation_file(split).string() + ": no image to evaluate");
}

void ValidationSplit::check_objects() const {
  const eval::Dataset& gt = *ground_truth;
  if (std::none_of(gt.annotations.begin(), gt.annotations.end(), [](const eval::Annotation& a) { return !a.iscrowd; }))
    throw DataError(gt.source + ": no object to evaluate against (every AP would be -1): " +
                    std::to_string(gt.annotations.size()) + " annotations, all crowd regions");
}

}  // namespace mrcnn::run
