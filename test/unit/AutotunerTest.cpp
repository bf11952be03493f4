// The autotuner (runtime/core/Autotuner) with a synthetic backend: a
// wrong-but-fast candidate is rejected with its reason and never wins, the
// winner is stored and reused (memory, then the cache in a new process),
// strict mode names the kernel and bucket on a miss, default mode never
// measures, and a cached winner this build does not offer is ignored.
#include "ir/core/Error.h"
#include "runtime/host/Parity.h"
#include "runtime/tune/Autotuner.h"
#include "runtime/tune/Sqlite.h"
#include "runtime/tune/TuneDb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace tensorc;
using namespace tensorc::runtime;

namespace {

// Candidate k "takes" cost[k] microseconds of a fake clock and writes
// output[k] into the one output.
struct FakeBackend {
  std::vector<double> cost;
  std::vector<int> output;
  int out = 0, reference = 0;
  double clock = 0;
  std::vector<int> runs;
  // From this many runs on, candidate k takes later[k] (a GPU whose clocks
  // drift while the candidates are timed in turn); empty: never.
  size_t drift = 0;
  std::vector<double> later;
  TrialHooks hooks() {
    TrialHooks h;
    h.run = [this](size_t k) {
      runs.push_back(int(k));
      clock += !later.empty() && runs.size() > drift ? later[k] : cost[k];
      out = output[k];
    };
    h.snapshot = [this] { reference = out; };
    h.poison = [this] { out = -1; };
    h.compare = [this]() -> std::string {
      return out == reference ? "" : "wrong output: " + std::to_string(out) + " vs " + std::to_string(reference);
    };
    h.restore = [this] { out = reference; };
    h.nowUs = [this] { return clock; };
    return h;
  }
};

TuneSite site() {
  return {"abc123", "softmax k2", "rows=2^10", "f32", {"default", "fast_wrong", "faster", "slow"}};
}

// A tuning database under the temp folder, removed with SQLite's side
// files (-wal, -shm, .lock) when the test ends: declared before the
// Autotuner, it outlives it (removing the file under an open connection
// left the side files behind, one set per run).
struct TempDb {
  std::string path =
      (fs::temp_directory_path() / ("tensorc-autotuner-" + std::to_string(::getpid()) + ".sqlite")).string();
  TempDb() { clear(); }
  ~TempDb() { clear(); }
  void clear() const {
    for (const char *suffix : {"", "-wal", "-shm", "-journal", ".lock"})
      fs::remove(path + suffix);
  }
};

} // namespace

TEST(Autotuner, AWinWithinTimingNoiseKeepsTheDefault) {
  // 2% faster is within the noise of a median of 7: the default stays; 4%
  // faster wins.
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDb temp;
  const std::string &db = temp.path;
  FakeBackend close{{10, 9.8, 20, 30}, {7, 7, 7, 7}};
  Autotuner tuner(AutotuneMode::Max, db, "fake gpu", "v1");
  EXPECT_EQ(tuner.choose(site(), close.hooks()), 0u);
  FakeBackend clear{{10, 9.6, 20, 30}, {7, 7, 7, 7}};
  TuneSite other = site();
  other.kernel = "def456";
  EXPECT_EQ(tuner.choose(other, clear.hooks()), 1u);
}

TEST(Autotuner, AWinNotConfirmedAlternatingKeepsTheDefault) {
  // "faster" looks 10% faster in its trial, timed after the default's
  // runs, because everything sped up meanwhile; timed alternating with the
  // default, it is not: the default stays, and the entry says why.
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDb temp;
  const std::string &db = temp.path;
  FakeBackend drifting{{10, 1, 9, 30}, {7, 8, 7, 7}};
  drifting.drift = 10; // the default's reference run, warm-up and 7 timed runs, then faster
  drifting.later = {9, 1, 9, 30};
  {
    Autotuner tuner(AutotuneMode::Max, db, "fake gpu", "v1");
    EXPECT_EQ(tuner.choose(site(), drifting.hooks()), 0u);
    EXPECT_EQ(drifting.out, 7);
  }
  tune::TuneDb check(db);
  std::vector<tune::TuneEntry> es = check.list();
  ASSERT_EQ(es.size(), 1u);
  EXPECT_EQ(es[0].winner, "default");
  EXPECT_EQ(es[0].candidates[2].microseconds, 9);
  EXPECT_EQ(es[0].candidates[2].rejected, "not confirmed: 9.00 us against the default's 9.00 us, the two alternating");
}

