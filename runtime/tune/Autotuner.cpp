#include "runtime/tune/Autotuner.h"

#include "ir/core/Error.h"
#include "runtime/tune/TuneDb.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <cstdio>
#include <unistd.h>

namespace tensorc::runtime {

namespace {

// Timed runs per candidate after one warm-up; fewer when a run is slow
// (the trial budget per candidate, microseconds).
constexpr int kTrials = 7;
constexpr double kTrialBudgetUs = 200000;
// A candidate replaces the default only if its median is this much lower:
// medians of 7 runs move by 1-2% between trials of the same kernel, and a
// winner within that noise made a cross-entropy step 4% slower in
// sequence than its default (H100, session 31).
constexpr double kRequiredGain = 0.97;
// The winner is then timed again against the default, the two alternating
// run by run: a candidate's runs all come after the default's in its trial,
// so a drift of the GPU's clocks between them (or a neighbour's load) can
// fake a gain; alternating puts any drift on both. The gain must hold there
// too.
constexpr int kConfirmationPairs = 5;

// One timed run of candidate k: device time where the backend has it.
double timeOnce(const TrialHooks &hooks, size_t k) {
  if (hooks.timeUs)
    return hooks.timeUs(k);
  double start = hooks.nowUs();
  hooks.run(k);
  return hooks.nowUs() - start;
}

double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string microseconds(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", us);
  return buf;
}

std::string hostName() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
}

int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

std::string powerOfTwoBucket(int64_t n) {
  int k = 0;
  while (k < 62 && (int64_t(1) << k) < n)
    ++k;
  return "2^" + std::to_string(k);
}

AutotuneMode parseAutotuneMode(const std::string &name) {
  if (name.empty() || name == "default")
    return AutotuneMode::Default;
  if (name == "max-autotune")
    return AutotuneMode::Max;
  if (name == "strict")
    return AutotuneMode::Strict;
  if (name == "verify")
    return AutotuneMode::Verify;
  if (name == "verify-delete")
    return AutotuneMode::VerifyDelete;
  fail("unknown autotune mode '" + name + "' (default, max-autotune, strict, verify, verify-delete)");
}

Autotuner::Autotuner(AutotuneMode mode, const std::string &dbPath, std::string device, std::string versions)
    : mode_(mode), device_(std::move(device)), versions_(std::move(versions)) {
  try {
    db_ = std::make_unique<tune::TuneDb>(dbPath);
    if (!db_->movedAside().empty())
      std::fprintf(stderr, "tensorc: autotune cache %s was damaged: moved aside to %s\n", db_->path().c_str(),
                   db_->movedAside().c_str());
  } catch (const Error &e) {
    // Default mode runs on heuristics without a cache; the others need it.
    if (mode_ != AutotuneMode::Default)
      fail(std::string("autotune: ") + e.what());
    withoutCache(e.what());
  }
}

void Autotuner::withoutCache(const std::string &why) {
  db_.reset();
  // Once per process and cache path: every artifact a process loads opens
  // the same cache.
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(why).second)
    std::fprintf(stderr, "tensorc: warning: autotune cache not used (%s): kernels run on their default choices\n",
                 why.c_str());
}

Autotuner::~Autotuner() {
  if (tuned_ && ::isatty(2))
    std::fprintf(stderr, "\n");
  if (mode_ == AutotuneMode::Verify || mode_ == AutotuneMode::VerifyDelete) {
    size_t bad = 0;
    for (const Verdict &v : verdicts_) {
      bad += !v.problem.empty();
      if (!v.measured) {
        std::fprintf(stderr, "autotune verify: %s [%s]: %s is the default: nothing to check\n", v.label.c_str(),
                     v.bucket.c_str(), v.winner.c_str());
        continue;
      }
      std::fprintf(stderr, "autotune verify: %s [%s]: %s %.2f us, default %.2f us: %s%s\n", v.label.c_str(),
                   v.bucket.c_str(), v.winner.c_str(), v.winnerUs, v.defaultUs,
                   v.problem.empty() ? "ok" : v.problem.c_str(), v.deleted ? " (deleted)" : "");
    }
    std::fprintf(stderr, "autotune verify: %zu cached entries, %zu ok, %zu wrong or slower\n", verdicts_.size(),
                 verdicts_.size() - bad, bad);
  }
}

