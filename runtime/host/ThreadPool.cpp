#include "runtime/host/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>

namespace tensorc {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

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
