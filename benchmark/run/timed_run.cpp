#include "benchmark/run/timed_run.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "benchmark/run/stop_signal.h"
#include "logging/console.h"
#include "logging/keys.h"

namespace mrcnn::run {

using logging::Json;
namespace key = logging::key;
namespace meta = logging::meta;

TimedRun::TimedRun(logging::MLLogger& mllog, train::TrainableModel& model, train::Trainer& trainer, RunParts parts,
                   comm::Communicator& comm, TimedRunOptions options)
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

template <typename Hook>
void TimedRun::notify(Hook hook) {
  for (RunObserver* o : options_.observers) hook(*o);
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
    const bool counts = options_.max_steps_per_epoch == 0;  // a measurement never converges
    mllog_.log(key::kEvalAccuracy, Json{{"BBOX", acc.bbox}, {"SEGM", acc.segm}}, Json{{meta::kEpochNum, epoch}});
    mllog_.log(key::kEvalStop, nullptr, Json{{meta::kEpochNum, epoch}});
    if (counts && acc.bbox >= options_.target_bbox && acc.segm >= options_.target_segm) {
      target_reached_ = true;
      result_.converged_epoch = epoch;
      converged = true;
    }
  }
  logging::info(logging::strprintf("epoch %lld scored: BBOX %.4f  SEGM %.4f  (%.1f s)%s", static_cast<long long>(epoch),
                                   acc.bbox, acc.segm, acc.scoring_seconds, converged ? "  -- targets reached" : ""));
  notify([&](RunObserver& o) { o.scored(epoch, acc); });
}

void TimedRun::run_validation(int64_t epoch) {
  model_.set_training(false);
  at::NoGradGuard no_grad;
  notify([&](RunObserver& o) { o.eval_started(epoch, val_->batches_per_epoch()); });
  auto stream = val_->epoch(epoch);
  int64_t done = 0;
  while (auto batch = stream->next()) {
    scorer_->add(epoch, model_.detect(*batch));
    throw_if_stop_requested();  // a safe point: SIGTERM/SIGINT end the run here
    ++done;
    notify([&](RunObserver& o) { o.eval_batch_done(epoch, done); });
  }
}

namespace {

// The median and the 95th percentile (nearest rank) of `v`; -1 for none.
std::pair<double, double> median_p95(std::vector<double> v) {
  if (v.empty()) return {-1, -1};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  const auto p95 = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(n)));
  return {median, v[std::max<size_t>(p95, 1) - 1]};
}

}  // namespace

// Every rank's own step times of the epoch, gathered (a collective: every rank calls it at the
// same point) and logged by rank 0: what `forecast` grows the slowest of many ranks from.
void TimedRun::log_rank_step_seconds(int64_t epoch, std::vector<double> seconds) {
  const auto [median, p95] = median_p95(std::move(seconds));
  char mine[64];
  std::snprintf(mine, sizeof mine, "%.9g %.9g", median, p95);
  const std::vector<std::string> all =
      comm_.world_size() > 1 ? comm_.allgather_bytes(mine) : std::vector<std::string>{mine};
  if (!comm_.is_main()) return;
  Json medians = Json::array(), p95s = Json::array();
  bool any = false;
  for (const std::string& r : all) {
    double m = -1, p = -1;
    if (std::sscanf(r.c_str(), "%lf %lf", &m, &p) != 2 || m < 0) {
      medians.push_back(nullptr), p95s.push_back(nullptr);
      continue;
    }
    any = true;
    medians.push_back(m), p95s.push_back(p);
  }
  if (any) mllog_.log(key::kRankStepSeconds, Json{{"median", medians}, {"p95", p95s}}, Json{{meta::kEpochNum, epoch}});
}

