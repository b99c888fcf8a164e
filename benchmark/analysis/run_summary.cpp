// One run read (run_summary.h): its compliance verdict, time to train, where the time went and its
// images/s from the best evidence the log gives.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "benchmark/analysis/numbers.h"
#include "benchmark/analysis/run_summary.h"
#include "logging/compliance.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

bool trains_in_epochs(const RunRecord& r) {
  return std::any_of(r.epochs.begin(), r.epochs.end(), [](const EpochRecord& e) { return e.start_ms && e.stop_ms; });
}

bool trains_in_blocks(const RunRecord& r) {
  return !trains_in_epochs(r) &&
         std::any_of(r.blocks.begin(), r.blocks.end(), [](const BlockRecord& b) { return b.start_ms && b.stop_ms; });
}

// A log of blocks: training is the blocks (block_start to block_stop), and an evaluation's inference
// runs from eval_start until the next block starts (or eval_stop, when sooner).
// The parts of a run's time that epochs and blocks share: init before run_start; after training
// (which ended at last_end, its last training or inference), the wait for the last score until
// run_stop; idle, what the parts leave of the run.
void close_breakdown(const RunRecord& r, double last_end, TimeBreakdown& t) {
  if (r.init_start_ms && r.run_start_ms) t.init = (*r.run_start_ms - *r.init_start_ms) / 1000;
  if (const auto run = r.run_seconds()) {
    if (r.run_stop_ms) t.final_scoring_wait = std::max(0.0, (*r.run_stop_ms - last_end) / 1000);
    t.idle = std::max(0.0, *run - t.training - t.eval_inference - t.final_scoring_wait);
  }
}

// An epoch's validation inference, from eval_start until training resumes at `resumes` (or its
// eval_stop, which the asynchronous scorer may send later), into t; its end is returned.
double add_inference(const EpochRecord& e, std::optional<double> resumes, TimeBreakdown& t) {
  const double end = std::min(*e.eval_stop_ms, resumes.value_or(*e.eval_stop_ms));
  t.eval_inference += std::max(0.0, end - *e.eval_start_ms) / 1000;
  return end;
}

TimeBreakdown time_of_blocks(const RunRecord& r) {
  TimeBreakdown t;
  double last_end = r.run_start_ms.value_or(0);
  for (const BlockRecord& b : r.blocks)
    if (b.start_ms && b.stop_ms) t.training += (*b.stop_ms - *b.start_ms) / 1000, last_end = std::max(last_end, *b.stop_ms);
  for (const EpochRecord& e : r.epochs) {
    if (e.eval_start_ms && e.eval_stop_ms) {
      std::optional<double> resumes;  // the first block that starts after this evaluation
      for (const BlockRecord& b : r.blocks)
        if (b.start_ms && *b.start_ms >= *e.eval_start_ms) resumes = std::min(resumes.value_or(*b.start_ms), *b.start_ms);
      last_end = std::max(last_end, add_inference(e, resumes, t));
    }
    if (e.scoring_seconds) t.scoring_total = t.scoring_total.value_or(0) + *e.scoring_seconds;
  }
  close_breakdown(r, last_end, t);
  return t;
}

TimeBreakdown time_of(const RunRecord& r) {
  if (trains_in_blocks(r)) return time_of_blocks(r);
  TimeBreakdown t;
  double last_end = r.run_start_ms.value_or(0);
  for (size_t i = 0; i < r.epochs.size(); ++i) {
    const EpochRecord& e = r.epochs[i];
    if (e.start_ms && e.stop_ms) t.training += (*e.stop_ms - *e.start_ms) / 1000, last_end = std::max(last_end, *e.stop_ms);
    if (e.eval_start_ms && e.eval_stop_ms)  // training resumes at the next epoch_start
      last_end = std::max(last_end, add_inference(e, i + 1 < r.epochs.size() ? r.epochs[i + 1].start_ms : std::nullopt, t));
    if (e.scoring_seconds) t.scoring_total = t.scoring_total.value_or(0) + *e.scoring_seconds;
  }
  close_breakdown(r, last_end, t);
  return t;
}

// metrics.jsonl's steps x the global batch in each epoch the log trained (epoch_start and
// epoch_stop), in epoch order, each step counted once (a resumed run's file repeats steps); empty
// without kept steps.
std::vector<int64_t> images_stepped(const RunRecord& r) {
  if (r.steps.empty() || !r.global_batch_size || *r.global_batch_size <= 0) return {};
  std::map<int64_t, std::set<int64_t>> steps;
  for (const StepRecord& s : r.steps) steps[s.epoch].insert(s.step);
  std::vector<int64_t> out;
  for (const auto& [epoch, ids] : steps)
    if (const EpochRecord* e = r.epoch(epoch); e && e->start_ms && e->stop_ms)
      out.push_back(static_cast<int64_t>(ids.size()) * *r.global_batch_size);
  return out;
}

