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

std::future<EpochEval> AsyncEvaluator::submit(int64_t epoch, std::vector<Detection> detections) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    throw std::logic_error("AsyncEvaluator::submit(epoch " + std::to_string(epoch) +
                           ") after shutdown()");
  }
  Job job{epoch, std::move(detections), {}, std::chrono::steady_clock::now()};
  std::future<EpochEval> f = job.promise.get_future();
  queue_.push_back(std::move(job));
  cv_.notify_one();
  return f;
}

size_t AsyncEvaluator::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (running_job_ ? 1 : 0);
}

void AsyncEvaluator::shutdown(bool drain) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (!drain) dropped.swap(queue_);
    cv_.notify_all();
  }
  for (Job& job : dropped) {
    job.promise.set_exception(std::make_exception_ptr(std::runtime_error(
        "AsyncEvaluator shut down before epoch " + std::to_string(job.epoch) + " was evaluated")));
  }
  if (worker_.joinable()) worker_.join();
}

void AsyncEvaluator::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this]() { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
    }
    const auto start = std::chrono::steady_clock::now();
    EpochEval r;
    std::exception_ptr error;
    try {
      r.epoch = job.epoch;
      r.queued_seconds = std::chrono::duration<double>(start - job.submitted).count();
      r.results = evaluator_.evaluate(job.detections, types_);
      r.scoring_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } catch (...) {
      error = std::current_exception();
    }
    job.detections = {};  // free the detections before handing the result over
    {
      // Not pending any more once its future is ready: pending() == 0 after the last get().
      std::lock_guard<std::mutex> lock(mu_);
      running_job_ = false;
    }
    if (error) {
      job.promise.set_exception(error);
    } else {
      job.promise.set_value(std::move(r));
    }
  }
}

}  // namespace mrcnn::eval
