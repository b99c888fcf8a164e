#include "eval/async_evaluator.h"

#include <stdexcept>
#include <string>

namespace mrcnn::eval {

const EvalResult& EpochEval::result(IouType type) const {
  for (const EvalResult& r : results) {
    if (r.iou_type == type) return r;
  }
  throw std::out_of_range(std::string("EpochEval: no ") + to_string(type) + " result for epoch " +
                          std::to_string(epoch));
}

AsyncEvaluator::AsyncEvaluator(std::shared_ptr<const Dataset> ground_truth, Options options)
    : evaluator_(std::move(ground_truth), options.eval), types_(std::move(options.iou_types)) {
  if (types_.empty()) throw std::invalid_argument("AsyncEvaluator: no IoU type to evaluate");
  worker_ = std::thread([this]() { run(); });
}

AsyncEvaluator::~AsyncEvaluator() { shutdown(true); }

void AsyncEvaluator::submit(int64_t epoch, std::vector<Detection> detections, OnDone on_done) {
  if (!on_done) throw std::invalid_argument("AsyncEvaluator::submit(epoch " + std::to_string(epoch) + "): no on_done");
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    throw std::logic_error("AsyncEvaluator::submit(epoch " + std::to_string(epoch) +
                           ") after shutdown()");
  }
  queue_.push_back(Job{epoch, std::move(detections), std::move(on_done), std::chrono::steady_clock::now()});
  ++unfinished_;
  cv_.notify_one();
}

std::future<EpochEval> AsyncEvaluator::submit(int64_t epoch, std::vector<Detection> detections) {
  auto promise = std::make_shared<std::promise<EpochEval>>();
  std::future<EpochEval> f = promise->get_future();
  submit(epoch, std::move(detections), [promise](EpochEval r, std::exception_ptr error) {
    if (error) {
      promise->set_exception(error);
    } else {
      promise->set_value(std::move(r));
    }
  });
  return f;
}

size_t AsyncEvaluator::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (running_job_ ? 1 : 0);
}

void AsyncEvaluator::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this]() { return unfinished_ == 0; });
}

void AsyncEvaluator::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--unfinished_ == 0) idle_.notify_all();
}

void AsyncEvaluator::shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (!drain) cancelling_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

EpochEval AsyncEvaluator::score(Job& job, bool cancelled, std::exception_ptr& error) {
  const auto start = std::chrono::steady_clock::now();
  EpochEval r;
  r.epoch = job.epoch;
  try {
    if (cancelled) {
      throw std::runtime_error("AsyncEvaluator shut down before epoch " + std::to_string(job.epoch) +
                               " was evaluated");
    }
    r.queued_seconds = std::chrono::duration<double>(start - job.submitted).count();
    r.results = evaluator_.evaluate(job.detections, types_);
    r.scoring_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } catch (...) {
    error = std::current_exception();
    r = EpochEval{.epoch = job.epoch};
  }
  job.detections = {};  // free the detections before handing the result over
  return r;
}

void AsyncEvaluator::run() {
  for (;;) {
    Job job;
    bool cancelled = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this]() { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
      cancelled = cancelling_;
    }
    std::exception_ptr error;
    EpochEval r = score(job, cancelled, error);
    {
      // Not pending any more once its on_done runs: pending() == 0 after the last future's get().
      std::lock_guard<std::mutex> lock(mu_);
      running_job_ = false;
    }
    job.on_done(std::move(r), error);
    job.on_done = nullptr;  // what the callback holds goes before wait() returns
    finished();
  }
}

}  // namespace mrcnn::eval
