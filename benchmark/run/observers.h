// The timed run's observers: what hangs on the MLPerf loop without being part of it.
//
//   MetricsFile       metrics.jsonl: one JSON line per step (losses, learning rate, images/s,
//                     gradient norm) and per scored epoch (bbox, segm, scoring seconds)
//   ProgressDisplay   a progress bar per training epoch and per validation pass (stderr)
//   CheckpointWriter  checkpoints/epoch_<N>.safetensors after each epoch (train/checkpoint.h)
//   FingerprintWriter fingerprint.json: what decides the run's numbers besides the seed (for
//                     `audit`), written before run_start and completed with the data's after run_stop
//
// Each is attached by the command that wants it, on the rank that should do it (rank 0).
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "benchmark/analysis/fingerprint.h"
#include "benchmark/config/system_config.h"
#include "benchmark/run/timed_run.h"
#include "benchmark/train/trainer.h"
#include "logging/progress.h"

namespace mrcnn::run {

class MetricsFile final : public RunObserver {
 public:
  // Opens `path` (appending when `append`, as a resumed run does); throws std::runtime_error
  // naming the file when it cannot be written.
  MetricsFile(const std::string& path, bool append);
  ~MetricsFile() override;
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  void step_done(int64_t epoch, const train::StepResult& step, int64_t epoch_images, double epoch_seconds) override;
  void eval_done(int64_t epoch, double inference_seconds) override;
  void scored(int64_t epoch, const Accuracy& accuracy) override;

 private:
  void write(const std::string& json_line);
  std::mutex mutex_;  // steps come from the training thread, scores from the scorer's
  std::FILE* file_;
};

class ProgressDisplay final : public RunObserver {
 public:
  void epoch_started(int64_t epoch, int64_t rank_images) override;
  void step_done(int64_t epoch, const train::StepResult& step, int64_t epoch_images, double epoch_seconds) override;
  void epoch_done(int64_t epoch) override;
  void eval_started(int64_t epoch, int64_t batches) override;
  void eval_batch_done(int64_t epoch, int64_t batches_done) override;
  void eval_done(int64_t epoch, double inference_seconds) override;

 private:
  std::unique_ptr<logging::Progress> bar_;
};

class CheckpointWriter final : public RunObserver {
 public:
  // Writes into `dir` (created now). `config_fingerprint` is what a resume must match.
  CheckpointWriter(std::string dir, train::TrainableModel& model, const train::Trainer& trainer, uint64_t seed,
                   std::string config_fingerprint);
  void epoch_done(int64_t epoch) override;

 private:
  std::string dir_;
  train::TrainableModel& model_;
  const train::Trainer& trainer_;
  uint64_t seed_;
  std::string fingerprint_;
};

class FingerprintWriter final : public RunObserver {
 public:
  // Writes the fingerprint of everything but the data (run_fingerprint.h) to `path` and logs its
  // summary (key::kRunFingerprint) to `mllog`, now: in the init phase. `communicator`: the backend
  // the ranks run on. `config` must outlive the writer.
  FingerprintWriter(const config::SystemConfig& config, int world_size, const std::string& communicator,
                    std::string path, std::string log_path, logging::MLLogger& mllog);
  // Adds the data's checksums and counts, and writes the file again; after an aborted run of
  // several ranks it leaves the file as it is (the other ranks wait for rank 0 to end them, not
  // to hash the data).
  void run_stopped(bool aborted) override;
  // The network's trainable parameters (model.trainable_parameters: the gradient a step reduces,
  // which `forecast` charges the network with), written with the next write of the file.
  void set_trainable_parameters(int64_t count) { fingerprint_["model"]["trainable_parameters"] = count; }

 private:
  const config::SystemConfig& config_;
  int world_size_;
  std::string path_, log_path_;
  analysis::Json fingerprint_;
};

}  // namespace mrcnn::run
