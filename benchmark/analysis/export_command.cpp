#include "benchmark/analysis/export_command.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "benchmark/analysis/run_record.h"
#include "benchmark/analysis/tensorboard.h"
#include "logging/arguments.h"

namespace mrcnn::analysis {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"usage(usage: mlperf-maskrcnn export RUN [--tensorboard DIR] [--csv DIR]

Writes a run's metrics (its folder's metrics.jsonl and MLPerf log) for other tools:

  --tensorboard DIR  a TensorBoard event file in DIR (created if missing): per step train/loss,
                     train/<each loss>, train/lr, train/images_per_s, train/grad_norm (when
                     clipping) and train/skipped (1 for a float16 overflow); per epoch, at the
                     epoch's last step, eval/bbox_map, eval/segm_map, eval/inference_seconds and
                     eval/scoring_seconds. `tensorboard --logdir DIR` shows them.
  --csv DIR          steps.csv (a row per step: epoch, step, time_ms, lr, loss, each loss,
                     grad_norm, images_per_s, skipped) and epochs.csv (a row per epoch: its times,
                     evaluation seconds and accuracies) in DIR (created if missing)

RUN is a run folder written by `train` (mlperf_log.txt with metrics.jsonl beside it).
exit status: 0 written, 2 bad input (the file and the problem named)

examples:
  mlperf-maskrcnn export out/cpu-dev/latest --tensorboard tb && tensorboard --logdir tb
  mlperf-maskrcnn export results/aws-p5.48xlarge/maskrcnn/runs/result_0 --csv tables
)usage";

struct Args {
  std::string run, tensorboard, csv;
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

Args parse(const cli::Arguments& args) {
  Args a{.run = args.positional().at(0), .tensorboard = args.value("--tensorboard"), .csv = args.value("--csv")};
  if (a.tensorboard.empty() && a.csv.empty())
    throw cli::UsageError("nothing to write: give --tensorboard DIR, --csv DIR or both");
  return a;
}

void make_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) bad(dir + ": cannot make the folder" + (ec ? " (" + ec.message() + ")" : ""));
}

// The step at which an epoch's evaluation is drawn: its last training step (or the epoch number
// for an epoch without steps in the metrics).
std::map<int64_t, int64_t> last_step_of_epochs(const RunRecord& r) {
  std::map<int64_t, int64_t> last;
  for (const StepRecord& s : r.steps) last[s.epoch] = std::max(last.count(s.epoch) ? last[s.epoch] : s.step, s.step);
  return last;
}

std::string event_file_name(const RunRecord& r) {
  const double t = r.run_start_ms ? *r.run_start_ms / 1000 : (r.steps.empty() ? 0 : r.steps.front().time_ms / 1000);
  return "events.out.tfevents." + std::to_string(static_cast<int64_t>(t)) + ".mlperf-maskrcnn";
}

std::string write_tensorboard(const RunRecord& r, const std::string& dir) {
  make_folder(dir);
  const fs::path path = fs::path(dir) / event_file_name(r);
  const double t0 = r.run_start_ms ? *r.run_start_ms / 1000 : 0;
  tensorboard::EventWriter w(path.string(), t0);
  for (const StepRecord& s : r.steps) {
    const double t = s.time_ms / 1000;
    w.scalar("train/loss", s.step, t, static_cast<float>(s.loss));
    for (const auto& [name, value] : s.losses) w.scalar("train/" + name, s.step, t, static_cast<float>(value));
    w.scalar("train/lr", s.step, t, static_cast<float>(s.lr));
    w.scalar("train/images_per_s", s.step, t, static_cast<float>(s.images_per_s));
    if (s.grad_norm) w.scalar("train/grad_norm", s.step, t, static_cast<float>(*s.grad_norm));
    w.scalar("train/skipped", s.step, t, s.skipped ? 1.f : 0.f);
  }
  const auto last = last_step_of_epochs(r);
  for (const EpochRecord& e : r.epochs) {
    const int64_t step = last.count(e.epoch) ? last.at(e.epoch) : e.epoch;
    const double t = (e.accuracy_ms ? *e.accuracy_ms : e.stop_ms.value_or(t0 * 1000)) / 1000;
    if (e.bbox) w.scalar("eval/bbox_map", step, t, static_cast<float>(*e.bbox));
    if (e.segm) w.scalar("eval/segm_map", step, t, static_cast<float>(*e.segm));
    if (e.eval_start_ms && e.eval_stop_ms)
      w.scalar("eval/inference_seconds", step, t, static_cast<float>((*e.eval_stop_ms - *e.eval_start_ms) / 1000));
    if (e.scoring_seconds) w.scalar("eval/scoring_seconds", step, t, static_cast<float>(*e.scoring_seconds));
  }
  w.close();
  return path.string();
}

