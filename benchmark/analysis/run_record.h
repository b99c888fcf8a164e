// One finished (or stopped) run as `audit` and `report` see it, read from what the run left:
//
//   a run folder       mlperf_log.txt, and when present metrics.jsonl, fingerprint.json, config.json,
//                      profile.json
//   a result file      results/<system>/maskrcnn/result_N.txt; its run folder, when
//                      run_and_time.sh kept one, is runs/result_N/ beside it
//
// Reading never stops at a damaged line of the MLPerf log (the compliance check judges the log);
// a missing or unreadable log, or a metrics line that is not JSON, is a RunReadError naming the
// file and the line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "logging/py_json.h"

namespace mrcnn::analysis {

using logging::Json;

struct RunReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct EpochRecord {
  int64_t epoch = 0;  // 1-based, as logged
  std::optional<double> start_ms, stop_ms;            // epoch_start / epoch_stop
  std::optional<double> eval_start_ms, eval_stop_ms;  // validation inference
  std::optional<double> bbox, segm, accuracy_ms;      // eval_accuracy
  std::optional<double> scoring_seconds;              // metrics.jsonl (asynchronous COCO scoring)
  // rank_step_seconds (this project's harness): each timed rank's own step up to its all-reduce,
  // {median, 95th percentile} in seconds; `ranks` counts the ranks logged, timed or not.
  std::vector<std::pair<double, double>> rank_steps;
  int64_t ranks = 0;
};

// A block of epochs (block_start / block_stop): what a log that counts blocks, not epochs, trained
// (Google's TPU logs of v1.0 and v2.0 have no epoch_start / epoch_stop at all).
struct BlockRecord {
  int64_t first_epoch = 0;  // metadata.first_epoch_num, as logged (0-based in Google's logs)
  int64_t epoch_count = 1;  // metadata.epoch_count
  std::optional<double> start_ms, stop_ms;
};

struct StepRecord {
  int64_t line = 0;  // in metrics.jsonl, 1-based
  int64_t step = 0, epoch = 0;
  double loss = 0, lr = 0, images_per_s = 0, time_ms = 0;
  std::optional<double> grad_norm;
  std::vector<std::pair<std::string, double>> losses;  // in the file's order
  bool skipped = false;
};

struct RunRecord {
  std::string name;  // the path the user gave
  std::string log_path, metrics_path, fingerprint_path, config_path, profile_path;  // "" when absent

  // From the MLPerf log.
  std::optional<double> init_start_ms, init_stop_ms, run_start_ms, run_stop_ms;
  std::string status;  // run_stop's, "" when absent
  std::optional<int64_t> seed, global_batch_size, train_samples, eval_samples;
  std::optional<int64_t> max_steps_per_epoch;  // a measurement's epochs, cut to this many steps
  std::string benchmark, division, org, platform;
  // The values of the log's `throughput` events (images/s of the whole system, as NVIDIA's harness
  // logs them every few steps), in log order; empty when the log has none.
  std::vector<double> throughput;
  std::map<std::string, Json> hyperparameters;  // every logged opt_*, batch and image-size key
  std::vector<EpochRecord> epochs;              // in epoch order
  std::vector<BlockRecord> blocks;              // in log order
  int64_t unreadable_log_lines = 0;

  // From metrics.jsonl, fingerprint.json, config.json and profile.json (`train --profile`; empty /
  // null when absent).
  std::vector<StepRecord> steps;
  Json fingerprint;
  Json config;
  Json profile;

  bool success() const { return status == "success"; }
  // run_stop - run_start in seconds, when both were logged.
  std::optional<double> run_seconds() const;
  // The epoch of the last eval_accuracy before a successful run_stop (the RCP checker's "epochs
  // to converge"); empty for a run that did not converge.
  std::optional<double> converged_epoch() const;
  const EpochRecord* epoch(int64_t n) const;
};

// Reads a run folder or a result file (see above).
RunRecord read_run(const std::string& path);

}  // namespace mrcnn::analysis