TEST(Autotuner, CheckedCandidatesWinAndPersist) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDb temp;
  const std::string &db = temp.path;
  FakeBackend b{{10, 1, 5, 20}, {7, 8, 7, 7}};
  {
    Autotuner tuner(AutotuneMode::Max, db, "fake gpu", "v1");
    EXPECT_EQ(tuner.choose(site(), b.hooks()), 2u); // "faster"; "fast_wrong" is rejected
    EXPECT_EQ(b.out, 7);                              // the reference is left in place
    EXPECT_EQ(tuner.tunedCount(), 1u);
    // "slow" (20 us, over twice the best 5 us) is pruned after one timed
    // run: its check, its warm-up and that run.
    EXPECT_EQ(std::count(b.runs.begin(), b.runs.end(), 3), 3);
    // Its check, warm-up, 7 timed runs, then 5 alternating with the default.
    EXPECT_EQ(std::count(b.runs.begin(), b.runs.end(), 2), 14);
    EXPECT_EQ(std::vector<int>(b.runs.end() - 10, b.runs.end()), (std::vector<int>{0, 2, 0, 2, 0, 2, 0, 2, 0, 2}));
    size_t runs = b.runs.size();
    EXPECT_EQ(tuner.choose(site(), b.hooks()), 2u); // remembered: nothing runs
    EXPECT_EQ(b.runs.size(), runs);
  }
  tune::TuneDb check(db);
  std::vector<tune::TuneEntry> es = check.list();
  ASSERT_EQ(es.size(), 1u);
  EXPECT_EQ(es[0].winner, "faster");
  EXPECT_EQ(es[0].candidates[1].rejected, "wrong output: 8 vs 7");
  EXPECT_DOUBLE_EQ(es[0].candidates[2].microseconds, 5);
  EXPECT_EQ(es[0].key.device, "fake gpu");

  // Another process (a new autotuner): strict and default read the cache
  // and measure nothing.
  b.runs.clear();
  Autotuner strict(AutotuneMode::Strict, db, "fake gpu", "v1");
  EXPECT_EQ(strict.choose(site(), b.hooks()), 2u);
  Autotuner byDefault(AutotuneMode::Default, db, "fake gpu", "v1");
  EXPECT_EQ(byDefault.choose(site(), b.hooks()), 2u);
  EXPECT_TRUE(b.runs.empty());

  // Strict on another device: a miss is an error naming kernel and bucket.
  Autotuner other(AutotuneMode::Strict, db, "other gpu", "v1");
  try {
    other.choose(site(), b.hooks());
    ADD_FAILURE() << "strict mode measured";
  } catch (const Error &e) {
    std::string what = e.what();
    EXPECT_NE(what.find("no tuning result for kernel abc123 (softmax k2) at bucket rows=2^10"), std::string::npos)
        << what;
  }
  // Default mode on a miss: the heuristic's choice, nothing measured.
  Autotuner otherDefault(AutotuneMode::Default, db, "other gpu", "v1");
  EXPECT_EQ(otherDefault.choose(site(), b.hooks()), 0u);
  EXPECT_TRUE(b.runs.empty());

  // A cached winner this build does not offer is ignored.
  TuneSite fewer = site();
  fewer.candidates = {"default", "slow"};
  Autotuner byDefault2(AutotuneMode::Default, db, "fake gpu", "v1");
  EXPECT_EQ(byDefault2.choose(fewer, b.hooks()), 0u);
}

