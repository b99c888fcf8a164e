#include "benchmark/run/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace mrcnn::run {
namespace {

std::atomic<int> g_signal{0};
struct sigaction g_previous_term, g_previous_int;

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {  // the second one: stop now
    constexpr char kMsg[] = "mlperf-maskrcnn: second stop signal, exiting at once\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    ::_exit(128 + sig);
  }
}

}  // namespace

StopRequested::StopRequested(int sig)
    : std::runtime_error(std::string("stopped by ") + (sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal")),
      signal(sig) {}

StopSignals::StopSignals() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, &g_previous_term);
  sigaction(SIGINT, &sa, &g_previous_int);
}

StopSignals::~StopSignals() {
  if (!over_) sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGINT, &g_previous_int, nullptr);
}

void StopSignals::run_over() {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  over_ = true;
}

int stop_signal_received() { return g_signal.load(); }

void throw_if_stop_requested() {
  if (const int sig = g_signal.load()) throw StopRequested(sig);
}

int remove_stale_temporaries(const std::string& output_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return 0;
  int removed = 0;
  for (auto it = fs::recursive_directory_iterator(output_dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() == 2) it.disable_recursion_pending();  // <output_dir>/<run>/checkpoints/<file> at most
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    const auto dot = name.rfind(".tmp.");
    if (dot == std::string::npos) continue;
    const std::string pid = name.substr(dot + 5);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long p = std::stol(pid);
    if (p == static_cast<long>(::getpid()) || (::kill(static_cast<pid_t>(p), 0) == 0 || errno == EPERM)) continue;
    if (fs::remove(it->path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace mrcnn::run
