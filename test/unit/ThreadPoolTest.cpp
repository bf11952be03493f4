// The runtime's thread pool: chunks cover the range exactly once, several
// callers share one pool, exceptions reach the caller.
#include "runtime/host/ThreadPool.h"

#include "ir/core/Error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
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

// More threads than a pool runs, or threads the system will not start: an
// error saying so, never a process left hanging (issue 50 item 6: `tensorc
// run --threads 1000` under `ulimit -v` hung).
#if defined(__SANITIZE_ADDRESS__)
#define TC_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_UNDER_ASAN 1
#endif
#endif

TEST(ThreadPool, ThreadsThatCannotStartAreAnError) {
  EXPECT_THROW(ThreadPool(ThreadPool::kMaxThreads + 1), Error);
#ifdef TC_UNDER_ASAN
  GTEST_SKIP() << "an address-space limit cannot be set under AddressSanitizer (its shadow memory)";
#endif
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Address space for a few thread stacks only (8 MiB each by default).
    struct rlimit limit;
    ::getrlimit(RLIMIT_AS, &limit);
    long pages = 0;
    if (FILE *f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1)
        pages = 0;
      std::fclose(f);
    }
    limit.rlim_cur = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + (64u << 20);
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      ThreadPool pool(1000);
      std::_Exit(3); // all started: the limit did not bite
    } catch (const Error &e) {
      std::_Exit(std::string(e.what()).find("cannot start thread") != std::string::npos ? 0 : 4);
    } catch (...) {
      std::_Exit(5);
    }
  }
  int status = 0;
  for (int waited = 0; waited < 300 && ::waitpid(child, &status, WNOHANG) == 0; ++waited)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (::waitpid(child, &status, WNOHANG) == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    FAIL() << "the pool hung when a thread could not start";
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: every thread started; 4: another error; 5: not an Error";
}
