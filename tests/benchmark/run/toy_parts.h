// A tiny trainable model, data source and scorer that stand in for Mask R-CNN, COCO and the
// COCO evaluator, so that the timed run's machinery (MLPerf event order, asynchronous scoring,
// determinism, checkpoints) is tested in milliseconds.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "benchmark/run/timed_run.h"

namespace mrcnn::run::testing {

// Linear regression y = x.w + b, with a random draw per step so that seeding matters.
class ToyModel final : public train::TrainableModel {
 public:
  explicit ToyModel(int64_t features = 8, uint64_t init_seed = 1) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(init_seed);
    w_ = at::randn({features}, g, at::TensorOptions().dtype(at::kFloat)).requires_grad_();
    b_ = at::zeros({1}).requires_grad_();
  }
  std::map<std::string, at::Tensor> losses(const model::Batch& batch) override {
    const at::Tensor x = batch.images.reshape({batch.size(), -1}).narrow(1, 0, w_.size(0));
    const at::Tensor y = batch.gt_boxes.reshape({batch.size(), -1}).select(1, 0);
    // A random subset of the batch, drawn from the step's generator (as the RoI sampler does).
    const at::Tensor keep = at::rand({batch.size()}, gen_) < 0.75;
    const at::Tensor err = (x.matmul(w_) + b_ - y) * keep.to(at::kFloat);
    const int64_t call = calls_++;
    if (step_time_.count() > 0) std::this_thread::sleep_for(step_time_);
    if (call == fail_at_step_) throw std::runtime_error("toy model failed");
    if (call == nan_at_step_) return {{"loss_mse", err.pow(2).mean() * NAN}};
    return {{"loss_mse", err.pow(2).mean()}, {"loss_l1", err.abs().mean() * 0.1}};
  }
  std::vector<model::Detections> detect(const model::Batch& batch) override {
    return std::vector<model::Detections>(static_cast<size_t>(batch.size()));
  }
  std::vector<train::NamedParameter> trainable_parameters() override { return {{"w", w_}, {"b.bias", b_}}; }
  std::map<std::string, at::Tensor> state_dict() override { return {{"w", w_.detach()}, {"b.bias", b_.detach()}}; }
  void load_state_dict(const std::map<std::string, at::Tensor>& s) override {
    at::NoGradGuard g;
    w_.copy_(s.at("w"));
    b_.copy_(s.at("b.bias"));
  }
  void set_training(bool) override {}
  void set_step_seed(uint64_t seed) override { gen_ = at::make_generator<at::CPUGeneratorImpl>(seed); }
  int64_t nan_at_step_ = -1;
  int64_t fail_at_step_ = -1;  // throws in this step's forward
  std::chrono::milliseconds step_time_{0};  // each forward takes at least this long

 private:
  at::Tensor w_, b_;
  at::Generator gen_ = at::make_generator<at::CPUGeneratorImpl>(0);
  int64_t calls_ = 0;
};

class ToyStream final : public BatchStream {
 public:
  ToyStream(int64_t epoch, int64_t batches, int64_t batch_size) : epoch_(epoch), left_(batches), n_(batch_size) {}
  std::optional<model::Batch> next() override {
    if (left_-- <= 0) return std::nullopt;
    auto g = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(epoch_ * 1000 + left_));
    model::Batch b;
    b.images = at::randn({n_, 1, 2, 4}, g);
    const at::Tensor truth = at::linspace(-1, 1, 8);
    b.gt_boxes = b.images.reshape({n_, 8}).matmul(truth).reshape({n_, 1, 1}).expand({n_, 1, 4}).contiguous();
    return b;
  }

 private:
  int64_t epoch_, left_, n_;
};

class ToyData final : public DataSource {
 public:
  ToyData(int64_t batches, int64_t batch_size) : batches_(batches), batch_size_(batch_size) {}
  int64_t num_images() const override { return batches_ * batch_size_; }
  int64_t batches_per_epoch() const override { return batches_; }
  std::unique_ptr<BatchStream> epoch(int64_t e) override { return std::make_unique<ToyStream>(e, batches_, batch_size_); }

 private:
  int64_t batches_, batch_size_;
};

// Scores epoch e as (bbox_per_epoch * e, segm_per_epoch * e) after `delay` on its own thread.
class ToyScorer final : public Scorer {
 public:
  ToyScorer(double bbox_per_epoch, double segm_per_epoch, std::chrono::milliseconds delay)
      : bbox_(bbox_per_epoch), segm_(segm_per_epoch), delay_(delay) {}
  ~ToyScorer() override { wait_all(); }
  void add(int64_t, const std::vector<model::Detections>& d) override { images_ += static_cast<int64_t>(d.size()); }
  void finish_epoch(int64_t epoch, std::function<void(int64_t, std::exception_ptr, const Accuracy&)> done) override {
    std::lock_guard lock(mutex_);
    // Scores arrive in epoch order, as a Scorer promises: each job waits for the one before.
    threads_.reserve(64);  // `previous` must stay valid (no reallocation while jobs run)
    if (threads_.size() >= 64) throw std::logic_error("ToyScorer: at most 64 epochs");
    std::thread* previous = threads_.empty() ? nullptr : &threads_.back();
    threads_.emplace_back([this, epoch, done, previous] {
      if (previous != nullptr) previous->join();
      Accuracy a;
      a.started = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(delay_);
      a.bbox = bbox_ * static_cast<double>(epoch);
      a.segm = segm_ * static_cast<double>(epoch);
      a.finished = std::chrono::steady_clock::now();
      a.scoring_seconds = std::chrono::duration<double>(a.finished - a.started).count();
      done(epoch, nullptr, a);
    });
  }
  void wait_all() override {
    std::vector<std::thread> ts;
    {
      std::lock_guard lock(mutex_);
      ts.swap(threads_);
    }
    if (!ts.empty()) ts.back().join();  // joins the chain: each job joined the one before it
  }
  int64_t images_ = 0;

 private:
  double bbox_, segm_;
  std::chrono::milliseconds delay_;
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

}  // namespace mrcnn::run::testing
