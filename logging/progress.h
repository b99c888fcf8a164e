// A progress display for long work (an epoch, an evaluation pass, dataset generation):
//   epoch 3  [#########.........]  412/1000  41%  12.3 img/s  loss 0.8123  ETA 00:47
// On a terminal it redraws one line in place; otherwise (CI logs, files) it prints a plain line
// at most every `min_interval_s` seconds and at the end, so logs stay readable.
// Thread-safety: update() and finish() may be called from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace mrcnn::logging {

class Progress {
 public:
  // `total` may be 0 when unknown (no bar, no ETA). `unit` names what is counted ("img").
  Progress(std::string label, int64_t total, std::string unit = "it", std::FILE* out = stderr,
           double min_interval_s = 5.0);
  ~Progress();  // finishes the line if finish() was not called
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Sets the count done so far; `extra` is appended (e.g. "loss 0.8123").
  void update(int64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");

  double elapsed_s() const;
  // The line that update() would draw (exposed for tests).
  std::string render(int64_t done, const std::string& extra) const;

 private:
  const std::string label_;
  const int64_t total_;
  const std::string unit_;
  std::FILE* const out_;
  const double min_interval_s_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t done_ = 0;
  std::string extra_;
  bool finished_ = false;
};

}  // namespace mrcnn::logging
