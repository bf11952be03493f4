// The runtime's autotuner (issue 15), backend-neutral: a backend describes a
// tunable launch (a TuneSite: the kernel's content hash, the shape bucket,
// its candidates with the heuristic's choice first) and how to run one
// candidate; the autotuner answers which candidate to run, from its memory,
// the autotune cache (runtime/tune/TuneDb) or, in max-autotune mode, by
// measuring them now. A candidate may win only if its outputs equal the
// default candidate's (the backend's comparison); a wrong one is recorded
// as rejected with the reason. docs/autotune.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tensorc::tune {
class TuneDb;
struct TuneCandidate;
}

namespace tensorc::runtime {

enum class AutotuneMode {
  Default, // the cache's winner where it has one, else the heuristic; never measures
  Max,     // measures every launch the cache does not know, stores the result
  Strict,  // a launch the cache does not know is an error (production)
  // Re-runs each cached winner beside the default on this device and
  // reports winners that are wrong or slower than the default (which then
  // runs); VerifyDelete also deletes those entries. Misses: the heuristic.
  Verify,
  VerifyDelete,
};
// "default", "max-autotune", "strict", "verify", "verify-delete"; throws
// Error otherwise.
AutotuneMode parseAutotuneMode(const std::string &name);

// A size's shape bucket, "2^k" with 2^k the least power of two >= n: sizes
// in one bucket share a tuning result (no re-tuning per size).
std::string powerOfTwoBucket(int64_t n);

struct TuneSite {
  std::string kernel; // content hash (hex) of what runs, with the step's symbols
  std::string label;  // the step(s), for people
  std::string bucket; // sizes rounded up to powers of two
  std::string dtype;
  std::vector<std::string> candidates; // [0]: the heuristic's choice
};

// How a backend runs one candidate of a site, on the run's real operands.
struct TrialHooks {
  std::function<void(size_t)> run;  // runs candidate k to completion
  std::function<void()> snapshot;   // keeps the outputs as the reference
  std::function<void()> poison;     // overwrites the outputs (unwritten elements then differ)
  std::function<std::string()> compare; // "" if the outputs equal the reference, else why not
  std::function<void()> restore;    // puts the reference back
  std::function<double()> nowUs;    // a clock for this device (synchronizes if it must)
  // Optional: runs candidate k once and returns its device time (us),
  // measured on the device (CUDA events around it, the L2 cache flushed
  // first): then trials time with it instead of run() between nowUs().
  std::function<double(size_t)> timeUs;
};

class Autotuner {
public:
  // `dbPath` empty: the default (TuneDb::defaultPath()). `device` and
  // `versions` complete every key. Default mode works without a usable
  // database (heuristics); Max and Strict throw Error if it cannot be opened.
  Autotuner(AutotuneMode mode, const std::string &dbPath, std::string device, std::string versions);
  ~Autotuner();
  AutotuneMode mode() const { return mode_; }

  // The candidate to run at `site` (an index into site.candidates). Strict:
  // throws Error naming the kernel and bucket on a cache miss. `hooks` are
  // only used when measuring.
  size_t choose(const TuneSite &site, const TrialHooks &hooks);

  // Measurements made by this autotuner (for progress and tests).
  size_t tunedCount() const { return tuned_; }
  // How many launch sites the executable has that may be tuned (the
  // progress line's total).
  void setSites(size_t sites) { sites_ = sites; }

  // Verify modes: one line per cached winner checked.
  struct Verdict {
    std::string label, bucket, winner;
    double winnerUs = 0, defaultUs = 0;
    std::string problem; // "" when the winner is right and not slower
    bool deleted = false;
    bool measured = true; // false: the cached winner is the default itself
  };
  const std::vector<Verdict> &verdicts() const { return verdicts_; }

private:
  // Default mode without its cache: drops it and warns once per process and
  // reason.
  void withoutCache(const std::string &why);
  size_t measure(const TuneSite &site, const TrialHooks &hooks);
  // Runs candidates `which` (which[0] the reference, compared against by
  // the others), times the valid ones and restores the reference outputs.
  std::vector<tune::TuneCandidate> trial(const TuneSite &site, const TrialHooks &hooks,
                                         const std::vector<size_t> &which);
  std::vector<Verdict> verdicts_;
  AutotuneMode mode_;
  std::string device_, versions_;
  std::unique_ptr<tune::TuneDb> db_;
  std::map<std::string, size_t> memo_; // kernel + bucket -> candidate
  std::mutex mutex_;
  size_t tuned_ = 0, sites_ = 0;
  double startUs_ = -1;
};

} // namespace tensorc::runtime
