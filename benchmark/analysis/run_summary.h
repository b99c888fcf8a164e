// One run as `report` reads it: its compliance verdict, its time to train, where the time went and
// its training images/s from the best evidence it left (run_summary.cpp). `report` scores and
// compares systems of such runs (report.h); `forecast` reads its measurements through them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "benchmark/analysis/run_record.h"

namespace mrcnn::analysis {

struct TimeBreakdown {  // seconds
  double init = 0, training = 0, eval_inference = 0, final_scoring_wait = 0, idle = 0;
  // COCO scoring, overlapped with training: from metrics.jsonl when kept; empty when no run logs it.
  std::optional<double> scoring_total;
};

// Training images/s of a run, from the best evidence it left, in this order:
//   1. the log's own `throughput` events (NVIDIA's harness logs them): their median;
//   2. the images metrics.jsonl's steps x the global batch cover in the epochs trained, over the
//      training time (the epochs' start to stop): this project's own runs, a partial last epoch
//      included as far as it went;
//   3. the epochs trained x COCO train2017's 117,266 images over the training time, where the log
//      is of the closed division (whose rules fix the dataset) or validated on COCO val2017
//      (eval_samples 5000; NVIDIA's harness logs 1);
//   4. the epochs trained x train_samples over the training time.
// A log that counts blocks, not epochs (block_start / block_stop with first_epoch_num and
// epoch_count, no epoch_start / epoch_stop: Google's TPU logs of v1.0 and v2.0) trains in its
// blocks: the training time is theirs and the epochs trained their epoch_counts, and the source
// says so (kSourceCocoBlocks, kSourceTrainSamplesBlocks).
// `train_samples` is checked against the evidence used: the kept steps of every whole epoch
// (within one batch), else the figure (within 10 %). NVIDIA's harness logs 40000 or 20000 while
// every epoch is the whole training set; a disagreement is the note. Events are checked against
// epochs x 117,266 where the log is COCO's and no steps were kept.
struct Throughput {
  std::optional<double> images_per_s;  // whole system
  std::string source;                  // one of the kSource* below; "" when no evidence
  std::string note;                    // the disagreements, "" when none
  std::optional<double> train_samples_ratio;  // what train_samples gives / the evidence, when they disagree
  std::optional<double> events_ratio;         // epochs x 117266 / the events, when they disagree
};
inline constexpr const char* kSourceThroughputEvents = "throughput events";
inline constexpr const char* kSourceCocoEpochs = "epochs x 117266 (COCO train2017)";
inline constexpr const char* kSourceTrainSamples = "epochs x train_samples";
inline constexpr const char* kSourceSteps = "steps x global_batch_size (metrics.jsonl)";
inline constexpr const char* kSourceCocoBlocks = "epochs x 117266 (COCO train2017), the epochs counted in blocks";
inline constexpr const char* kSourceTrainSamplesBlocks = "epochs x train_samples, the epochs counted in blocks";
inline constexpr int64_t kCocoTrainImages = 117266;  // train2017 images with a usable annotation
inline constexpr int64_t kCocoValImages = 5000;

struct RunSummary {
  std::string file;
  RunRecord run;
  std::string ruleset;      // the ruleset it was checked against
  bool compliant = false;   // the MLPerf compliance check (the official verdict of that ruleset)
  std::string check_error;  // the first failing line when not compliant
  std::optional<double> minutes;          // time to train, when run_start and run_stop were logged
  std::optional<double> epochs_to_converge;
  Throughput throughput;                  // whole system, training epochs only
  TimeBreakdown time;
  // The training time and the epochs trained come from the log's blocks (it has no epochs).
  bool counted_in_blocks = false;
  int64_t epochs_trained = 0;             // whole epochs (or blocks' epoch_counts) started and stopped
};

// A result file or a run folder read, checked by the compliance check of `ruleset` ("": the round
// its path names, else 3.1.0; logging::CheckOptions) and measured.
RunSummary summarize_run(const std::filesystem::path& path, const std::string& ruleset = "");

}  // namespace mrcnn::analysis
