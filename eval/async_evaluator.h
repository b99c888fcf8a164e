// AsyncEvaluator: scores each epoch's detections on a background thread while training goes on.
//
//   AsyncEvaluator ev(ground_truth);                    // ground truth loaded once, kept
//   std::future<EpochEval> f = ev.submit(epoch, std::move(detections));
//   ... train the next epoch ...
//   EpochEval r = f.get();   // r.bbox_stats()[0] is box mAP, r.segm_stats()[0] mask mAP
//
// Jobs run one at a time in submission order on one background thread; each job uses the
// evaluator's worker threads (EvalOptions::threads) for its parallel parts. An error in a job
// (bad detections) is stored in that job's future; the evaluator keeps serving later jobs.
//
// Lifetime: shutdown() (or the destructor) stops accepting jobs, lets every job already
// submitted finish, so no future is left without a value, and joins the thread; nothing is
// detached. shutdown(/*drain=*/false) instead completes the jobs not yet started with an
// exception saying so. Thread-safety: submit(), pending() and shutdown() may be called from any
// thread. Not copyable or movable (it owns a thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "eval/coco.h"
#include "eval/coco_eval.h"

namespace mrcnn::eval {

struct EpochEval {
  int64_t epoch = 0;
  std::vector<EvalResult> results;  // one per IoU type, in AsyncEvaluator::Options order
  double queued_seconds = 0;        // from submit() to the start of scoring
  double scoring_seconds = 0;       // scoring itself (all IoU types)

  // The result of one IoU type; throws std::out_of_range if it was not evaluated.
  const EvalResult& result(IouType type) const;
  const std::array<double, 12>& bbox_stats() const { return result(IouType::kBbox).stats; }
  const std::array<double, 12>& segm_stats() const { return result(IouType::kSegm).stats; }
};

struct AsyncEvaluatorOptions {
  std::vector<IouType> iou_types{IouType::kBbox, IouType::kSegm};
  EvalOptions eval;  // worker threads of each job (0: all hardware threads)
};

class AsyncEvaluator {
 public:
  using Options = AsyncEvaluatorOptions;

  explicit AsyncEvaluator(std::shared_ptr<const Dataset> ground_truth, Options options = {});
  ~AsyncEvaluator();  // shutdown(true)

  AsyncEvaluator(const AsyncEvaluator&) = delete;
  AsyncEvaluator& operator=(const AsyncEvaluator&) = delete;

  // Queues the detections of `epoch` (taken by value: the caller may move them in) and returns
  // at once. Throws std::logic_error after shutdown().
  std::future<EpochEval> submit(int64_t epoch, std::vector<Detection> detections);

  // Jobs submitted and not yet finished (the running one included).
  size_t pending() const;

  // Stops accepting jobs and joins the background thread; with drain, queued jobs are scored
  // first, else they fail with std::runtime_error("... shut down before ..."). Idempotent.
  void shutdown(bool drain = true);

  const CocoEvaluator& evaluator() const { return evaluator_; }

 private:
  struct Job {
    int64_t epoch;
    std::vector<Detection> detections;
    std::promise<EpochEval> promise;
    std::chrono::steady_clock::time_point submitted;
  };
  void run();

  CocoEvaluator evaluator_;
  const std::vector<IouType> types_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  bool running_job_ = false;  // guarded by mu_
  std::thread worker_;     // last member: started after everything above is constructed
};

}  // namespace mrcnn::eval
