// The real parts behind the timed run's interfaces: Mask R-CNN as a TrainableModel, a COCO
// folder as a DataSource (sampler + threaded loader), and the COCO scorer (detections encoded as
// RLE image by image, scored by eval::AsyncEvaluator while training goes on).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "benchmark/data/coco_dataset.h"
#include "benchmark/data/loader.h"
#include "benchmark/data/sampler.h"
#include "benchmark/dist/communicator.h"
#include "benchmark/run/timed_run.h"
#include "eval/async_evaluator.h"
#include "model/mask_rcnn.h"

namespace mrcnn::run {

class MaskRcnnModel final : public train::TrainableModel {
 public:
  // Shares ownership of the network.
  explicit MaskRcnnModel(model::MaskRCNN net);
  std::map<std::string, at::Tensor> losses(const model::Batch& batch) override;
  std::vector<model::Detections> detect(const model::Batch& batch) override;
  std::vector<train::NamedParameter> trainable_parameters() override;
  std::map<std::string, at::Tensor> state_dict() override;
  void load_state_dict(const std::map<std::string, at::Tensor>& state) override;
  void set_training(bool training) override;
  void set_step_seed(uint64_t seed) override;
  model::MaskRCNN& net() { return net_; }

 private:
  model::MaskRCNN net_;
  at::Generator generator_;
};

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
  const data::CocoDataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const data::CocoDataset> dataset_;
  CocoDataOptions options_;
  data::BatchSampler sampler_;
};

// The model's label map of a dataset: entry l is the COCO category id of label l (0: background).
std::vector<uint64_t> label_to_category(const data::CocoDataset& dataset);

// One image's detections as COCO results (model::to_coco_detections), with the reference's
// inclusive-pixel widths (x2 - x1 + 1) when the data uses its legacy box convention. Appends.
void to_coco_results(const model::Detections& d, const std::vector<uint64_t>& label_map, bool legacy_plus_one,
                     std::vector<eval::Detection>& out);

// Detections as bytes, for gathering every rank's results onto rank 0: a flat little-endian
// record per detection (ids, score, box, segmentation of any kind). decode_detections appends
// and throws std::runtime_error on a truncated or malformed buffer.
std::string encode_detections(const std::vector<eval::Detection>& dets);
void decode_detections(std::string_view bytes, std::vector<eval::Detection>& out);

class CocoScorer final : public Scorer {
 public:
  // `ground_truth` is the validation annotation file (read once); `labels` maps labels to
  // category ids. On several ranks every rank infers on its share of the validation set;
  // finish_epoch gathers the results onto rank 0 (a collective: every rank calls it, in the
  // same epoch order), which scores them; `done` is then called on rank 0 only.
  CocoScorer(std::shared_ptr<const eval::Dataset> ground_truth, std::shared_ptr<const data::CocoDataset> labels,
             int eval_threads, bool legacy_plus_one, dist::Communicator& comm);
  ~CocoScorer() override;
  void add(int64_t epoch, const std::vector<model::Detections>& detections) override;
  void finish_epoch(int64_t epoch,
                    std::function<void(int64_t, std::exception_ptr, const Accuracy&)> done) override;
  void wait_all() override;

 private:
  std::vector<uint64_t> label_map_;
  bool legacy_plus_one_;
  dist::Communicator& comm_;
  eval::AsyncEvaluator evaluator_;
  std::vector<eval::Detection> pending_;  // the current epoch's results (training thread)
  std::mutex mutex_;
  std::vector<std::shared_ptr<std::thread>> waiters_;  // guarded by mutex_; each joins the one before
};

}  // namespace mrcnn::run
