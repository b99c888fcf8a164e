// `forecast`: the MLPerf Mask R-CNN score (time to train, minutes) of a system nobody has run yet,
// from what was measured on one node, with the uncertainty shown; and the method checked on the
// published results (`--validate`).
//
// A run's time decomposes exactly (decompose_run): the first step (run_start to the first
// epoch_start), E epochs, E - 1 evaluation pauses (an epoch_stop to the next epoch_start) and the
// tail (the last epoch_stop to run_stop: the last inference and the scoring nobody overlaps). For a
// target of N nodes x g accelerators, global batch GB, per-accelerator batch b:
//
//   T           = t_first + E * ceil(117266 / GB) * t_step + (E - 1) * t_pause + t_tail
//   t_step      = t_compute(b) + t_straggler(R) + t_allreduce(N)   (exposed; the published
//                                                           harnesses reduce one flat buffer after backward)
//   t_compute(b)  measured at b; else a line through the measured batches; from one measured
//                 batch: t_base * (b + k) / (b_base + k), k the fixed per-step cost in images
//   t_allreduce(N) = 2 (N - 1) / N * S / (eta * B_node) + 2 (N - 1) * alpha   (a ring over nodes;
//                 the links inside a node are in the measured step)
//   t_straggler(R) = cv * t_compute(b) * (z(R) - z(R0))      each step waits for the slowest of R
//                 training ranks: cv the ranks' own step times' spread over their median (each
//                 rank's 95th percentile less its median over 1.645, as logged by this project's
//                 harness in rank_step_seconds; 0 where unlogged), z(R) the expected largest of R
//                 standard normal draws, R0 the ranks measured (their slowest is in the step)
//   E           = the measured runs' mean where GB was measured, else ceil(RCP mean at GB)
//   t_pause     = t_pause,base * accelerators_base / accelerators   (0 with dedicated eval ranks)
//   t_tail      = (t_tail,base - t_pause,base) + t_pause,base * accelerators_base / eval ranks
//
// The band comes from what was not measured: k (when b was not measured), the network's
// efficiency eta and per-hop latency alpha (when N > the measured nodes), the epochs' spread (the
// RCP's standard deviation, when GB was not measured). Each is varied alone; the band is the sum
// of their excursions; the straggler term between none (the ranks' delays shared) and twice its
// value (heavier tails than a normal's) where R differs from R0. The widest is named, with what to
// measure to remove it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "benchmark/analysis/report.h"

