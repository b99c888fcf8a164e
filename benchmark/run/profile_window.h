// `train --profile N[@FIRST]`: LibTorch's profiler (Kineto; CPU activities, and CUDA ones on a GPU)
// over N training steps starting at step FIRST (default 5: past the warm-up), on rank 0: from just
// before step FIRST is taken to just before step FIRST + N (or the end of the run), whenever the
// steps' results are read (train::TrainerOptions::results_every). Writes
// into the run folder
//   profile_trace.json   a Chrome / Perfetto trace (chrome://tracing, ui.perfetto.dev)
//   profile.json         the per-stage table: for every mrcnn:: scope (data wait, forward and the
//                        model's stages inside it, backward, all-reduce, optimizer) its calls, total
//                        and per-step milliseconds and share of the step
// and prints the table. The profiler's overhead lands in that run's time to train.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "benchmark/run/timed_run.h"
#include "logging/py_json.h"

namespace mrcnn::run {

struct ProfileRequest {
  int64_t steps = 0;  // 0: no profile
  int64_t first = 5;
};

// Parses "N" or "N@FIRST"; throws config::ConfigError naming the argument.
ProfileRequest parse_profile_request(const std::string& text);

class ProfileWindow final : public RunObserver {
 public:
  ProfileWindow(ProfileRequest request, std::string dir);
  ~ProfileWindow() override;
  void step_starting(int64_t epoch) override;
  void epoch_done(int64_t epoch) override;  // a window ending with the epoch ends before validation
  // Ends the window early (the run stopped inside it) and writes what was captured.
  void finish();

 private:
  void start();
  ProfileRequest request_;
  std::string dir_;
  int64_t steps_started_ = 0, profiled_ = 0;
  bool active_ = false, done_ = false;
};

// The per-stage table of a profiler trace's mrcnn:: scopes (exposed for tests).
logging::Json stage_table(const std::vector<std::pair<std::string, double>>& scopes_ms, int64_t steps);

}  // namespace mrcnn::run