// train_samples against the evidence used (see Throughput in run_summary.h).
void check_train_samples(const RunRecord& r, const std::vector<int64_t>& stepped, double per_epoch_scale, Throughput& t) {
  if (!r.train_samples || *r.train_samples <= 0 || !t.images_per_s || t.source == kSourceTrainSamples ||
      t.source == kSourceTrainSamplesBlocks)
    return;
  const auto samples = static_cast<double>(*r.train_samples);
  if (stepped.size() > 1) {  // every epoch but the last is whole: the run may stop inside the last one
    double whole = 0;
    bool off = false;
    for (size_t i = 0; i + 1 < stepped.size(); ++i) {
      whole += static_cast<double>(stepped[i]) / static_cast<double>(stepped.size() - 1);
      off = off || std::abs(stepped[i] - *r.train_samples) >= *r.global_batch_size;
    }
    if (!off) return;
    t.train_samples_ratio = samples / whole;
    t.note = "train_samples " + std::to_string(*r.train_samples) + " is not the " + format_number(whole, "%.0f") +
             " images an epoch that metrics.jsonl's steps x global_batch_size cover: not used";
  } else if (stepped.empty() && std::abs(samples * per_epoch_scale / *t.images_per_s - 1) > 0.1) {
    t.train_samples_ratio = samples * per_epoch_scale / *t.images_per_s;
    t.note = "train_samples " + std::to_string(*r.train_samples) + " gives " +
             format_number(samples * per_epoch_scale, "%.1f") + " images/s, " +
             format_number(*t.train_samples_ratio, "%.2f") + "x the " + format_number(*t.images_per_s, "%.1f") +
             " from the " + t.source + ": not used";
  }
}

// See Throughput in run_summary.h.
Throughput throughput_of(const RunRecord& r, double training_s, int64_t epochs, bool blocks) {
  Throughput t;
  if (!r.throughput.empty()) t.images_per_s = median(r.throughput), t.source = kSourceThroughputEvents;
  if (!(training_s > 0) || epochs <= 0) return t;
  const double scale = static_cast<double>(epochs) / training_s;  // images an epoch -> images/s
  const std::vector<int64_t> stepped = images_stepped(r);
  const bool coco = r.division == "closed" || r.eval_samples == kCocoValImages;
  if (!t.images_per_s && !stepped.empty()) {
    double images = 0;
    for (int64_t n : stepped) images += static_cast<double>(n);
    t.images_per_s = images / training_s, t.source = kSourceSteps;
  } else if (!t.images_per_s && coco) {
    t.images_per_s = static_cast<double>(kCocoTrainImages) * scale, t.source = blocks ? kSourceCocoBlocks : kSourceCocoEpochs;
  } else if (!t.images_per_s && r.train_samples && *r.train_samples > 0) {
    t.images_per_s = static_cast<double>(*r.train_samples) * scale;
    t.source = blocks ? kSourceTrainSamplesBlocks : kSourceTrainSamples;
  }
  check_train_samples(r, stepped, scale, t);
  if (t.source == kSourceThroughputEvents && coco && stepped.empty()) {
    // Events that are not the system's images/s (per device, say) disagree with the epochs' count.
    const double from_epochs = static_cast<double>(kCocoTrainImages) * scale;
    if (std::abs(from_epochs / *t.images_per_s - 1) > 0.1) {
      t.events_ratio = from_epochs / *t.images_per_s;
      t.note += std::string(t.note.empty() ? "" : "; ") + "the throughput events' " + format_number(*t.images_per_s, "%.1f") +
                " images/s disagree with the epochs x 117266's " + format_number(from_epochs, "%.1f");
    }
  }
  return t;
}

// A result file, or a run folder (its mlperf_log.txt the file checked and named).
}  // namespace

RunSummary summarize_run(const fs::path& path, const std::string& ruleset) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "mlperf_log.txt" : path;
  RunSummary s{.file = file.string(), .run = read_run(path.string())};
  logging::CheckOptions options;
  options.ruleset = ruleset;
  const logging::CheckReport check = logging::check_log_file(file.string(), options);
  s.ruleset = check.ruleset;
  s.compliant = check.readable && check.passed;
  if (!s.compliant)
    s.check_error = check.errors.empty() ? "not readable" : "line " + std::to_string(check.errors.front().line) + ": " + check.errors.front().text;
  if (const auto sec = s.run.run_seconds()) s.minutes = *sec / 60;
  s.epochs_to_converge = s.run.converged_epoch();
  s.time = time_of(s.run);
  s.counted_in_blocks = trains_in_blocks(s.run);
  if (s.counted_in_blocks) {
    for (const BlockRecord& b : s.run.blocks) s.epochs_trained += (b.start_ms && b.stop_ms) ? b.epoch_count : 0;
  } else {
    for (const EpochRecord& e : s.run.epochs) s.epochs_trained += (e.start_ms && e.stop_ms) ? 1 : 0;
  }
  s.throughput = throughput_of(s.run, s.time.training, s.epochs_trained, s.counted_in_blocks);
  return s;
}

}  // namespace mrcnn::analysis