namespace mrcnn::analysis {

struct ForecastError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The all-reduce of one step over a ring of `nodes` (seconds): 2 (N - 1) / N of `bytes` through
// every node's network of `gbps` Gbit/s at `efficiency` of its line rate, plus `hop_s` a hop;
// 0 on one node (its links are in the measured step).
double ring_seconds(int64_t nodes, double bytes, double gbps, double efficiency, double hop_s);

// The expected largest of `ranks` independent standard normal draws (Blom's approximation,
// Phi^-1((R - 0.375) / (R + 0.25)): 4.5 % above the exact value at 2 ranks, within 1 % from 8 to
// 10^4); 0 for one rank.
double expected_max_normal(int64_t ranks);

// One run that trained whole epochs, in seconds. A run stopped at its epoch budget (not converged)
// still times the node; only its epochs to converge are unknown.
struct RunParts {
  double first = 0;   // run_start -> first epoch_start
  double epoch = 0;   // median epoch (epochs 2..E; epoch 1 alone when it is the only one)
  double pause = 0;   // median epoch_stop -> next epoch_start (0 with one epoch)
  double tail = 0;    // last epoch_stop -> run_stop
  double total = 0;   // run_stop - run_start (= first + epochs + pauses + tail, exactly)
  double epochs = 0;  // epoch_num of the last eval_accuracy (converged runs)
  bool converged = false;
  double epochs_sum = 0, pauses_sum = 0;  // the parts as logged, for the exact sum
  int64_t steps_per_epoch = 0;  // the steps of a whole epoch (kept steps, else the epoch's images / global batch)
};
// Empty (and `why` set) for a run without run_start, run_stop and a whole epoch, or stopped by an
// error or a signal.
std::optional<RunParts> decompose_run(const RunRecord& run, std::string* why = nullptr);

// A system's runs as a measurement of its node.
struct Measurement {
  std::string label;
  int64_t nodes = 1, accelerators_per_node = 1;
  std::string accelerator_model;
  int64_t global_batch = 0;
  double batch = 0;                // per training accelerator (d_batch_size, else GB / accelerators)
  int64_t eval_ranks = 0;          // dedicated evaluation accelerators (0: every rank evaluates)
  double first = 0, step = 0, pause = 0, tail = 0;  // means over the kept runs
  double epochs = 0;               // to converge, the converged runs' mean (0: none converged)
  double minutes = 0;              // the kept runs' mean time to train
  int runs = 0;
  std::optional<double> network_gbps;
  bool network_assumed = false;
  std::string network_basis;
  bool published_harness = true;   // flat float16 all-reduce after backward (false: this project's)
  double trainable_parameters = 0; // the run's own network (fingerprint.json); 0: Assumptions'
  // The ranks' own step times (rank_step_seconds): the spread of one rank's steps over their
  // median (cv: (p95 - median) / 1.645 / median, the median over ranks and epochs, the mean over
  // runs) and how many training ranks were timed; 0 and 0 where the logs have none.
  double step_cv = 0;
  int64_t timed_ranks = 0;
};

// The runs that result_summarizer's olympic mean keeps (the fastest and the slowest successful
// runs dropped when there are 3 or more), decomposed and averaged. Throws ForecastError naming the
// system when its description cannot be read or no run decomposes.
Measurement measure(const SystemReport& system);

struct Target {
  std::string name;
  int64_t nodes = 1, accelerators_per_node = 1;
  std::string accelerator_model;
  int64_t global_batch = 0;
  double batch = 0;        // per training accelerator
  int64_t eval_ranks = 0;  // dedicated evaluation accelerators
  std::optional<double> network_gbps;
  bool network_assumed = false;
  std::string network_basis;  // the links read, or where an assumed figure came from
};

struct Assumptions {
  double k = 2, k_low = 1, k_high = 3;                  // fixed cost a step, in images
  double efficiency = 1 / 1.1, efficiency_low = 0.5, efficiency_high = 1;  // of the line rate
  double hop_s = 5e-6, hop_low_s = 2e-6, hop_high_s = 20e-6;             // latency per ring hop
  // The gradient all-reduced a step: the published harnesses' flat float16 buffer of the 44.13 M
  // trainable parameters of R50-FPN Mask R-CNN (the stem and layer1 frozen), 2 bytes each.
  double trainable_parameters = 44.13e6;
  double network_gbps = 100;  // where a target's network cannot be read (flagged "assumed")
  int64_t epoch_images = 117266;  // a target epoch: COCO train2017's images with annotations
};

struct ForecastParts {  // seconds of the whole run
  double first = 0, compute = 0, straggler = 0, allreduce = 0, pauses = 0, tail = 0;
  double epochs = 0;
  int64_t steps_per_epoch = 0;
  double step_compute = 0, step_straggler = 0, step_allreduce = 0;  // seconds a step
  double epoch = 0;                             // seconds an epoch (its steps)
};

struct Forecast {
  Target target;
  std::string refused;  // non-empty: no forecast, and why
  double minutes = 0, low = 0, high = 0;
  ForecastParts parts;
  std::string batch_source;  // "measured" or "extrapolated"
  std::string dominant;      // the assumption that dominates the band
  std::string remedy;        // what to measure to remove it
  std::vector<std::string> flags;
  double accelerator_hours = 0;
  std::optional<double> cost;
};

// The forecast of `target` from `measured` (one node type, at one or more per-accelerator
// batches; all of one accelerator model and count a node, else refused).
Forecast predict(const std::vector<Measurement>& measured, const Target& target, const Assumptions& a = {});

// The network a project system file or a kept run's config.json states in numbers
// (launch.network_gbps, Gbit/s a node), where it does; it wins over the description's free text.
std::optional<double> stated_network_gbps(const logging::Json& config);

// A target as a published system describes it: its nodes, accelerators, network and, from its
// logs, the global and per-accelerator batch and any dedicated evaluation ranks. A description
// that names no network takes `fallback` (another description of the same node, in Gb/s, and
// which), else Assumptions::network_gbps: either way flagged "assumed".
struct NetworkFallback {
  double gbps = 0;
  std::string source;
};
Target target_of(const SystemReport& system, const Assumptions& a = {}, const std::optional<NetworkFallback>& fallback = std::nullopt);

// --validate: every series (source round, submitter, accelerator model, accelerators a node) with
// more than one node count; its smallest system is the measurement, each bigger one a target.
struct ValidationRow {
  std::string series, base, target;
  Forecast forecast;
  std::optional<double> published;  // the target's score
  std::optional<double> error;      // forecast / published - 1
  bool republished = false;         // the same pair's logs, byte for byte, in an earlier row
  bool self = false;                // the base projected onto itself
};
struct Validation {
  std::vector<ValidationRow> rows;
  int pairs = 0, within_15 = 0, within_25 = 0, in_band = 0;  // distinct pairs, self rows excluded
};
Validation validate(const std::vector<SystemReport>& systems, const Assumptions& a = {});

// The page: index.html with the forecasts' table, minutes against nodes (log-log: the band, the
// forecast, ideal scaling from the measured node, `published` scores of the same node) and where
// the time goes per target; the plots also as scaling.svg and time.svg. Returns the page's path.
struct PublishedPoint {
  std::string label;
  int64_t nodes = 0;
  double minutes = 0;
};
std::string write_forecast_html(const std::vector<Measurement>& measured, const std::vector<Forecast>& forecasts,
                                const std::vector<PublishedPoint>& published, const std::string& dir);

std::string format_forecasts(const std::vector<Measurement>& measured, const std::vector<Forecast>& forecasts);
std::string format_validation(const Validation& v);
logging::Json forecast_json(const Forecast& f, const std::optional<double>& published = std::nullopt);
logging::Json validation_json(const Validation& v);

}  // namespace mrcnn::analysis
