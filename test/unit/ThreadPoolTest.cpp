// The runtime's thread pool: chunks cover the range exactly once, several
// callers share one pool, exceptions reach the caller.
#include "runtime/host/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

using namespace tensorc;

TEST(ThreadPool, CoversTheRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 2, 7, 1000, 4097}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallelFor(n, 3, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        hits[size_t(i)]++;
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[size_t(i)].load(), 1) << n << " " << i;
  }
  pool.parallelFor(0, 1, [](int64_t, int64_t) { FAIL() << "no work for an empty range"; });
}

TEST(ThreadPool, ConcurrentCallersShareThePool) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 8; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r)
        pool.parallelFor(100, 1, [&](int64_t b, int64_t e) { total += e - b; });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(total.load(), 8 * 50 * 100);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallelFor(10, 1,
                                [](int64_t b, int64_t) {
                                  if (b > 0)
                                    throw std::runtime_error("chunk failed");
                                }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallelFor(10, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 10);
}