TEST(Autotuner, VerifyFindsWrongAndSlowerWinners) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDb temp;
  const std::string &db = temp.path;
  auto store = [&](const std::string &kernel, const std::string &winner) {
    tune::TuneDb d(db);
    tune::TuneEntry e;
    e.key = {kernel, "rows=2^10", "f32", "fake gpu", "v1", TENSORC_VERSION};
    e.label = kernel;
    e.winner = winner;
    e.candidates = {{winner, 1, ""}};
    d.store(e);
  };
  store("wrong", "fast_wrong"); // as an imported or stale entry could claim
  store("slower", "slow");
  store("good", "faster");
  FakeBackend b{{10, 1, 5, 20}, {7, 8, 7, 7}};
  auto at = [](const std::string &kernel) {
    TuneSite s = site();
    s.kernel = kernel;
    return s;
  };
  {
    Autotuner verify(AutotuneMode::VerifyDelete, db, "fake gpu", "v1");
    EXPECT_EQ(verify.choose(at("wrong"), b.hooks()), 0u); // the default runs instead
    EXPECT_EQ(b.out, 7);
    EXPECT_EQ(verify.choose(at("slower"), b.hooks()), 0u);
    EXPECT_EQ(verify.choose(at("good"), b.hooks()), 2u);
    ASSERT_EQ(verify.verdicts().size(), 3u);
    EXPECT_EQ(verify.verdicts()[0].problem, "wrong output: 8 vs 7");
    EXPECT_TRUE(verify.verdicts()[0].deleted);
    EXPECT_EQ(verify.verdicts()[1].problem, "slower than the default");
    EXPECT_EQ(verify.verdicts()[2].problem, "");
    EXPECT_DOUBLE_EQ(verify.verdicts()[2].winnerUs, 5);
    EXPECT_DOUBLE_EQ(verify.verdicts()[2].defaultUs, 10);
  }
  tune::TuneDb d(db);
  std::vector<tune::TuneEntry> left = d.list();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].key.kernel, "good");
  EXPECT_EQ(parseAutotuneMode("verify"), AutotuneMode::Verify);
}

TEST(Autotuner, FailingCandidatesAreRejectedNotFatal) {
  if (!sqlite::available())
    GTEST_SKIP() << sqlite::unavailableReason();
  TempDb temp;
  const std::string &db = temp.path;
  FakeBackend b{{10, 1}, {7, 7}};
  TrialHooks h = b.hooks();
  auto run = h.run;
  h.run = [run](size_t k) {
    if (k == 1)
      throw Error("launch failed: too many resources requested");
    run(k);
  };
  Autotuner tuner(AutotuneMode::Max, db, "fake gpu", "v1");
  EXPECT_EQ(tuner.choose({"k", "l", "b", "f32", {"default", "broken"}}, h), 0u);
  tune::TuneDb check(db);
  EXPECT_EQ(check.list()[0].candidates[1].rejected, "failed: launch failed: too many resources requested");
  EXPECT_THROW(parseAutotuneMode("max"), Error);
}

// Candidates are compared norm-wise (runtime/host/Parity.h): rounding
// relative to the tensor's largest magnitude passes where an element that
// cancels to near 0 would fail element-wise, while a wrong or unwritten
// element still fails.
TEST(Autotuner, CandidatesAreComparedRelativeToTheLargestMagnitude) {
  tensorc::HostTensor want(tensorc::DType::BF16, {4}), got(tensorc::DType::BF16, {4});
  const double values[4] = {40.0, -2.109375, 0.5, 1.0};
  for (int64_t i = 0; i < 4; ++i) {
    want.setF(i, values[i]);
    got.setF(i, values[i]);
  }
  got.setF(1, 2.1875 - 4.375); // -2.1875: 3.7% of the element, 0.2% of the largest
  EXPECT_FALSE(tensorc::parityMismatch(got, want).empty());
  EXPECT_EQ(tensorc::candidateMismatch(got, want), "");
  got.setF(2, 2.5); // off by 2: 5% of the largest
  EXPECT_NE(tensorc::candidateMismatch(got, want).find("element 2"), std::string::npos);
  got.setF(2, std::nan(""));
  EXPECT_NE(tensorc::candidateMismatch(got, want).find("element 2"), std::string::npos);
  // Below a largest magnitude of 1, the tolerance is absolute (as parity's).
  tensorc::HostTensor small(tensorc::DType::F32, {2}), close(tensorc::DType::F32, {2});
  small.setF(0, 1e-3), small.setF(1, 0.25), close.setF(0, 1e-3 + 1e-4), close.setF(1, 0.25);
  EXPECT_EQ(tensorc::candidateMismatch(close, small), "");
  close.setF(0, 1e-3 + 1e-3);
  EXPECT_FALSE(tensorc::candidateMismatch(close, small).empty());
}
