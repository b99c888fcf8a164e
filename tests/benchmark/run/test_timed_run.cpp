#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>
#include <string>
#include <stdexcept>
#include <functional>

#include <nlohmann/json.hpp>

#include "benchmark/comm/communicator.h"
#include "tests/benchmark/twin_ranks.h"
#include "benchmark/run/init_log.h"
#include "benchmark/run/observers.h"
#include "benchmark/run/profile_window.h"
#include "benchmark/run/timed_run.h"
#include "logging/compliance.h"
#include "toy_parts.h"

namespace mrcnn::run {
namespace {

using testing::ToyData;
using testing::ToyModel;
using testing::ToyScorer;

struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    dir = std::filesystem::temp_directory_path() /
          ("mrcnn-timed-run-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
};

struct ToyRun {
  int64_t batches = 6;
  int64_t max_epochs = 8;
  double bbox_per_epoch = 0.1, segm_per_epoch = 0.09;  // targets met at epoch 4
  std::chrono::milliseconds scoring_delay{50};
  bool async = true;
  int64_t nan_at_step = -1;
  int64_t fail_at_step = -1;
  uint64_t seed = 7;
  int64_t results_every = 1;
  std::chrono::milliseconds step_time{0};
  int64_t max_steps_per_epoch = 0;
  std::vector<RunObserver*> observers;  // besides the metrics file
  // Instead of the local communicator (rank 0 of 1): this one, which the run's trainer is told of.
  comm::Communicator* comm = nullptr;
  std::function<void(const train::Trainer&)> on_trainer;

