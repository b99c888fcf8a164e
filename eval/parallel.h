// parallel_for: runs fn(i) for i in [0, n) on up to `threads` threads (the caller's included),
// handing out indices in increasing order. If calls throw, the exception of the smallest failing
// index is rethrown after every started call has finished, so the error reported does not depend
// on the thread count or timing. Threads are joined before return: nothing outlives the call.
// Internal to mrcnn_eval.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mrcnn::eval::detail {

template <class F>
void parallel_for(size_t n, int threads, F&& fn) {
  if (n == 0) return;
  const size_t nt = std::min(n, static_cast<size_t>(std::max(threads, 1)));
  if (nt == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  size_t err_index = n;
  std::exception_ptr err;
  auto work = [&]() {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < err_index) {
          err_index = i;
          err = std::current_exception();
        }
        stop.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(nt - 1);
  for (size_t t = 1; t < nt; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
}

inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace mrcnn::eval::detail
