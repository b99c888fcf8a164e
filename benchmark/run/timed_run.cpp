#include "benchmark/run/timed_run.h"

#include <cerrno>
#include <cstring>
#include <sstream>

#include "logging/console.h"
#include "logging/keys.h"
#include "logging/progress.h"

namespace mrcnn::run {

using logging::Json;
namespace key = logging::key;
namespace meta = logging::meta;

TimedRun::TimedRun(logging::MLLogger& mllog, train::TrainableModel& model, train::Trainer& trainer, RunParts parts,
                   dist::Communicator& comm, TimedRunOptions options)
    : mllog_(mllog),
      model_(model),
      trainer_(trainer),
      parts_(std::move(parts)),
      comm_(comm),
      options_(std::move(options)) {
  if (!parts_.train_data || !parts_.val_data || !parts_.scorer)
    throw std::invalid_argument("TimedRun needs train data, validation data and scorer factories");
  if (options_.first_epoch < 1) throw std::invalid_argument("first_epoch must be >= 1");
  if (options_.max_epochs < options_.first_epoch)
    throw std::invalid_argument("max_epochs (" + std::to_string(options_.max_epochs) + ") is below the first epoch (" +
                                std::to_string(options_.first_epoch) + ")");
}

void TimedRun::write_metrics(const std::string& json_line) {
  if (metrics_ == nullptr) return;
  std::lock_guard lock(mutex_);
  std::fputs(json_line.c_str(), metrics_);
  std::fputc('\n', metrics_);
  std::fflush(metrics_);
}

// Runs on the scorer's thread: logs the score with its own timestamp, then tells the training
// thread whether the targets are met.
void TimedRun::log_accuracy(int64_t epoch, std::exception_ptr error, const Accuracy& acc) {
  bool converged = false;
  {
    std::lock_guard lock(mutex_);
    if (error) {
      if (!scoring_error_) scoring_error_ = error;
      return;
    }
    // After the run has converged, later epochs' scores are not part of the log.
    if (target_reached_) return;
    result_.accuracies.emplace_back(epoch, acc);
    mllog_.log(key::kEvalAccuracy, Json{{"BBOX", acc.bbox}, {"SEGM", acc.segm}}, Json{{meta::kEpochNum, epoch}});
    mllog_.log(key::kEvalStop, nullptr, Json{{meta::kEpochNum, epoch}});
    if (acc.bbox >= options_.target_bbox && acc.segm >= options_.target_segm) {
      target_reached_ = true;
      result_.converged_epoch = epoch;
      converged = true;
    }
  }
  logging::info(logging::strprintf("epoch %lld scored: BBOX %.4f  SEGM %.4f  (%.1f s)%s", static_cast<long long>(epoch),
                                   acc.bbox, acc.segm, acc.scoring_seconds, converged ? "  -- targets reached" : ""));
  Json m{{"event", "eval"}, {"epoch", epoch}, {"bbox", acc.bbox}, {"segm", acc.segm},
         {"scoring_seconds", acc.scoring_seconds}, {"time_ms", logging::now_ms()}};
  write_metrics(m.dump());
}

void TimedRun::run_validation(int64_t epoch) {
  model_.set_training(false);
  at::NoGradGuard no_grad;
  std::unique_ptr<logging::Progress> bar;
  if (options_.show_progress && comm_.is_main())
    bar = std::make_unique<logging::Progress>("eval  " + std::to_string(epoch), val_->batches_per_epoch(), "batch");
  auto stream = val_->epoch(epoch);
  int64_t done = 0;
  while (auto batch = stream->next()) {
    scorer_->add(epoch, model_.detect(*batch));
    if (bar) bar->update(++done);
  }
  if (bar) bar->finish();
}

void TimedRun::train_epochs(const std::function<bool()>& target_reached, std::string& status) {
  const int64_t rank_images = train_->num_images() / std::max(1, comm_.world_size());
  bool stop = false;
  for (int64_t epoch = options_.first_epoch; epoch <= options_.max_epochs && !stop; ++epoch) {
    mllog_.log(key::kBlockStart, nullptr, Json{{meta::kFirstEpochNum, epoch}, {meta::kEpochCount, 1}});
    mllog_.log(key::kEpochStart, nullptr, Json{{meta::kEpochNum, epoch}});
    ++result_.epochs_trained;
    std::unique_ptr<logging::Progress> bar;
    if (options_.show_progress && comm_.is_main())
      bar = std::make_unique<logging::Progress>("epoch " + std::to_string(epoch), rank_images, "img");
    auto stream = train_->epoch(epoch);
    int64_t images = 0;
    const auto epoch_t0 = std::chrono::steady_clock::now();
    while (auto batch = stream->next()) {
      const train::StepResult r = trainer_.step(*batch);
      const auto now = std::chrono::steady_clock::now();
      images += r.images;
      const double secs = std::chrono::duration<double>(now - epoch_t0).count();
      {
        std::lock_guard lock(mutex_);
        result_.steps.push_back(r);
        result_.step_finished.push_back(now);
      }
      if (metrics_ != nullptr) {
        Json m{{"event", "step"}, {"epoch", epoch}, {"step", r.step}, {"lr", r.lr}, {"loss", r.loss},
               {"losses", r.losses}, {"images_per_s", secs > 0 ? images / secs : 0.0},
               {"time_ms", logging::now_ms()}};
        if (r.skipped) m["skipped"] = true;
        if (r.grad_norm > 0) m["grad_norm"] = r.grad_norm;
        write_metrics(m.dump());
      }
      if (bar) {
        char extra[96];
        std::snprintf(extra, sizeof extra, "loss %.4f  lr %.5f", r.loss, r.lr);
        bar->update(images, extra);
      }
      if (target_reached()) {  // an earlier epoch's score arrived and met the targets
        stop = true;
        break;
      }
    }
    if (bar) bar->finish();
    mllog_.log(key::kEpochStop, nullptr, Json{{meta::kEpochNum, epoch}});
    mllog_.log(key::kBlockStop, nullptr, Json{{meta::kFirstEpochNum, epoch}});
    if (options_.on_epoch_end) options_.on_epoch_end(epoch);
    if (stop) break;

    mllog_.log(key::kEvalStart, nullptr, Json{{meta::kEpochNum, epoch}});
    run_validation(epoch);
    scorer_->finish_epoch(epoch, [this](int64_t e, std::exception_ptr err, const Accuracy& a) {
      log_accuracy(e, err, a);
    });
    if (!options_.async_eval) scorer_->wait_all();
    stop = target_reached();
  }
  if (!stop) {  // the last epochs' scores are still on their way
    scorer_->wait_all();
    stop = target_reached();
  }
  if (stop) status = std::string(logging::value::kSuccess);
}

RunResult TimedRun::run() {
  const std::string& mpath = options_.metrics_path;
  if (comm_.is_main() && !mpath.empty()) {
    metrics_ = std::fopen(mpath.c_str(), options_.first_epoch > 1 ? "a" : "w");
    if (metrics_ == nullptr)
      throw std::runtime_error("cannot write metrics file '" + mpath + "': " + std::strerror(errno));
  }
  struct CloseMetrics {
    std::FILE*& f;
    ~CloseMetrics() {
      if (f) std::fclose(f);
      f = nullptr;
    }
  } close_metrics{metrics_};

  result_.run_start_ms = mllog_.log(key::kRunStart);
  if (result_.run_start_ms == 0) result_.run_start_ms = logging::now_ms();
  const auto t0 = std::chrono::steady_clock::now();
  std::string status = std::string(logging::value::kAborted);
  // Rank 0 scores; its verdict (go on, targets reached, scoring failed) is broadcast so that
  // every rank stops after the same step. Every rank calls this at the same points.
  auto target_reached = [this] {
    int64_t verdict = 0;
    if (comm_.is_main()) {
      std::lock_guard lock(mutex_);
      verdict = scoring_error_ ? 2 : target_reached_ ? 1 : 0;
    }
    if (comm_.world_size() > 1) {
      std::vector<at::Tensor> t{at::full({1}, verdict, at::kLong)};
      comm_.broadcast(t, 0);
      verdict = t[0].item<int64_t>();
    }
    if (verdict == 2) {
      if (!comm_.is_main()) throw std::runtime_error("COCO scoring failed on rank 0");
      std::lock_guard lock(mutex_);
      std::rethrow_exception(scoring_error_);
    }
    if (verdict == 1 && !comm_.is_main()) {
      std::lock_guard lock(mutex_);
      target_reached_ = true;
    }
    return verdict == 1;
  };

  try {
    train_ = parts_.train_data();
    val_ = parts_.val_data();
    scorer_ = parts_.scorer();
    mllog_.log(key::kTrainSamples, train_->num_images());
    mllog_.log(key::kEvalSamples, val_->num_images());
    train_epochs(target_reached, status);
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      target_reached_ = true;  // no score may be logged after run_stop
    }
    result_.run_stop_ms = mllog_.log(key::kRunStop, nullptr, Json{{meta::kStatus, logging::value::kAborted}});
    try {
      std::rethrow_exception(std::current_exception());
    } catch (const std::exception& e) {
      result_.stop_reason = e.what();
    } catch (...) {
      result_.stop_reason = "unknown error";
    }
    if (scorer_) scorer_->wait_all();
    throw;
  }

  {
    std::lock_guard lock(mutex_);
    target_reached_ = true;  // freeze the log: nothing after run_stop
    result_.success = status == logging::value::kSuccess;
    result_.stop_reason = result_.success ? "target reached" : "epoch budget spent";
  }
  result_.run_stop_ms = mllog_.log(key::kRunStop, nullptr, Json{{meta::kStatus, status}});
  if (result_.run_stop_ms == 0) result_.run_stop_ms = logging::now_ms();
  result_.run_seconds = (result_.run_stop_ms - result_.run_start_ms) / 1000.0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Scores of epochs after convergence may still be running; they are not logged.
  scorer_->wait_all();
  if (comm_.is_main()) {
    if (result_.success)
      logging::info(logging::strprintf("time to train: %.1f s (%.2f min), targets reached at epoch %lld",
                                       result_.run_seconds, result_.run_seconds / 60.0,
                                       static_cast<long long>(result_.converged_epoch)));
    else
      logging::warn(logging::strprintf("run aborted: targets not reached in %lld epochs (%.1f s)",
                                       static_cast<long long>(options_.max_epochs), wall));
  }
  return result_;
}

}  // namespace mrcnn::run