void TimedRun::train_epochs(std::string& status) {
  const int64_t rank_images = train_->num_images() / std::max(1, comm_.world_size());
  bool stop = false;
  for (int64_t epoch = options_.first_epoch; epoch <= options_.max_epochs && !stop; ++epoch) {
    mllog_.log(key::kBlockStart, nullptr, Json{{meta::kFirstEpochNum, epoch}, {meta::kEpochCount, 1}});
    mllog_.log(key::kEpochStart, nullptr, Json{{meta::kEpochNum, epoch}});
    ++result_.epochs_trained;
    notify([&](RunObserver& o) { o.epoch_started(epoch, rank_images); });
    auto stream = train_->epoch(epoch);
    auto next_batch = [&] {  // the wait for the loader, a stage of its own in profiles
      RECORD_FUNCTION("mrcnn::data_wait", std::vector<c10::IValue>());
      return stream->next();
    };
    int64_t images = 0, steps = 0;
    std::vector<double> own_seconds;  // this rank's steps up to their all-reduce (the run's first aside)
    const auto epoch_t0 = std::chrono::steady_clock::now();
    // Step results arrive as the trainer reads them: with each step, or several at once. Each is
    // timed when its work was queued (the host runs at most a step ahead of a GPU, which it waits
    // on once a step), not when it was read: a read of 20 results at once would otherwise give the
    // first 1/20 of the epoch's rate.
    const train::Trainer::ResultSink record = [&](const train::StepResult& r) {
      const auto at = r.queued;
      images += r.images;
      if (r.compute_seconds >= 0 && r.step > 0) own_seconds.push_back(r.compute_seconds);
      const double secs = std::chrono::duration<double>(at - epoch_t0).count();
      {
        std::lock_guard lock(mutex_);
        result_.steps.push_back(r);
        result_.step_queued.push_back(at);
      }
      notify([&](RunObserver& o) { o.step_done(epoch, r, images, secs); });
    };
    // Unread results are read before anything that reports the epoch. One rank alone also reads
    // them before it stops on an error or a signal: with several, the read is a collective that
    // the other ranks, not stopping at this step, would not join (they stop by the communicator's
    // abort). An earlier step's failure read there is the error the run reports.
    try {
      while (auto batch = next_batch()) {
        notify([&](RunObserver& o) { o.step_starting(epoch); });
        trainer_.step(*batch, record);
        ++steps;
        throw_if_stop_requested();  // a safe point: SIGTERM/SIGINT end the run here
        // A measurement's epoch ends here, the same step on every rank.
        if (options_.max_steps_per_epoch > 0 && steps >= options_.max_steps_per_epoch) break;
        // An earlier epoch's score arrived and met the targets: agreed with the step results'
        // read (every results_every_steps steps, where the ranks meet anyway), so that no step
        // between two reads waits on a host collective; one rank alone asks after every step.
        if ((comm_.world_size() == 1 || trainer_.unread_steps() == 0) && agree_target_reached()) {
          stop = true;
          break;
        }
      }
    } catch (...) {
      if (comm_.world_size() == 1 && trainer_.unread_steps() > 0) trainer_.read_results(record);
      throw;
    }
    trainer_.read_results(record);
    mllog_.log(key::kEpochStop, nullptr, Json{{meta::kEpochNum, epoch}});
    mllog_.log(key::kBlockStop, nullptr, Json{{meta::kFirstEpochNum, epoch}});
    log_rank_step_seconds(epoch, std::move(own_seconds));
    notify([&](RunObserver& o) { o.epoch_done(epoch); });
    if (stop) break;

    mllog_.log(key::kEvalStart, nullptr, Json{{meta::kEpochNum, epoch}});
    const auto eval_t0 = std::chrono::steady_clock::now();
    run_validation(epoch);
    scorer_->finish_epoch(epoch, [this](int64_t e, std::exception_ptr err, const Accuracy& a) {
      log_accuracy(e, err, a);
    });
    // The time training stood still for this epoch's validation (scoring goes on in the background).
    const double inference_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_t0).count();
    mllog_.log(key::kEvalInferenceSeconds, inference_s, Json{{meta::kEpochNum, epoch}});
    notify([&](RunObserver& o) { o.eval_done(epoch, inference_s); });
    if (!options_.async_eval) scorer_->wait_all();
    stop = agree_target_reached();
  }
  if (!stop) {  // the last epochs' scores are still on their way
    scorer_->wait_all();
    stop = agree_target_reached();
  }
  if (stop) status = std::string(logging::value::kSuccess);
}

int64_t TimedRun::log_run_stop(std::string_view status) {
  std::lock_guard lock(mutex_);
  if (run_stop_logged_) return 0;
  run_stop_logged_ = true;
  target_reached_ = true;  // freeze the log: no score after run_stop
  return mllog_.log(key::kRunStop, nullptr, Json{{meta::kStatus, status}});
}

