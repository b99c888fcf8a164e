// A split of a COCO folder as the timed run's DataSource: this rank's shard of each epoch in the
// sampler's seeded order, read by the threaded loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/loader.h"
#include "benchmark/data/sampler.h"
#include "benchmark/run/timed_run.h"

namespace mrcnn::run {

struct CocoDataOptions {
  data::SamplerOptions sampler;
  data::LoaderOptions loader;
  uint64_t seed = 0;
};

// Whether a training set can be trained on by a model of `num_classes` (background included):
// throws DataError naming `annotation_file` when it has no image or no object, and
// std::runtime_error naming the dataset folder `root` when its category count is not the model's.
void check_training_set(const data::CocoDataset& dataset, const std::string& annotation_file,
                        const std::string& root, int64_t num_classes);

// One split of a COCO folder for this rank: epoch e (1-based) is the sampler's epoch e - 1.
class CocoData final : public DataSource {
 public:
  CocoData(std::shared_ptr<const data::CocoDataset> dataset, CocoDataOptions options, int rank, int world_size);
  int64_t num_images() const override { return dataset_->size(); }
  int64_t batches_per_epoch() const override { return sampler_.batches_per_epoch(); }
  std::unique_ptr<BatchStream> epoch(int64_t epoch) override;
  logging::Json sample_metadata() const override;
  const data::CocoDataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const data::CocoDataset> dataset_;
  CocoDataOptions options_;
  data::BatchSampler sampler_;
};

}  // namespace mrcnn::run
