// AsyncEvaluator: scores each epoch's detections on a background thread while training goes on.
//
//   AsyncEvaluator ev(ground_truth);                    // ground truth loaded once, kept
//   ev.submit(epoch, std::move(detections), [](const EpochEval& r, std::exception_ptr error) {
//     // on the evaluator's thread: r.bbox_stats()[0] is box mAP, r.segm_stats()[0] mask mAP
//   });
//   ... train the next epoch ...
//   ev.wait();                                          // every callback so far has returned
//
// or, without a callback, std::future<EpochEval> f = ev.submit(epoch, std::move(detections)).
//
// Jobs run one at a time in submission order on one background thread; each job uses the
// evaluator's worker threads (EvalOptions::threads) for its parallel parts. A job's on_done is
// called on that background thread as soon as the job is scored, before the next job starts: the
// callbacks run one at a time, in submission order. An error in a job (bad detections) reaches
// its on_done (or its future); the evaluator keeps serving later jobs.
//
// Lifetime: shutdown() (or the destructor) stops accepting jobs, lets every job already
// submitted finish, so no callback is left uncalled and no future without a value, and joins the
// thread; nothing is detached. shutdown(/*drain=*/false) instead completes the jobs not yet
// started with an exception saying so (their on_done too runs on the background thread, in order).
// Thread-safety: submit(), pending(), wait() and shutdown() may be called from any thread except
// from inside an on_done (wait() and shutdown() would wait for themselves). Not copyable or
// movable (it owns a thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
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

  // Called once per job with its result (result.epoch is set either way) and, when scoring
  // failed, the error (the result's other fields are then empty). Must not throw.
  using OnDone = std::function<void(EpochEval result, std::exception_ptr error)>;

  // Queues the detections of `epoch` (taken by value: the caller may move them in) and returns
  // at once; `on_done` is called on the background thread when they are scored. Throws
  // std::invalid_argument when on_done is empty, std::logic_error after shutdown() (on_done is
  // then never called).
  void submit(int64_t epoch, std::vector<Detection> detections, OnDone on_done);
  // The same, the result (or the error) delivered through the returned future.
  std::future<EpochEval> submit(int64_t epoch, std::vector<Detection> detections);

  // Jobs submitted and not yet finished (the running one included); a job stops being pending
  // just before its on_done is called (its future is ready).
  size_t pending() const;

  // Blocks until no job is left unfinished: every job submitted before the call (and any other
  // thread submits meanwhile) is scored and its on_done has returned.
  void wait();

  // Stops accepting jobs and joins the background thread; with drain, queued jobs are scored
  // first, else they fail with std::runtime_error("... shut down before ..."); either way every
  // on_done has returned. Idempotent.
  void shutdown(bool drain = true);

  const CocoEvaluator& evaluator() const { return evaluator_; }

 private:
  struct Job {
    int64_t epoch;
    std::vector<Detection> detections;
    OnDone on_done;
    std::chrono::steady_clock::time_point submitted;
  };
  void run();
  // On the background thread; a cancelled job (shutdown without drain) fails without scoring.
  EpochEval score(Job& job, bool cancelled, std::exception_ptr& error);
  void finished();  // a job's on_done has returned

  CocoEvaluator evaluator_;
  const std::vector<IouType> types_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;  // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  bool cancelling_ = false;  // shutdown without drain: queued jobs fail; guarded by mu_
  bool running_job_ = false;  // guarded by mu_
  size_t unfinished_ = 0;  // jobs whose on_done has not returned; guarded by mu_
  std::condition_variable idle_;  // notified when unfinished_ reaches 0
  std::thread worker_;     // last member: started after everything above is constructed
};

}  // namespace mrcnn::eval
