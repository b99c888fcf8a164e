// A split of a COCO folder as the timed run's DataSource: this rank's shard of each epoch in the
// sampler's seeded order, read by the threaded loader.
#pragma once

#include <memory>

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
