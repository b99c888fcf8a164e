#include "benchmark/run/coco_data.h"

#include "logging/keys.h"

namespace mrcnn::run {

namespace {

class LoaderStream final : public BatchStream {
 public:
  explicit LoaderStream(std::unique_ptr<data::Loader> loader) : loader_(std::move(loader)) {}
  std::optional<model::Batch> next() override { return loader_->next(); }

 private:
  std::unique_ptr<data::Loader> loader_;
};

}  // namespace

CocoData::CocoData(std::shared_ptr<const data::CocoDataset> dataset, CocoDataOptions options, int rank,
                   int world_size)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      sampler_(dataset_->aspect_groups(), options_.sampler, rank, world_size) {}

std::unique_ptr<BatchStream> CocoData::epoch(int64_t epoch) {
  const int64_t e = epoch - 1;  // MLPerf counts epochs from 1, the sampler from 0
  return std::make_unique<LoaderStream>(std::make_unique<data::Loader>(
      dataset_, sampler_.epoch(options_.seed, e), data::EpochKey{options_.seed, e}, options_.loader));
}

logging::Json CocoData::sample_metadata() const {
  namespace meta = logging::meta;
  const data::CocoDatasetSource& s = dataset_->source();
  logging::Json j{{meta::kAnnotations, s.index ? "index" : "json"}, {meta::kAnnotationsSeconds, s.seconds}};
  if (!s.note.empty()) j[meta::kAnnotationsNote] = s.note;
  return j;
}

void check_training_set(const data::CocoDataset& ds, const std::string& file, const std::string& root,
                        int64_t num_classes) {
  if (ds.size() == 0) throw DataError(file + ": no image to train on (" + ds.stats().summary() + ")");
  if (ds.stats().instances_kept == 0)
    throw DataError(file + ": no object to train on, every annotation is a crowd region or empty (" +
                    ds.stats().summary() + ")");
  if (ds.num_classes() != num_classes)
    throw std::runtime_error(root + ": the training set has " + std::to_string(ds.num_classes() - 1) +
                             " categories, the model " + std::to_string(num_classes - 1) +
                             " (set model.num_classes)");
}

}  // namespace mrcnn::run
