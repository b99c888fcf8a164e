// The timed part of an MLPerf run: from run_start to run_stop.
//
// Per epoch e (1-based, as MLPerf counts): block_start / epoch_start, the training steps,
// epoch_stop / block_stop, an optional checkpoint, eval_start, inference over the whole
// validation set, and the COCO scoring handed to a Scorer that works in the background while
// the next epoch trains. When a score arrives it is logged (eval_accuracy {BBOX, SEGM} with
// epoch_num, then eval_stop) from the scorer's thread, with its own timestamp; the training
// thread notices at the next step and ends the run with run_stop "success" as soon as both
// targets are met, or "aborted" when the epoch budget is spent without reaching them.
//
// The parts are reached through small interfaces (TrainableModel, DataSource, Scorer), so the
// same loop runs Mask R-CNN on COCO and the tiny models and datasets of its tests. What is not
// the MLPerf sequence itself (the metrics file, progress bars, checkpoints, profiling) hangs on
// the loop as RunObservers (run/observers.h), as detectron2's hooks hang on its trainer.
// Not thread-safe: run() is called once, from the training thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/train/trainer.h"
#include "logging/mllog.h"
#include "model/structures.h"

namespace mrcnn::run {

// The run's data cannot be used: nothing to train on or nothing to evaluate. Bad input like a
// wrong config value (exit status 2), found when the data is first read, right after run_start:
// the MLPerf clock must start before any data is touched.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An epoch's batches, in the order the sampler fixed.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual std::optional<model::Batch> next() = 0;
};

// The training or validation data of this rank.
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual int64_t num_images() const = 0;         // the whole set (train_samples / eval_samples)
  virtual int64_t batches_per_epoch() const = 0;  // this rank's batches in one epoch
  virtual std::unique_ptr<BatchStream> epoch(int64_t epoch) = 0;  // epoch is 1-based
  // Metadata for the set's train_samples / eval_samples event (e.g. where it was read from).
  virtual logging::Json sample_metadata() const { return logging::Json::object(); }
};

// After each epoch's validation inference, the project's own event key::kEvalInferenceSeconds
// (logging/keys.h): its wall time in seconds, with epoch_num; the compliance checker ignores it.

struct Accuracy {
  double bbox = 0;  // COCO AP@[.5:.95], a fraction
  double segm = 0;
  double scoring_seconds = 0;
  // Steady-clock instants the scoring began and ended (tests check the overlap with training).
  std::chrono::steady_clock::time_point started, finished;
};

// Collects one epoch's detections image by image, then scores them in the background.
class Scorer {
 public:
  virtual ~Scorer() = default;
  // Called for every validation batch of epoch `epoch`, in order, from the training thread.
  virtual void add(int64_t epoch, const std::vector<model::Detections>& detections) = 0;
  // Hands the epoch's detections to the background; `done` is called on a background thread
  // when the score is known (or with an exception), epoch after epoch in the order submitted,
  // one call at a time. Must not block.
  virtual void finish_epoch(int64_t epoch, std::function<void(int64_t epoch, std::exception_ptr error,
                                                              const Accuracy& accuracy)> done) = 0;
  // Blocks until every submitted epoch has been scored and its callback has returned.
  virtual void wait_all() = 0;
};

// Watches the timed run. Every hook has an empty default; observers are called in the order
// given, on the training thread, except scored(), which runs on the scorer's thread (one call at
// a time, in epoch order). An observer that throws ends the run like any other error.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void epoch_started(int64_t /*epoch*/, int64_t /*rank_images*/) {}
  // Before each optimizer step is taken (its results come later, with step_done).
  virtual void step_starting(int64_t /*epoch*/) {}
  // After each optimizer step's results are read (with the step, or up to the trainer's
  // results_every - 1 steps later, in order; all of an epoch's before epoch_done);
  // `epoch_images` and `epoch_seconds` count this epoch's steps read so far.
  virtual void step_done(int64_t /*epoch*/, const train::StepResult& /*step*/, int64_t /*epoch_images*/,
                         double /*epoch_seconds*/) {}
  // After epoch_stop and block_stop (the place for checkpoints).
  virtual void epoch_done(int64_t /*epoch*/) {}
  virtual void eval_started(int64_t /*epoch*/, int64_t /*batches*/) {}
  virtual void eval_batch_done(int64_t /*epoch*/, int64_t /*batches_done*/) {}
  // After the epoch's validation inference, its detections gathered and handed to the scorer;
  // `inference_seconds` is that wall time (training is stopped for it).
  virtual void eval_done(int64_t /*epoch*/, double /*inference_seconds*/) {}
  // After eval_accuracy and eval_stop are logged for `epoch`.
  virtual void scored(int64_t /*epoch*/, const Accuracy& /*accuracy*/) {}
  // After run_stop is logged, whether the run succeeded or not (`aborted`: ended by an error or a
  // stop signal): outside the timed region, where the data may be touched. An error thrown here
  // is logged as a warning: the run's own outcome stands.
  virtual void run_stopped(bool /*aborted*/) {}
};

