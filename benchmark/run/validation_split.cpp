#include "benchmark/run/validation_split.h"

#include "benchmark/run/coco_results.h"

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

}  // namespace mrcnn::run
