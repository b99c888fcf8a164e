#include "benchmark/run/coco_scorer.h"

#include <chrono>

#include "benchmark/run/coco_results.h"
#include "eval/detection_bytes.h"

namespace mrcnn::run {

namespace {

// The epoch's accuracy from the evaluator's result, read as the scoring ends: it began
// scoring_seconds ago, and not before the epoch was handed over (`submitted`).
Accuracy accuracy_of(const eval::EpochEval& r, std::chrono::steady_clock::time_point submitted) {
  Accuracy acc;
  acc.bbox = r.bbox_stats()[0];
  acc.segm = r.segm_stats()[0];
  acc.scoring_seconds = r.scoring_seconds;
  acc.finished = std::chrono::steady_clock::now();
  acc.started = acc.finished - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(r.scoring_seconds));
  if (acc.started < submitted) acc.started = submitted;
  return acc;
}

}  // namespace

CocoScorer::CocoScorer(std::shared_ptr<const eval::Dataset> ground_truth, std::vector<uint64_t> label_to_category,
                       ScorerOptions options, comm::Communicator& comm)
    : label_map_(std::move(label_to_category)),
      options_(options),
      comm_(comm),
      evaluator_(std::move(ground_truth),
                 eval::AsyncEvaluatorOptions{.iou_types = {eval::IouType::kBbox, eval::IouType::kSegm},
                                             .eval = {.threads = options.eval_threads}}) {}

CocoScorer::~CocoScorer() { wait_all(); }

void CocoScorer::add(int64_t, const std::vector<model::Detections>& detections) {
  for (const auto& d : detections) to_coco_results(d, label_map_, options_.legacy_plus_one, pending_);
}

void CocoScorer::finish_epoch(int64_t epoch, std::function<void(int64_t, std::exception_ptr, const Accuracy&)> done) {
  const auto started = std::chrono::steady_clock::now();
  if (comm_.world_size() > 1) {
    // Rank order; within an image the model's order is kept, which is all COCOeval depends on.
    const std::vector<std::string> all = comm_.gather_bytes(eval::encode_detections(pending_), 0);
    pending_.clear();
    if (!comm_.is_main()) return;
    for (const auto& bytes : all) eval::decode_detections(bytes, pending_);
  }
  evaluator_.submit(epoch, std::move(pending_),
                    [started, done = std::move(done)](eval::EpochEval r, std::exception_ptr error) {
                      Accuracy acc;
                      if (!error) {
                        try {
                          acc = accuracy_of(r, started);
                        } catch (...) {
                          error = std::current_exception();
                        }
                      }
                      done(r.epoch, error, acc);
                    });
  pending_.clear();
}

void CocoScorer::wait_all() { evaluator_.wait(); }

}  // namespace mrcnn::run