void TimedRun::close_log_aborted() { log_run_stop(logging::value::kAborted); }

void TimedRun::tell_run_stopped(bool aborted) {
  for (RunObserver* o : options_.observers) {
    try {  // the run's own outcome is the one to report
      o->run_stopped(aborted);
    } catch (const std::exception& e) {
      logging::warn(std::string("after run_stop: ") + e.what());
    }
  }
}

// Rank 0 scores; its verdict (go on, targets reached, scoring failed) is broadcast so that every
// rank stops after the same step. Every rank calls this at the same points.
bool TimedRun::agree_target_reached() {
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
}

// The data and the scorer, built on the clock, and their sizes logged; a DataError when there is
// nothing to train on or to evaluate.
void TimedRun::open_data() {
  if (options_.max_steps_per_epoch > 0) {
    mllog_.log(key::kMaxStepsPerEpoch, options_.max_steps_per_epoch);
    if (comm_.is_main())
      logging::info("a measurement, not a result: every epoch ends after " +
                    std::to_string(options_.max_steps_per_epoch) +
                    " steps (run.max_steps_per_epoch); the run does not converge");
  }
  train_ = parts_.train_data();
  val_ = parts_.val_data();
  scorer_ = parts_.scorer();
  if (train_->num_images() == 0 || train_->batches_per_epoch() == 0)
    throw DataError("the training data gives no batch to train on (" + std::to_string(train_->num_images()) + " images)");
  if (val_->num_images() == 0) throw DataError("the validation data has no image to evaluate");
  mllog_.log(key::kTrainSamples, train_->num_images(), train_->sample_metadata());
  mllog_.log(key::kEvalSamples, val_->num_images(), val_->sample_metadata());
}

// Rank 0's last console line: the time to train, a measurement's end, or why the run aborted.
void TimedRun::announce_outcome(double wall_seconds) const {
  if (!comm_.is_main()) return;
  if (result_.success)
    logging::info(logging::strprintf("time to train: %.1f s (%.2f min), targets reached at epoch %lld",
                                     result_.run_seconds, result_.run_seconds / 60.0,
                                     static_cast<long long>(result_.converged_epoch)));
  else if (options_.max_steps_per_epoch > 0)
    logging::info(logging::strprintf("measurement done: %lld epochs of up to %lld steps (%.1f s); a measurement for "
                                     "`forecast --measured`, not a result",
                                     static_cast<long long>(options_.max_epochs),
                                     static_cast<long long>(options_.max_steps_per_epoch), wall_seconds));
  else
    logging::warn(logging::strprintf("run aborted: targets not reached in %lld epochs (%.1f s)",
                                     static_cast<long long>(options_.max_epochs), wall_seconds));
}

RunResult TimedRun::run() {
  result_.run_start_ms = mllog_.log(key::kRunStart);
  if (result_.run_start_ms == 0) result_.run_start_ms = logging::now_ms();
  const auto t0 = std::chrono::steady_clock::now();
  std::string status = std::string(logging::value::kAborted);
  try {
    open_data();
    train_epochs(status);
  } catch (...) {
    result_.run_stop_ms = log_run_stop(logging::value::kAborted);
    try {
      std::rethrow_exception(std::current_exception());
    } catch (const std::exception& e) {
      result_.stop_reason = e.what();
    } catch (...) {
      result_.stop_reason = "unknown error";
    }
    if (scorer_) scorer_->wait_all();
    tell_run_stopped(/*aborted=*/true);
    throw;
  }

  {
    std::lock_guard lock(mutex_);
    result_.success = status == logging::value::kSuccess;
    result_.stop_reason = result_.success ? "target reached" : "epoch budget spent";
  }
  result_.run_stop_ms = log_run_stop(status);
  if (result_.run_stop_ms == 0) result_.run_stop_ms = logging::now_ms();
  result_.run_seconds = (result_.run_stop_ms - result_.run_start_ms) / 1000.0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Scores of epochs after convergence may still be running; they are not logged.
  scorer_->wait_all();
  tell_run_stopped(/*aborted=*/false);
  announce_outcome(wall);
  return result_;
}

}  // namespace mrcnn::run