  RunResult run(const std::filesystem::path& log_path, const std::string& metrics = "") const {
    logging::MLLogger mllog({.to_stdout = false, .file_path = log_path.string(), .truncate_file = true});
    log_submission(mllog, {.org = "test", .division = "closed", .status = "onprem", .platform = "1xCPU"}, true);
    mllog.log(logging::key::kInitStart);
    config::SystemConfig config;
    config.run.seed = static_cast<int64_t>(seed);
    config.hp = {.global_batch_size = 8, .base_lr = 0.01, .warmup_steps = 5, .warmup_factor = 0.1,
                 .decay_steps = {30, 40}, .num_image_candidates = 1000};
    log_hyperparameters(mllog, config);
    ToyModel model;
    model.nan_at_step_ = nan_at_step;
    model.fail_at_step_ = fail_at_step;
    model.step_time_ = step_time;
    auto local = comm::make_local_communicator();
    comm::Communicator* const comm = this->comm ? this->comm : local.get();
    train::Trainer trainer(model,
                           {.schedule = {.base_lr = 0.01, .warmup_steps = 5, .warmup_factor = 0.1, .decay_steps = {30, 40}},
                            .seed = seed,
                            .results_every = results_every},
                           *comm);
    if (on_trainer) on_trainer(trainer);
    mllog.log(logging::key::kInitStop);
    RunParts parts{[this] { return std::make_unique<ToyData>(batches, 8); },
                   [] { return std::make_unique<ToyData>(2, 8); },
                   [this] { return std::make_unique<ToyScorer>(bbox_per_epoch, segm_per_epoch, scoring_delay); }};
    std::unique_ptr<MetricsFile> metrics_file;
    std::vector<RunObserver*> observers = this->observers;
    if (!metrics.empty()) {
      metrics_file = std::make_unique<MetricsFile>(metrics, /*append=*/false);
      observers.push_back(metrics_file.get());
    }
    TimedRun timed(mllog, model, trainer, std::move(parts), *comm,
                   {.max_epochs = max_epochs, .max_steps_per_epoch = max_steps_per_epoch, .async_eval = async,
                    .observers = observers});
    return timed.run();
  }
};

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double gradient_norm(ToyModel& m) {
  double sq = 0;
  for (const auto& p : m.trainable_parameters()) sq += p.tensor.grad().square().sum().item<double>();
  return std::sqrt(sq);
}

// Clipping runs on the device inside the step; its norm comes back with the losses.
TEST(Trainer, ClippingReportsTheNormBeforeAndLeavesGradientsAtTheBound) {
  const model::Batch batch = *testing::ToyStream(0, 1, 8).next();
  auto comm = comm::make_local_communicator();
  ToyModel plain_model, clipped_model;
  train::Trainer plain(plain_model, {.seed = 3}, *comm);
  train::Trainer clipped(clipped_model, {.gradient_clip_norm = 1e-3, .seed = 3}, *comm);
  const train::StepResult a = plain.step(batch);
  const train::StepResult b = clipped.step(batch);
  EXPECT_EQ(a.grad_norm, 0);  // not computed without clipping
  const double norm = gradient_norm(plain_model);
  ASSERT_GT(norm, 1e-2);
  EXPECT_NEAR(b.grad_norm, norm, 1e-6 * norm);
  EXPECT_NEAR(gradient_norm(clipped_model), 1e-3, 1e-6);
  EXPECT_EQ(a.loss, b.loss);
}

bool same_parameters(ToyModel& a, ToyModel& b) {
  const auto sa = a.state_dict(), sb = b.state_dict();
  for (const auto& [name, t] : sa)
    if (!torch::equal(t, sb.at(name))) return false;
  return true;
}

// Reading every third step's results changes what the host learns when, not what the steps do:
// the same results, in step order, three at a time, and the same parameters.
TEST(Trainer, ResultsReadEveryThirdStepEqualThoseReadEveryStep) {
  auto comm = comm::make_local_communicator();
  ToyModel every_model, third_model;
  train::Trainer every(every_model, {.gradient_clip_norm = 0.05, .seed = 5}, *comm);
  train::Trainer third(third_model, {.gradient_clip_norm = 0.05, .seed = 5, .results_every = 3}, *comm);
  std::vector<train::StepResult> a, b;
  std::vector<size_t> read_sizes;  // results known after each of third's steps
  testing::ToyStream stream(0, 7, 8);
  while (auto batch = stream.next()) {
    every.step(*batch, [&](const train::StepResult& r) { a.push_back(r); });
    third.step(*batch, [&](const train::StepResult& r) { b.push_back(r); });
    read_sizes.push_back(b.size());
  }
  EXPECT_EQ(read_sizes, (std::vector<size_t>{0, 0, 3, 3, 3, 6, 6}));
  EXPECT_EQ(third.unread_steps(), 1);
  third.read_results([&](const train::StepResult& r) { b.push_back(r); });
  EXPECT_EQ(third.unread_steps(), 0);
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 7u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].lr, b[i].lr);
    EXPECT_EQ(a[i].loss, b[i].loss) << "step " << i;
    EXPECT_EQ(a[i].losses, b[i].losses) << "step " << i;
    EXPECT_EQ(a[i].grad_norm, b[i].grad_norm) << "step " << i;
    EXPECT_GT(b[i].grad_norm, 0) << "step " << i;
    EXPECT_EQ(a[i].images, b[i].images);
    EXPECT_FALSE(b[i].skipped);
  }
  EXPECT_TRUE(same_parameters(every_model, third_model));
  EXPECT_THROW(train::Trainer(third_model, {.results_every = 0}, *comm), std::invalid_argument);
}

