#include "logging/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace mrcnn::logging {

namespace {
std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const auto t = static_cast<int64_t>(s + 0.5);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(b, sizeof b, "%02lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return b;
}
}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit, std::FILE* out,
                   double min_interval_s)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 0)),
      unit_(std::move(unit)),
      out_(out),
      min_interval_s_(min_interval_s),
      tty_(out != nullptr && isatty(fileno(out))),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  if (!finished_) finish(extra_);
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::render(int64_t done, const std::string& extra) const {
  const double el = elapsed_s();
  const double rate = el > 0 ? static_cast<double>(done) / el : 0.0;
  std::string s = label_;
  char b[160];
  if (total_ > 0) {
    constexpr int kWidth = 24;
    const double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
    const int filled = static_cast<int>(frac * kWidth);
    s += "  [" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
    std::snprintf(b, sizeof b, "  %lld/%lld  %3.0f%%", static_cast<long long>(done),
                  static_cast<long long>(total_), frac * 100.0);
    s += b;
  } else {
    std::snprintf(b, sizeof b, "  %lld", static_cast<long long>(done));
    s += b;
  }
  std::snprintf(b, sizeof b, "  %.2f %s/s", rate, unit_.c_str());
  s += b;
  if (!extra.empty()) s += "  " + extra;
  if (total_ > 0 && done < total_)
    s += "  ETA " + hms(rate > 0 ? static_cast<double>(total_ - done) / rate : NAN);
  else
    s += "  " + hms(el);
  return s;
}

void Progress::update(int64_t done, const std::string& extra) {
  done_ = done;
  extra_ = extra;
  if (out_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (tty_) {
    if (since < 0.1) return;
    std::fprintf(out_, "\r\033[K%s", render(done, extra).c_str());
  } else {
    if (last_draw_ != std::chrono::steady_clock::time_point{} && since < min_interval_s_) return;
    std::fprintf(out_, "%s\n", render(done, extra).c_str());
  }
  std::fflush(out_);
  last_draw_ = now;
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  finished_ = true;
  if (out_ == nullptr) return;
  const std::string line = render(total_ > 0 ? std::max(done_, int64_t{0}) : done_, extra);
  std::fprintf(out_, tty_ ? "\r\033[K%s\n" : "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace mrcnn::logging
