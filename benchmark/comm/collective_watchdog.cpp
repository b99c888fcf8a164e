#include "benchmark/comm/collective_watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace mrcnn::comm {
namespace {

std::mutex& last_words_mutex() {
  static std::mutex m;
  return m;
}
std::function<void()>& last_words() {
  static std::function<void()> hook;
  return hook;
}

}  // namespace

void set_last_words(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(last_words_mutex());
  last_words() = std::move(hook);
}

CollectiveWatchdog::CollectiveWatchdog(int rank, double timeout_s, std::function<std::string()> poll)
    : rank_(rank), timeout_s_(timeout_s), poll_(std::move(poll)) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CollectiveWatchdog::Scope CollectiveWatchdog::watch(const char* what) {
  if (timeout_s_ <= 0) return Scope(nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = what;
    since_ = std::chrono::steady_clock::now();
  }
  return Scope(this);
}

void CollectiveWatchdog::disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  what_ = nullptr;
}

void CollectiveWatchdog::expire(const std::string& message) {
  std::fprintf(stderr,
               "[rank %d] error: %s; ending this rank so that the launcher ends the job "
               "(launch.collective_timeout_s = %g)\n",
               rank_, message.c_str(), timeout_s_);
  std::fflush(stderr);
  // Held to the end: set_last_words({}) (the hook's owner going away) waits for the exit instead.
  std::lock_guard<std::mutex> lock(last_words_mutex());
  std::function<void()> hook;
  hook.swap(last_words());  // once
  if (hook) {
    try {
      hook();
    } catch (...) {  // the exit below is what matters now
    }
  }
  std::_Exit(1);  // the training thread is blocked inside the collective: nothing to unwind
}

void CollectiveWatchdog::loop() {
  const auto tick = std::chrono::milliseconds(timeout_s_ < 5 ? 100 : 1000);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, tick);
    if (stop_) break;
    if (what_ != nullptr) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
      if (waited > timeout_s_)
        expire(std::string(what_) + " has waited " + std::to_string(static_cast<long>(waited)) +
               " s for the other ranks: a rank is dead or hung");
    }
    if (poll_) {
      lock.unlock();
      const std::string problem = poll_();
      if (!problem.empty()) expire(problem);
      lock.lock();
    }
  }
}

}  // namespace mrcnn::comm