// A NaN loss without loss scaling: the step that met it makes no update (decided on the device,
// before any read), and however late it is read, the error names that step after the steps
// before it were handed over.
TEST(Trainer, ANonFiniteStepMakesNoUpdateAndIsNamedWhenReadLate) {
  auto comm = comm::make_local_communicator();
  {
    ToyModel model, before;
    model.nan_at_step_ = 2;
    before.nan_at_step_ = 2;
    train::Trainer trainer(model, {.seed = 5}, *comm);
    train::Trainer reference(before, {.seed = 5}, *comm);
    testing::ToyStream stream(0, 3, 8);
    for (int i = 0; i < 2; ++i) {
      const model::Batch batch = *stream.next();
      trainer.step(batch);
      reference.step(batch);
    }
    EXPECT_THROW(trainer.step(*stream.next()), train::NonFiniteLoss);
    EXPECT_TRUE(same_parameters(model, before)) << "the NaN step changed the parameters";
  }
  ToyModel model;
  model.nan_at_step_ = 4;
  train::Trainer trainer(model, {.seed = 5, .results_every = 3}, *comm);
  std::vector<int64_t> seen;
  testing::ToyStream stream(0, 7, 8);
  try {
    while (auto batch = stream.next()) trainer.step(*batch, [&](const train::StepResult& r) { seen.push_back(r.step); });
    FAIL() << "expected NonFiniteLoss";
  } catch (const train::NonFiniteLoss& e) {
    EXPECT_EQ(e.step, 4);
    EXPECT_NE(std::string(e.what()).find("NaN (loss_mse)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(trainer.global_step(), 6) << "read at the sixth step";
}

// With several ranks, the stop verdict (targets reached, scoring failed) is agreed with the step
// results' read, every results_every steps, not after every step: no step between two reads waits
// on a host collective; the run still stops at the targets, on a read step.
TEST(TimedRun, SeveralRanksAgreeToStopOnlyWhereTheyReadTheResults) {
  Scratch s;
  mrcnn::testing::TwinRanks twins;
  const train::Trainer* trainer = nullptr;
  std::vector<int64_t> unread_at_broadcast;  // the trainer's unread steps at each broadcast
  twins.on_broadcast = [&] { unread_at_broadcast.push_back(trainer ? trainer->unread_steps() : -1); };
  ToyRun run;
  run.results_every = 4;
  run.batches = 10;  // 10 steps an epoch: reads at steps 4 and 8 of each, and its end
  run.step_time = std::chrono::milliseconds(20);
  run.comm = &twins;
  run.on_trainer = [&](const train::Trainer& t) { trainer = &t; };
  const RunResult r = run.run(s.dir / "mlperf.log");
  EXPECT_TRUE(r.success) << r.stop_reason;
  EXPECT_EQ(r.converged_epoch, 4);
  ASSERT_FALSE(unread_at_broadcast.empty());
  for (size_t i = 0; i < unread_at_broadcast.size(); ++i)
    EXPECT_EQ(unread_at_broadcast[i], 0) << "broadcast " << i << " came between two reads";
  // Fewer verdicts than steps: one at each read inside an epoch and one after each epoch's eval.
  EXPECT_LT(unread_at_broadcast.size(), r.steps.size());
  EXPECT_EQ(r.steps.size() % 10 % 4, 0u) << "the run stopped between two reads: " << r.steps.size() << " steps";
}

TEST(TimedRun, ConvergedRunWritesACompliantLogAndStopsAtTheTarget) {
  Scratch s;
  const auto log = s.dir / "mlperf.log";
  const RunResult r = ToyRun{}.run(log, (s.dir / "metrics.jsonl").string());
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.converged_epoch, 4);
  EXPECT_GE(r.run_stop_ms, r.run_start_ms);
  const auto report = logging::check_log_file(log.string(), {.strict = true});
  EXPECT_TRUE(report.passed) << logging::format_report(report);
  const std::string text = read(log);
  EXPECT_NE(text.find("\"status\": \"success\""), std::string::npos);
  EXPECT_NE(text.find("\"key\": \"train_samples\", \"value\": 48"), std::string::npos);
  // Metrics: one line per step and one per scored epoch.
  std::ifstream m(s.dir / "metrics.jsonl");
  int steps = 0, evals = 0;
  for (std::string l; std::getline(m, l);) {
    steps += l.find("\"event\":\"step\"") != std::string::npos;
    evals += l.find("\"event\":\"eval\"") != std::string::npos;
  }
  EXPECT_EQ(steps, static_cast<int>(r.steps.size()));
  EXPECT_GE(evals, 4);
}

TEST(TimedRun, ScoringOfAnEpochOverlapsTrainingOfTheNext) {
  Scratch s;
  ToyRun cfg;
  cfg.scoring_delay = std::chrono::milliseconds(400);
  cfg.batches = 40;
  const RunResult r = cfg.run(s.dir / "mlperf.log");
  ASSERT_TRUE(r.success);
  ASSERT_FALSE(r.accuracies.empty());
  const auto& [epoch, acc] = r.accuracies.front();
  ASSERT_EQ(epoch, 1);
  int overlapping = 0;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const int64_t step_epoch = r.steps[i].step / cfg.batches + 1;
    if (step_epoch == 2 && r.step_queued[i] > acc.started && r.step_queued[i] < acc.finished) ++overlapping;
  }
  EXPECT_GT(overlapping, 0) << "no step of epoch 2 ran while epoch 1 was being scored";
  const auto report = logging::check_log_file((s.dir / "mlperf.log").string(), {.strict = true});
  EXPECT_TRUE(report.passed) << logging::format_report(report);
}

TEST(TimedRun, SameSeedGivesBitIdenticalLosses) {
  Scratch s;
  const RunResult a = ToyRun{}.run(s.dir / "a.log");
  const RunResult b = ToyRun{}.run(s.dir / "b.log");
  const size_t n = std::min(a.steps.size(), b.steps.size());
  ASSERT_GT(n, 10u);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.steps[i].loss, b.steps[i].loss) << "step " << i;
    ASSERT_EQ(a.steps[i].lr, b.steps[i].lr);
  }
  ToyRun other;
  other.seed = 8;
  const RunResult c = other.run(s.dir / "c.log");
  bool differs = false;
  for (size_t i = 0; i < std::min(n, c.steps.size()); ++i) differs |= c.steps[i].loss != a.steps[i].loss;
  EXPECT_TRUE(differs) << "the seed has no effect on the losses";
}

