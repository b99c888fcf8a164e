// The timed run's Scorer for COCO: each validation batch's detections become COCO results image by
// image (run/coco_results.h); at the end of an epoch every rank's results are gathered onto rank 0
// (eval/detection_bytes.h), which hands them to eval::AsyncEvaluator: scored on its background
// thread while training goes on, the score delivered by its callback.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/run/timed_run.h"
#include "eval/async_evaluator.h"

namespace mrcnn::run {

struct ScorerOptions {
  int eval_threads = 1;          // COCOeval worker threads
  bool legacy_plus_one = false;  // the data's box convention (data.legacy_plus_one)
};

class CocoScorer final : public Scorer {
 public:
  // `ground_truth` is the parsed validation annotations (shared, kept for the scorer's life);
  // `label_to_category` maps the model's labels to its category ids (run/coco_results.h). On
  // several ranks every rank infers on its share of the validation set; finish_epoch gathers the
  // results onto rank 0 (a collective: every rank calls it, in the same epoch order), which
  // scores them; `done` is then called on rank 0 only, on the evaluator's thread, epoch after
  // epoch. `comm` must outlive the scorer. add() and finish_epoch() are called from the training
  // thread; wait_all() from any thread but the evaluator's.
  CocoScorer(std::shared_ptr<const eval::Dataset> ground_truth, std::vector<uint64_t> label_to_category,
             ScorerOptions options, comm::Communicator& comm);
  ~CocoScorer() override;  // waits for every submitted epoch's callback
  void add(int64_t epoch, const std::vector<model::Detections>& detections) override;
  void finish_epoch(int64_t epoch,
                    std::function<void(int64_t, std::exception_ptr, const Accuracy&)> done) override;
  void wait_all() override;

 private:
  std::vector<uint64_t> label_map_;
  ScorerOptions options_;
  comm::Communicator& comm_;
  eval::AsyncEvaluator evaluator_;
  std::vector<eval::Detection> pending_;  // the current epoch's results (training thread)
};

}  // namespace mrcnn::run