struct TimedRunOptions {
  int64_t first_epoch = 1;  // > 1 when resuming from a checkpoint
  int64_t max_epochs = 20;
  // > 0: a measurement run (config::RunSettings::max_steps_per_epoch): each epoch stops after this
  // many steps; scores are logged, but the run never succeeds.
  int64_t max_steps_per_epoch = 0;
  double target_bbox = 0.377;
  double target_segm = 0.339;
  // false: the training thread waits for each epoch's score before going on (for debugging;
  // MLPerf runs overlap scoring with training).
  bool async_eval = true;
  // Not owned; each must outlive the run.
  std::vector<RunObserver*> observers;
};

struct RunResult {
  bool success = false;           // both targets reached
  int64_t epochs_trained = 0;     // epochs started in this process
  int64_t converged_epoch = 0;    // epoch whose score reached the targets (0: none)
  double run_seconds = 0;         // run_start to run_stop, as logged
  int64_t run_start_ms = 0, run_stop_ms = 0;
  std::vector<std::pair<int64_t, Accuracy>> accuracies;  // by epoch, in the order scored
  std::vector<train::StepResult> steps;                  // every step of this process, as read
  std::vector<std::chrono::steady_clock::time_point> step_queued;  // parallel: when each was queued
  std::string stop_reason;        // "target reached", "epoch budget spent", or the error
};

// The data and the scorer are made after run_start (MLPerf: the clock starts before any data is
// touched), by these factories.
struct RunParts {
  std::function<std::unique_ptr<DataSource>()> train_data;
  std::function<std::unique_ptr<DataSource>()> val_data;
  std::function<std::unique_ptr<Scorer>()> scorer;
};

class TimedRun {
 public:
  // Every reference must outlive the TimedRun.
  TimedRun(logging::MLLogger& mllog, train::TrainableModel& model, train::Trainer& trainer, RunParts parts,
           comm::Communicator& comm, TimedRunOptions options);

  // Logs run_start, builds the data and the scorer, logs train_samples and eval_samples, and
  // runs everything up to run_stop. Data with no training batch or no validation image is a
  // DataError. That, a non-finite loss or any other error after run_start ends the run with
  // run_stop "aborted" and is rethrown; so does a stop signal (run/stop_signal.h), noticed after
  // each training step and validation batch (StopRequested).
  RunResult run();

  // Logs run_stop "aborted" unless run_stop is logged already; from any thread (a collective
  // watchdog's, in the process's last moment, while the training thread is blocked).
  void close_log_aborted();

 private:
  // run_stop with `status`, once: 0 (nothing logged) when it was logged before.
  int64_t log_run_stop(std::string_view status);
  // Every observer's run_stopped(aborted); an observer's error is logged, not thrown.
  void tell_run_stopped(bool aborted);
  void log_accuracy(int64_t epoch, std::exception_ptr error, const Accuracy& acc);
  void log_rank_step_seconds(int64_t epoch, std::vector<double> seconds);
  void run_validation(int64_t epoch);
  template <typename Hook>
  void notify(Hook hook);

  // Rank 0's verdict on the scores so far, broadcast: true when the targets are reached; rethrows
  // a scoring failure on every rank. A collective.
  bool agree_target_reached();
  void open_data();
  void train_epochs(std::string& status);
  void announce_outcome(double wall_seconds) const;

  logging::MLLogger& mllog_;
  train::TrainableModel& model_;
  train::Trainer& trainer_;
  RunParts parts_;
  std::unique_ptr<DataSource> train_;
  std::unique_ptr<DataSource> val_;
  std::unique_ptr<Scorer> scorer_;
  comm::Communicator& comm_;
  const TimedRunOptions options_;

  std::mutex mutex_;  // guards the fields below, written by the scorer's callback
  RunResult result_;
  bool target_reached_ = false;
  bool run_stop_logged_ = false;
  std::exception_ptr scoring_error_;
};

}  // namespace mrcnn::run