TEST(TimedRun, EpochBudgetSpentEndsAborted) {
  Scratch s;
  ToyRun cfg;
  cfg.max_epochs = 3;  // targets would need epoch 4
  cfg.async = false;
  const RunResult r = cfg.run(s.dir / "mlperf.log");
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.epochs_trained, 3);
  EXPECT_EQ(r.accuracies.size(), 3u);
  const std::string text = read(s.dir / "mlperf.log");
  EXPECT_NE(text.find("\"status\": \"aborted\""), std::string::npos);
  // Compliant as a log, but without a target line the closed division does not pass.
  const auto report = logging::check_log_file((s.dir / "mlperf.log").string());
  EXPECT_FALSE(report.passed);
}

// A measurement for `forecast` (run.max_steps_per_epoch): every epoch ends after its steps and is
// still evaluated; scores that meet the targets do not end it, and its run_stop says aborted. Each
// epoch logs the rank's own step times (from its second step on: the first warms up).
TEST(TimedRun, AMeasurementCutsEveryEpochAndNeverConverges) {
  Scratch s;
  ToyRun cfg;
  cfg.max_epochs = 5;  // the targets are met at epoch 4
  cfg.max_steps_per_epoch = 2;
  cfg.step_time = std::chrono::milliseconds(5);
  const RunResult r = cfg.run(s.dir / "mlperf.log");
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.epochs_trained, 5);
  EXPECT_EQ(r.steps.size(), 10u);
  EXPECT_EQ(r.accuracies.size(), 5u);
  for (const train::StepResult& step : r.steps) EXPECT_GE(step.compute_seconds, 0.005) << "step " << step.step;
  const std::string text = read(s.dir / "mlperf.log");
  EXPECT_NE(text.find("\"status\": \"aborted\""), std::string::npos);
  EXPECT_NE(text.find("\"key\": \"max_steps_per_epoch\", \"value\": 2"), std::string::npos);  // the log says it
  int logged = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"rank_step_seconds\"") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line.substr(line.find('{')));
    ASSERT_EQ(j["value"]["median"].size(), 1u) << line;
    const double median = j["value"]["median"][0], p95 = j["value"]["p95"][0];
    EXPECT_GE(median, 0.005) << line;
    EXPECT_GE(p95, median) << line;
    EXPECT_EQ(j["metadata"]["epoch_num"], ++logged) << line;
  }
  EXPECT_EQ(logged, 5);
  const auto report = logging::check_log_file((s.dir / "mlperf.log").string());  // the key is the project's own
  for (const auto& m : report.errors) EXPECT_NE(m.key, "rank_step_seconds") << m.text;
  for (const auto& m : report.warnings) EXPECT_NE(m.key, "rank_step_seconds") << m.text;
}

