#include "benchmark/run/coco_scorer.h"

#include <chrono>

#include "eval/detection_bytes.h"
#include "benchmark/run/coco_results.h"

namespace mrcnn::run {

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
  auto started = std::chrono::steady_clock::now();
  if (comm_.world_size() > 1) {
    // Rank order; within an image the model's order is kept, which is all COCOeval depends on.
    const std::vector<std::string> all = comm_.gather_bytes(eval::encode_detections(pending_), 0);
    pending_.clear();
    if (!comm_.is_main()) return;
    for (const auto& bytes : all) eval::decode_detections(bytes, pending_);
  }
  std::future<eval::EpochEval> future = evaluator_.submit(epoch, std::move(pending_));
  pending_.clear();
  std::lock_guard lock(mutex_);
  // Each waiter first joins the previous one, so callbacks run one at a time in epoch order.
  std::shared_ptr<std::thread> previous = waiters_.empty() ? nullptr : waiters_.back();
  auto job = [epoch, started, previous, done = std::move(done), f = std::move(future)]() mutable {
    Accuracy acc;
    std::exception_ptr error;
    try {
      const eval::EpochEval r = f.get();
      acc.bbox = r.bbox_stats()[0];
      acc.segm = r.segm_stats()[0];
      acc.scoring_seconds = r.scoring_seconds;
      acc.finished = std::chrono::steady_clock::now();
      acc.started = acc.finished - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(r.scoring_seconds));
      if (acc.started < started) acc.started = started;
    } catch (...) {
      error = std::current_exception();
    }
    if (previous) previous->join();
    done(epoch, error, acc);
  };
  waiters_.push_back(std::make_shared<std::thread>(std::move(job)));
}

void CocoScorer::wait_all() {
  std::vector<std::shared_ptr<std::thread>> ts;
  {
    std::lock_guard lock(mutex_);
    ts.swap(waiters_);
  }
  if (!ts.empty()) ts.back()->join();  // each waiter joined the one before it
}

}  // namespace mrcnn::run
