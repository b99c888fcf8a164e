// The MLPerf reference convergence point (RCP) check for Mask R-CNN, of every training ruleset with
// Mask R-CNN: the verdict, message and normalization factor of the official `rcp_checker`
// (check_directory with the pruned RCPs), computed from the reference epochs-to-converge of the
// ruleset's RCP file. The files of 2.0.0 to 3.1.0 hold the same epochs (global batch 8, 48, 64, 96,
// 128, 256, 272); those of 1.0.0 and 1.1.0 have no batch 8, so that their pruned set is 48, 64,
// 128 and 272, where 2.0.0 on prunes to 8, 128 and 272.
//
//   a submission's epochs: the epoch_num of each run's last eval_accuracy before a successful
//   run_stop (a run that did not converge counts as 1e9; two such runs: "Insufficient convergence");
//   its mean: the olympic mean (the fastest and the slowest dropped);
//   an RCP's mean: the olympic mean of its reference runs; stdev: over all of them; its minimum
//   acceptable mean: a binary search for the smallest mean that still passes a one-sided
//   two-sample t-test at alpha 0.05; a batch size between two RCPs is interpolated linearly.
//   Pass: submission mean >= the minimum acceptable mean; a pass faster than the RCP mean is
//   normalized by RCP mean / submission mean (the result_summarizer's scaling.json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mrcnn::analysis {

struct RcpRun {
  bool converged = false;
  double epochs = 0;          // epochs to converge (ignored when !converged)
  int64_t global_batch_size = -1;  // -1: not logged
};

struct RcpStats {
  int64_t global_batch_size = 0;
  double mean = 0, stdev = 0, min_epochs = 0, max_speedup = 1;
  bool interpolated = false;
};

struct RcpVerdict {
  bool passed = false;
  std::string ruleset;        // whose RCPs
  // The official checker's: "RCP found", "RCP Interpolation", ...; where the runs log different
  // global batch sizes (on which the official checker crashes), what they logged: "global batch
  // size differs between runs (256 x4, 128 x1)".
  std::string message;
  double norm_factor = 1;     // RCP mean / submission mean when that is > 1
  double submission_mean = 0; // olympic mean of the submission's epochs
  RcpStats rcp;               // the reference point used (if any)
  bool has_rcp = false;
};

// The reference points of `ruleset` ("1.0.0" ... "3.1.0") after the official pruning (3.1.0:
// batch sizes 8, 128 and 272); a ruleset without Mask R-CNN RCPs reads as 3.1.0's.
std::vector<RcpStats> pruned_rcps(const std::string& ruleset = "3.1.0");

RcpVerdict rcp_check(const std::vector<RcpRun>& runs, const std::string& ruleset = "3.1.0");

// The reference point a result at `global_batch_size` would be checked against, as rcp_check
// finds it: a pruned point, or the interpolation between the two around it; empty where the
// checker has none (beyond the largest pruned point: "Missing RCP"). Below the smallest pruned
// point the checker compares with that smallest point; so does this.
std::optional<RcpStats> rcp_at(int64_t global_batch_size, const std::string& ruleset = "3.1.0");

// Student's t distribution: P(T <= t) with `df` degrees of freedom.
double student_t_cdf(double t, double df);

}  // namespace mrcnn::analysis