template <typename T>
std::string cell(const std::optional<T>& v) {
  if (!v) return "";
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", static_cast<double>(*v));
  return b;
}

std::string cell(double v) { return cell(std::optional<double>(v)); }

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) bad("cannot write " + path.string());
}

std::vector<std::string> write_csv(const RunRecord& r, const std::string& dir) {
  make_folder(dir);
  std::vector<std::string> names;  // every loss, in the order first met
  std::set<std::string> seen;
  for (const StepRecord& s : r.steps)
    for (const auto& [name, value] : s.losses)
      if (seen.insert(name).second) names.push_back(name);
  std::string steps = "epoch,step,time_ms,lr,loss";
  for (const std::string& n : names) steps += "," + n;
  steps += ",grad_norm,images_per_s,skipped\n";
  for (const StepRecord& s : r.steps) {
    steps += std::to_string(s.epoch) + "," + std::to_string(s.step) + "," + cell(s.time_ms) + "," + cell(s.lr) + "," +
             cell(s.loss);
    for (const std::string& n : names) {
      const auto it = std::find_if(s.losses.begin(), s.losses.end(), [&](const auto& p) { return p.first == n; });
      steps += "," + (it == s.losses.end() ? std::string() : cell(it->second));
    }
    steps += "," + cell(s.grad_norm) + "," + cell(s.images_per_s) + "," + (s.skipped ? "1" : "0") + "\n";
  }
  std::string epochs = "epoch,start_ms,stop_ms,eval_start_ms,eval_stop_ms,scoring_seconds,bbox_map,segm_map,accuracy_ms\n";
  for (const EpochRecord& e : r.epochs)
    epochs += std::to_string(e.epoch) + "," + cell(e.start_ms) + "," + cell(e.stop_ms) + "," + cell(e.eval_start_ms) +
              "," + cell(e.eval_stop_ms) + "," + cell(e.scoring_seconds) + "," + cell(e.bbox) + "," + cell(e.segm) +
              "," + cell(e.accuracy_ms) + "\n";
  const fs::path a = fs::path(dir) / "steps.csv", b = fs::path(dir) / "epochs.csv";
  write_file(a, steps);
  write_file(b, epochs);
  return {a.string(), b.string()};
}

}  // namespace

int export_main(int argc, char** argv) {
  const cli::Arguments parsed(argc, argv, {.with_value = {"--tensorboard", "--csv"},
                                           .positional = {1, 1, "one run folder"}});
  if (parsed.help()) return std::printf("%s", kUsage), 0;
  const Args args = parse(parsed);
  try {
    const RunRecord r = read_run(args.run);
    if (r.metrics_path.empty()) bad(args.run + ": no metrics.jsonl beside the MLPerf log (a run folder written by train has one)");
    if (!args.tensorboard.empty())
      std::printf("TensorBoard: %s (%zu steps, %zu epochs)\n", write_tensorboard(r, args.tensorboard).c_str(),
                  r.steps.size(), r.epochs.size());
    if (!args.csv.empty())
      for (const std::string& f : write_csv(r, args.csv)) std::printf("CSV: %s\n", f.c_str());
    return 0;
  } catch (const std::exception& e) {
    return cli::print_error("mlperf-maskrcnn export", e, 2);
  }
}

}  // namespace mrcnn::analysis