// run_stopped comes once, after run_stop is in the log, on a successful and on an aborted run; an
// observer that throws there changes neither the run's outcome nor what the next observer sees.
TEST(TimedRun, ObserversHearRunStoppedAfterRunStopWhateverTheOutcome) {
  struct Recorder final : RunObserver {
    std::filesystem::path log;
    std::vector<std::pair<bool, bool>> calls;  // (aborted, run_stop already in the log)
    void run_stopped(bool aborted) override {
      calls.emplace_back(aborted, read(log).find("\"key\": \"run_stop\"") != std::string::npos);
    }
  };
  struct Thrower final : RunObserver {
    void run_stopped(bool) override { throw std::runtime_error("cannot write"); }
  };
  for (const bool nan : {false, true}) {
    SCOPED_TRACE(nan ? "aborted by a NaN" : "converged");
    Scratch s;
    Thrower thrower;
    Recorder recorder;
    recorder.log = s.dir / "mlperf.log";
    ToyRun cfg;
    cfg.observers = {&thrower, &recorder};
    if (nan) {
      cfg.nan_at_step = 3;
      EXPECT_THROW(cfg.run(recorder.log), train::NonFiniteLoss);
    } else {
      EXPECT_TRUE(cfg.run(recorder.log).success);
    }
    ASSERT_EQ(recorder.calls.size(), 1u);
    EXPECT_EQ(recorder.calls[0].first, nan);
    EXPECT_TRUE(recorder.calls[0].second) << "run_stopped came before run_stop";
  }
}

TEST(TimedRun, NonFiniteLossAbortsTheRunCleanly) {
  for (const int64_t every : {1, 4}) {
    SCOPED_TRACE("results_every " + std::to_string(every));
    Scratch s;
    ToyRun cfg;
    cfg.nan_at_step = 9;
    cfg.results_every = every;
    try {
      cfg.run(s.dir / "mlperf.log", (s.dir / "metrics.jsonl").string());
      FAIL() << "expected NonFiniteLoss";
    } catch (const train::NonFiniteLoss& e) {
      EXPECT_EQ(e.step, 9);
      EXPECT_NE(std::string(e.what()).find("loss_mse"), std::string::npos) << e.what();
    }
    const std::string text = read(s.dir / "mlperf.log");
    EXPECT_NE(text.find("\"key\": \"run_stop\""), std::string::npos);
    EXPECT_NE(text.find("\"status\": \"aborted\""), std::string::npos);
    EXPECT_EQ(text.find("\"status\": \"success\""), std::string::npos);
    // Every step before the NaN is in the metrics, read late or not; none after it.
    const std::string metrics = read(s.dir / "metrics.jsonl");
    EXPECT_NE(metrics.find("\"step\":8,"), std::string::npos) << metrics;
    EXPECT_EQ(metrics.find("\"step\":9,"), std::string::npos) << metrics;
  }
}

