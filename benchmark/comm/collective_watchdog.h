// A bound on how long a rank waits for the others. With a dead or hung peer every other rank
// would wait in its next collective forever; the watchdog ends this rank instead, with a message
// naming the rank, the collective and the wait, and the launcher (mpirun, or srun with
// --kill-on-bad-exit) then ends every rank of the job.
//
//   CollectiveWatchdog dog(rank, 900);
//   { auto w = dog.watch("allreduce"); MPI_Allreduce(...); }   // armed while the call blocks
//
// Work a collective leaves running on a device (NCCL) is watched through `poll`: a function the
// watchdog thread calls about once a second, which returns a message when the device work has
// waited too long or failed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mrcnn::comm {

// What the process does in its last moment when a watchdog ends it: called once, from the
// watchdog's thread, after the message and before the exit (the training command closes its
// MLPerf log there with run_stop "aborted"). Empty: nothing. Thread-safe.
void set_last_words(std::function<void()> hook);

class CollectiveWatchdog {
 public:
  // timeout_s <= 0: nothing is watched and no thread is started.
  CollectiveWatchdog(int rank, double timeout_s, std::function<std::string()> poll = {});
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  class Scope {
   public:
    explicit Scope(CollectiveWatchdog* dog) : dog_(dog) {}
    Scope(Scope&& o) noexcept : dog_(o.dog_) { o.dog_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (dog_) dog_->disarm();
    }

   private:
    CollectiveWatchdog* dog_;
  };
  // Armed until the returned scope ends. Not reentrant: one collective at a time.
  [[nodiscard]] Scope watch(const char* what);
  double timeout_s() const { return timeout_s_; }

 private:
  void disarm();
  void loop();
  [[noreturn]] void expire(const std::string& message);

  const int rank_;
  const double timeout_s_;
  std::function<std::string()> poll_;
  std::mutex mu_;
  std::condition_variable cv_;
  const char* what_ = nullptr;  // armed while non-null
  std::chrono::steady_clock::time_point since_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mrcnn::comm
