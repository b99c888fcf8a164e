// `report`: systems compared from their results, as a buyer or a reviewer would read them.
//
// For each system found under the given folders (a results tree as run_and_time.sh files it,
// results/<system>/maskrcnn/result_N.txt with the run folders in runs/result_N/; a submission
// folder <org>/results/<system>/maskrcnn with <org>/systems/<system>.json; or a whole public
// training_results_vX.Y checkout, every submitter's Mask R-CNN results, other benchmarks skipped):
//   - who and what: submitter, accelerator model and count, nodes, framework (the system
//     description: a kept run's config.json, the submission's systems/<name>.json, or the project's);
//   - the score as the official result_summarizer computes it: each run's run_stop - run_start in
//     minutes, a run failing the compliance check dropped (at most one), the olympic mean, times
//     scaling.json's factor when the folder has one; accelerator-hours per result;
//   - the round's rules: every system is checked and scored by the ruleset of its own round (the
//     round its folder's path names, training_results_vX.Y; ReportOptions::ruleset for all; else
//     3.1.0), its compliance rules (logging/compliance.h) and its RCPs (rcp.h);
//   - the RCP check of that round, and in the closed division the RCP-normalized score
//     (the RCP decides closed-division results only: "n/a" in the open division);
//   - epochs to converge against the reference convergence point;
//   - training images/s per accelerator (per host processor when the system has no accelerator),
//     from the best evidence in the log (see Throughput below), the source named;
//   - scaling efficiency between systems of one submitter and accelerator model at different
//     sizes: the speedup of the time to train over the smallest system's, against linear;
//   - where the time went: initialisation (init_start to run_start), training (the epochs),
//     evaluation inference (eval_start until training resumes), the wait for the last score (the
//     last epoch's scoring, not overlapped by training), and idle (the rest of run_start to
//     run_stop); the asynchronous scoring overlapped with training beside them, when logged;
//   - the per-stage time of a training step when runs were profiled (train --profile);
//   - the cost of one time-to-train when a price per node-hour is given.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/analysis/numbers.h"
#include "benchmark/analysis/rcp.h"
#include "benchmark/analysis/report_discovery.h"
#include "benchmark/analysis/run_record.h"
#include "benchmark/analysis/run_summary.h"
#include "benchmark/analysis/system_description.h"

namespace mrcnn::analysis {

struct ReportOptions {
  std::map<std::string, double> price_per_node_hour;  // by system name; "" applies to every system
  std::string ruleset;  // every system's ruleset; "": each system's round from its path, else 3.1.0
  std::string systems_dir = "systems";                // where systems/<name>.json may describe a system
};

struct SystemReport {
  std::string name;        // results/<name>
  std::string label;       // name, qualified where two systems share it: "name [source/round/org]"
  std::string folder;      // the maskrcnn folder
  std::string source;      // the folder given to `report` that holds it
  std::string ruleset;         // the round's rules it was checked and scored by ("2.1.0")
  std::string ruleset_source;  // "given" (--ruleset), "path" (the folder's path names the round), "default"
  std::string division, org, accelerator_model, framework;
  std::string submitter;   // the description's submitter, else the log's submission_org
  // The system description (system_description.h). When it cannot be read (`described` false,
  // `description.problem` says why), nodes and accelerators are 0 (unknown) and every figure that
  // needs them (per-accelerator rate, accelerator-hours, cost, scaling) stays empty.
  SystemDescription description;
  bool described = false;
  int64_t nodes = 0, accelerators = 0;  // accelerators in the system (host processors when none)
  bool has_accelerators = false;
  std::vector<std::string> problems;    // what could not be read (the description, a result file)
  bool rcp_applies() const { return division != "open"; }
  double target_bbox = 0.377, target_segm = 0.339;
  std::vector<RunSummary> runs;
  int dropped = 0;
  std::optional<double> score_minutes;  // result_summarizer's
  double scaling_factor = 1;            // scaling.json's, 1 when absent
  std::string score_note;
  RcpVerdict rcp;
  std::optional<double> rcp_normalized_minutes;  // closed division: olympic mean x RCP factor
  std::optional<double> mean_epochs_to_converge;
  std::optional<double> accelerator_hours;              // score x accelerators, in hours
  std::optional<double> images_per_s_per_accelerator;  // median over the runs
  std::string throughput_source;                        // the runs' sources, "; "-joined when they differ
  std::string throughput_note;                          // train_samples' disagreement, over the runs
  // Against the smallest system of the same source, submitter, accelerator model and accelerators
  // per node (the same node at another node count; the fastest one when several share the smallest
  // count): speedup = its score / this score, efficiency = speedup / (nodes / its nodes). Empty
  // without such a system at another node count.
  std::optional<double> scaling_speedup, scaling_efficiency;
  std::string scaling_base;                             // that smallest system's label
  TimeBreakdown mean_time;                              // mean over the runs
  int block_counted_runs = 0;  // runs whose training time and epochs come from their blocks (no epochs logged)
  // Per-stage milliseconds per step from the runs' profile.json (`train --profile`), averaged over
  // the runs that have one: [{"stage", "depth", "per_step_ms", "share"}]; empty when none has.
  Json stages = Json::array();
  int profiled_runs = 0;
  std::optional<double> price_per_node_hour, cost_per_result;
};

// Finds every system under `paths` and reports it; throws ReportError (report_discovery.h) when a
// path holds none.
std::vector<SystemReport> build_report(const std::vector<std::string>& paths, const ReportOptions& options);

// An accelerator model as a group key: lower case, letters and digits only, so that submitters'
// spellings of one part ("A100-PCIe-80GB", "A100-PCIE-80GB") fall in one group.
std::string model_key(const std::string& model);

// The systems in the order a comparison reads them: grouped by accelerator model (models in order
// of their best score), by score within a group, systems without a score last.
std::vector<const SystemReport*> comparison_order(const std::vector<SystemReport>& systems);

// Rows as a text table, each column padded to its widest cell (left-aligned, or right where
// `right` says); a row of another length is a heading on a line of its own.
std::string aligned(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right);

std::string format_report_table(const std::vector<SystemReport>& systems);
Json report_json(const std::vector<SystemReport>& systems);
// index.html and one SVG per plot into `dir` (created); returns the page's path.
std::string write_report_html(const std::vector<SystemReport>& systems, const std::string& dir);

}  // namespace mrcnn::analysis
