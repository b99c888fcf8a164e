// `report`: systems compared from their results, as a buyer or a reviewer would read them.
//
// For each system found under the given folders (a results tree as run_and_time.sh files it,
// results/<system>/maskrcnn/result_N.txt with the run folders in runs/result_N/; or a submission
// folder <org>/results/<system>/maskrcnn with <org>/systems/<system>.json):
//   - the score as the official result_summarizer computes it: each run's run_stop - run_start in
//     minutes, a run failing the compliance check dropped (at most one), the olympic mean, times
//     scaling.json's factor when the folder has one;
//   - the RCP check of training 3.1.0 (rcp.h), and in the closed division the RCP-normalized score;
//   - epochs to converge against the reference convergence point;
//   - training images/s per accelerator (per host processor when the system has no accelerator);
//   - where the time went: initialisation (init_start to run_start), training (the epochs),
//     evaluation inference (eval_start until training resumes), the wait for the last score (the
//     last epoch's scoring, not overlapped by training), and idle (the rest of run_start to
//     run_stop); the asynchronous scoring overlapped with training is shown beside them;
//   - the per-stage time of a training step when runs were profiled (train --profile);
//   - the cost of one time-to-train when a price per node-hour is given.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/analysis/rcp.h"
#include "benchmark/analysis/run_record.h"

namespace mrcnn::analysis {

struct ReportOptions {
  std::map<std::string, double> price_per_node_hour;  // by system name; "" applies to every system
  std::string systems_dir = "systems";                // where systems/<name>.json may describe a system
};

struct TimeBreakdown {  // seconds
  double init = 0, training = 0, eval_inference = 0, final_scoring_wait = 0, idle = 0;
  double scoring_total = 0;  // COCO scoring, overlapped with training (from metrics.jsonl when kept)
};

struct RunSummary {
  std::string file;
  RunRecord run;
  bool compliant = false;   // the MLPerf compliance check (the official verdict)
  std::string check_error;  // the first failing line when not compliant
  std::optional<double> minutes;          // time to train, when run_start and run_stop were logged
  std::optional<double> epochs_to_converge;
  std::optional<double> images_per_s;     // whole system, training epochs only
  TimeBreakdown time;
};

struct SystemReport {
  std::string name;        // results/<name>
  std::string folder;      // the maskrcnn folder
  std::string division, org, accelerator_model;
  int64_t nodes = 1, accelerators = 1;  // accelerators in the system (host processors when none)
  bool has_accelerators = false;
  double target_bbox = 0.377, target_segm = 0.339;
  std::vector<RunSummary> runs;
  int dropped = 0;
  std::optional<double> score_minutes;  // result_summarizer's
  double scaling_factor = 1;            // scaling.json's, 1 when absent
  std::string score_note;
  RcpVerdict rcp;
  std::optional<double> rcp_normalized_minutes;  // closed division: olympic mean x RCP factor
  std::optional<double> mean_epochs_to_converge;
  std::optional<double> images_per_s_per_accelerator;  // median over the runs
  TimeBreakdown mean_time;                              // mean over the runs
  // Per-stage milliseconds per step from the runs' profile.json (`train --profile`), averaged over
  // the runs that have one: [{"stage", "depth", "per_step_ms", "share"}]; empty when none has.
  Json stages = Json::array();
  int profiled_runs = 0;
  std::optional<double> price_per_node_hour, cost_per_result;
};

struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Finds every system under `paths` and reports it; throws ReportError when a path holds none.
std::vector<SystemReport> build_report(const std::vector<std::string>& paths, const ReportOptions& options);

std::string format_report_table(const std::vector<SystemReport>& systems);
Json report_json(const std::vector<SystemReport>& systems);
// index.html and one SVG per plot into `dir` (created); returns the page's path.
std::string write_report_html(const std::vector<SystemReport>& systems, const std::string& dir);

}  // namespace mrcnn::analysis