// Results read several at once keep the times their steps were queued: the metrics' images/s is
// the epoch's rate at each step, not images so far over the time of the read (which made a
// 16-step epoch on a GPU read 1.8, 3.7, 5.5, ... 29.4 images/s).
TEST(TimedRun, ResultsReadTogetherKeepTheirOwnTimes) {
  Scratch s;
  ToyRun cfg;
  cfg.batches = 8;
  cfg.max_epochs = 1;
  cfg.results_every = 4;
  cfg.step_time = std::chrono::milliseconds(20);
  const RunResult r = cfg.run(s.dir / "mlperf.log", (s.dir / "metrics.jsonl").string());
  ASSERT_EQ(r.steps.size(), 8u);
  for (size_t i = 1; i < r.step_queued.size(); ++i)
    EXPECT_GE(r.step_queued[i] - r.step_queued[i - 1], std::chrono::milliseconds(20)) << "step " << i;
  std::vector<double> rates;
  std::istringstream lines(read(s.dir / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("event") == "step") rates.push_back(j.at("images_per_s").get<double>());
  }
  ASSERT_EQ(rates.size(), 8u);
  // 8 images per step of at least 20 ms: at most 400 images/s at every step, the first included.
  // The read's time would put step 0 of each group of 4 at a quarter of step 3's rate.
  for (size_t i = 0; i < rates.size(); ++i) EXPECT_LE(rates[i], 400.0) << "step " << i;
  EXPECT_GT(rates[0], 0.5 * rates[3]);
  EXPECT_GT(rates[4], 0.5 * rates[7]);
}

// A run that fails in a step's forward still hands over the steps before it that were not read.
TEST(TimedRun, AFailingStepLosesNoEarlierStepsResults) {
  Scratch s;
  ToyRun cfg;
  cfg.fail_at_step = 9;
  cfg.results_every = 4;  // steps 6-8 are unread when step 9 fails
  try {
    cfg.run(s.dir / "mlperf.log", (s.dir / "metrics.jsonl").string());
    FAIL() << "expected the model's error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "toy model failed");
  }
  const std::string metrics = read(s.dir / "metrics.jsonl");
  EXPECT_NE(metrics.find("\"step\":8,"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("\"step\":9,"), std::string::npos) << metrics;
}

// An epoch's results are all read before the epoch ends: a run reading every fourth step writes
// the same metrics (time aside) and the same log events as one reading every step.
TEST(TimedRun, ResultsReadEveryFourthStepGiveTheSameMetrics) {
  const auto strip_times = [](const std::string& text) {
    std::string out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      auto j = logging::Json::parse(line);
      if (j.value("event", "") != "step") continue;
      j.erase("time_ms");
      j.erase("images_per_s");
      j.erase("compute_s");
      out += j.dump() + "\n";
    }
    return out;
  };
  Scratch s;
  ToyRun cfg;
  cfg.batches = 6;  // not a multiple of 4: each epoch ends with unread steps
  const RunResult a = cfg.run(s.dir / "a.log", (s.dir / "a.jsonl").string());
  cfg.results_every = 4;
  const RunResult b = cfg.run(s.dir / "b.log", (s.dir / "b.jsonl").string());
  ASSERT_EQ(a.steps.size(), b.steps.size());
  EXPECT_EQ(a.converged_epoch, b.converged_epoch);
  const std::string ma = strip_times(read(s.dir / "a.jsonl")), mb = strip_times(read(s.dir / "b.jsonl"));
  EXPECT_FALSE(ma.empty());
  EXPECT_EQ(ma, mb);
}

// The profile window covers the steps it names whenever their results are read: 3 steps from
// step 2, each with its data wait, also when results come four steps at a time.
TEST(TimedRun, TheProfileWindowCoversItsStepsWhenResultsAreReadLate) {
  for (const int64_t every : {1, 4}) {
    SCOPED_TRACE("results_every " + std::to_string(every));
    Scratch s;
    ProfileWindow window({.steps = 3, .first = 2}, s.dir.string());
    ToyRun cfg;
    cfg.results_every = every;
    cfg.observers = {&window};
    cfg.run(s.dir / "mlperf.log");
    const auto table = logging::Json::parse(read(s.dir / "profile.json"));
    EXPECT_EQ(table["steps"], 3);
    std::map<std::string, int64_t> calls;
    for (const auto& stage : table["stages"]) calls[stage["stage"].get<std::string>()] = stage["calls"].get<int64_t>();
    EXPECT_EQ(calls["train_step"], 3);
    EXPECT_EQ(calls["data_wait"], 3);
    EXPECT_EQ(calls["read_results"], every == 1 ? 3 : 1) << "step 3 reads steps 0-3";
  }
}

}  // namespace
}  // namespace mrcnn::run
