#include "runtime/host/Trace.h"

#include "runtime/host/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tensorc::trace {
namespace {

// Bounds memory in long runs: later slices are counted, not kept.
constexpr size_t kMaxSlices = 1 << 20;

struct Log {
  std::string path;
  std::mutex mutex;
  std::vector<Slice> slices;
  size_t dropped = 0;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();

  Log() {
    const char *p = std::getenv("TENSORC_TRACE");
    path = p ? p : "";
  }
  ~Log() {
    if (path.empty() || slices.empty())
      return;
    nlohmann::json events = nlohmann::json::array();
    for (int track : {0, 1, 2})
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", track},
                        {"args", {{"name", track == 0   ? "host"
                                           : track == 1 ? "GPU (device time)"
                                                        : "GPU communication stream (NCCL)"}}}});
    for (const Slice &s : slices) {
      nlohmann::json args = nlohmann::json::object();
      for (const auto &[k, v] : s.args)
        args[k] = v;
      events.push_back({{"ph", "X"}, {"name", s.name}, {"cat", s.category}, {"pid", 1},
                        {"tid", s.track}, {"ts", s.startUs}, {"dur", s.durationUs}, {"args", args}});
    }
    nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
    if (dropped)
      doc["otherData"] = {{"dropped_slices", dropped}};
    try {
      writeFileAtomically(path, doc.dump(1));
    } catch (const std::exception &e) {
      std::fprintf(stderr, "tensorc: TENSORC_TRACE: %s\n", e.what());
    }
  }
};

Log &log() {
  static Log l;
  return l;
}

} // namespace

bool enabled() { return !log().path.empty(); }

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - log().origin)
      .count();
}

void add(Slice slice) {
  if (!enabled())
    return;
  Log &l = log();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (l.slices.size() < kMaxSlices)
    l.slices.push_back(std::move(slice));
  else
    ++l.dropped;
}

void add(std::vector<Slice> slices) {
  for (Slice &s : slices)
    add(std::move(s));
}

} // namespace tensorc::trace
