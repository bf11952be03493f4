#include "runtime/host/ThreadPool.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sched.h>
#include <string>
#include <atomic>
#include <exception>
#include <memory>
#include <system_error>

namespace tensorc {

namespace {

// A cgroup CPU quota in CPUs (rounded up), or 0 if none: v2 "cpu.max" holds
// "QUOTA PERIOD" or "max PERIOD"; v1 has cfs_quota_us / cfs_period_us.
unsigned cgroupCpuQuota() {
  auto quota = [](double q, double period) {
    return q > 0 && period > 0 ? unsigned(std::ceil(q / period)) : 0u;
  };
  if (std::ifstream v2("/sys/fs/cgroup/cpu.max"); v2) {
    std::string q;
    double period = 0;
    if (v2 >> q >> period && q != "max")
      return quota(std::atof(q.c_str()), period);
    return 0;
  }
  std::ifstream q1("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p1("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double q = 0, period = 0;
  if (q1 >> q && p1 >> period)
    return quota(q, period);
  return 0;
}

} // namespace

unsigned availableCpus() {
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    n = std::max(1, CPU_COUNT(&set));
  if (unsigned q = cgroupCpuQuota(); q > 0)
    n = std::min(n, q);
  return n;
}

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = availableCpus();
  check(threads <= kMaxThreads, std::to_string(threads) + " threads asked for: at most " +
                                    std::to_string(kMaxThreads));
  for (unsigned i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { work(); });
    } catch (const std::system_error &e) {
      // The threads started so far stop and are joined (a pool left half
      // made hung the process); the caller gets why.
      stop();
      fail("cannot start thread " + std::to_string(i + 1) + " of " + std::to_string(threads) + " (" + e.what() +
           "): ask for fewer threads");
    }
  }
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread &t : workers_)
    if (t.joinable())
      t.join();
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::work() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty())
        return; // stopping with nothing left
      task = std::move(tasks_.front());
      tasks_.pop();
    }
    task();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(int64_t(size()), (n + grain - 1) / grain);
  if (chunks <= 1) {
    body(0, n);
    return;
  }
  struct Shared {
    std::atomic<int64_t> remaining;
    std::mutex mutex;
    std::condition_variable done;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  shared->remaining = chunks;
  int64_t per = (n + chunks - 1) / chunks;
  auto run = [shared, &body, per, n](int64_t c) {
    int64_t begin = c * per, end = std::min(n, begin + per);
    try {
      if (begin < end)
        body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(shared->mutex);
      if (!shared->error)
        shared->error = std::current_exception();
    }
    if (--shared->remaining == 0) {
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->done.notify_all();
    }
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t c = 1; c < chunks; ++c)
      tasks_.push([run, c] { run(c); });
  }
  ready_.notify_all();
  run(0); // the caller works too
  std::unique_lock<std::mutex> lock(shared->mutex);
  shared->done.wait(lock, [&] { return shared->remaining == 0; });
  if (shared->error)
    std::rethrow_exception(shared->error);
}

} // namespace tensorc