size_t Autotuner::choose(const TuneSite &site, const TrialHooks &hooks) {
  if (site.candidates.size() < 2)
    return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  std::string memoKey = site.kernel + "|" + site.bucket + "|" + site.dtype;
  if (auto it = memo_.find(memoKey); it != memo_.end())
    return it->second;
  size_t choice = 0;
  bool known = false;
  tune::TuneKey key{site.kernel, site.bucket, site.dtype, device_, versions_, TENSORC_VERSION};
  std::optional<tune::TuneEntry> e;
  if (db_) {
    try {
      e = db_->lookup(key);
    } catch (const Error &err) {
      // A read-only database, a full disk, a lock held past the timeout:
      // default mode runs without the cache, the others cannot.
      if (mode_ != AutotuneMode::Default)
        fail(std::string("autotune: ") + err.what());
      withoutCache(err.what());
    }
  }
  {
    if (e) {
      auto it = std::find(site.candidates.begin(), site.candidates.end(), e->winner);
      // A winner this build does not offer (another heuristic, a damaged
      // row) is ignored: the heuristic's choice runs, never a guess.
      if (it != site.candidates.end()) {
        choice = size_t(it - site.candidates.begin());
        known = true;
      }
    }
  }
  if (!known && mode_ == AutotuneMode::Strict)
    fail("autotune (strict): no tuning result for kernel " + site.kernel + " (" + site.label + ") at bucket " +
         site.bucket + " (" + site.dtype + ") on " + device_ +
         "; tune it first (--autotune max-autotune) or import a cache (tensorc-tune import)");
  if (!known && mode_ == AutotuneMode::Max)
    choice = measure(site, hooks);
  bool verifying = mode_ == AutotuneMode::Verify || mode_ == AutotuneMode::VerifyDelete;
  if (known && choice == 0 && verifying)
    verdicts_.push_back({site.label, site.bucket, site.candidates[0], 0, 0, "", false, false});
  if (known && choice != 0 && verifying) {
    // Slower by more than 5% (timing noise) counts against the winner.
    std::vector<tune::TuneCandidate> r = trial(site, hooks, {0, choice});
    Verdict v{site.label, site.bucket, site.candidates[choice], r[1].microseconds, r[0].microseconds, "", false, true};
    if (!r[1].rejected.empty())
      v.problem = r[1].rejected;
    else if (r[1].microseconds > 1.05 * r[0].microseconds)
      v.problem = "slower than the default";
    if (!v.problem.empty()) {
      choice = 0;
      if (mode_ == AutotuneMode::VerifyDelete && db_)
        v.deleted = db_->erase(key);
    }
    verdicts_.push_back(v);
  }
  memo_[memoKey] = choice;
  return choice;
}

std::vector<tune::TuneCandidate> Autotuner::trial(const TuneSite &site, const TrialHooks &hooks,
                                                  const std::vector<size_t> &which) {
  // The first candidate's outputs are the reference every other must equal.
  hooks.run(which[0]);
  hooks.snapshot();
  std::vector<tune::TuneCandidate> results;
  double best = 0; // the best median so far
  for (size_t i = 0; i < which.size(); ++i) {
    size_t k = which[i];
    tune::TuneCandidate c{site.candidates[k], 0, ""};
    try {
      if (i > 0) {
        hooks.poison();
        hooks.run(k);
        c.rejected = hooks.compare();
      }
      if (c.rejected.empty()) {
        hooks.run(k); // warm-up
        std::vector<double> times;
        double spent = 0;
        for (int t = 0; t < kTrials && (t < 3 || spent < kTrialBudgetUs); ++t) {
          times.push_back(timeOnce(hooks, k));
          spent += times.back();
          // Pruned early: a first run over twice the best median so far
          // cannot win; its one time is recorded.
          if (t == 0 && best > 0 && times[0] > 2 * best)
            break;
        }
        c.microseconds = median(times);
        best = best > 0 ? std::min(best, c.microseconds) : c.microseconds;
      }
    } catch (const std::exception &e) {
      if (i == 0)
        throw; // the default itself fails: the run fails as it would untuned
      c.rejected = std::string("failed: ") + e.what();
    }
    results.push_back(c);
  }
  hooks.restore();
  return results;
}

size_t Autotuner::measure(const TuneSite &site, const TrialHooks &hooks) {
  if (startUs_ < 0)
    startUs_ = hooks.nowUs();
  std::vector<size_t> all;
  for (size_t k = 0; k < site.candidates.size(); ++k)
    all.push_back(k);
  std::vector<tune::TuneCandidate> results = trial(site, hooks, all);
  size_t best = 0;
  for (size_t k = 1; k < results.size(); ++k)
    if (results[k].rejected.empty() && results[k].microseconds < results[best].microseconds &&
        results[k].microseconds < kRequiredGain * results[0].microseconds)
      best = k;
  if (best != 0) {
    std::vector<double> defaults, winners;
    for (int i = 0; i < kConfirmationPairs; ++i) {
      defaults.push_back(timeOnce(hooks, 0));
      winners.push_back(timeOnce(hooks, best));
    }
    hooks.restore(); // the default's outputs stay the run's results
    const double d = median(defaults), w = median(winners);
    if (!(w < kRequiredGain * d)) {
      results[best].rejected = "not confirmed: " + microseconds(w) + " us against the default's " +
                               microseconds(d) + " us, the two alternating";
      best = 0;
    }
  }
  ++tuned_;
  if (db_) {
    tune::TuneEntry e;
    e.key = {site.kernel, site.bucket, site.dtype, device_, versions_, TENSORC_VERSION};
    e.label = site.label;
    e.winner = site.candidates[best];
    e.candidates = results;
    e.measuredAt = unixSeconds();
    e.host = hostName();
    try {
      db_->store(e);
    } catch (const Error &err) {
      // A full or read-only disk loses the result, never the run.
      std::fprintf(stderr, "tensorc: autotune: cannot store a result: %s\n", err.what());
    }
  }
  if (::isatty(2))
    std::fprintf(stderr, "\rautotune: %zu/%zu kernels tuned, %.1f s, last %s: %s %.1f us (default %.1f us)   ",
                 tuned_, std::max(sites_, tuned_), (hooks.nowUs() - startUs_) / 1e6, site.label.c_str(), site.candidates[best].c_str(),
                 results[best].microseconds, results[0].microseconds);
  return best;
}

} // namespace tensorc::runtime
