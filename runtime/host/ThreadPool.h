// A fixed pool of worker threads for running kernels in parallel. One pool is
// shared by every run of an executable; parallelFor splits [0, n) into
// contiguous chunks, runs them on the workers and the calling thread, and
// returns when all are done (rethrowing the first exception a chunk threw).
// Thread-safe: several threads may call parallelFor on one pool at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace tensorc {

// The CPUs this process may run on: its affinity mask, bounded by a cgroup
// CPU quota (containers), at least 1.
unsigned availableCpus();

class ThreadPool {
public:
  // The most threads a pool runs.
  static constexpr unsigned kMaxThreads = 4096;
  // `threads` = 0: availableCpus(). Throws Error for more than kMaxThreads,
  // or where a thread cannot be started (none is left running).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return unsigned(workers_.size()) + 1; } // workers + the caller

  // Calls body(begin, end) on disjoint chunks covering [0, n), each at least
  // `grain` long (except the last).
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &body);

private:
  void work();
  void stop(); // lets the workers finish their tasks and joins them
  std::vector<std::thread> workers_;
  std::queue<std::function<void()>> tasks_;
  std::mutex mutex_;
  std::condition_variable ready_;
  bool stopping_ = false;
};

} // namespace tensorc
