// TENSORC_TRACE=FILE: a Chrome-trace / Perfetto JSON of what the runtime
// did (chrome://tracing, ui.perfetto.dev): loading artifacts (NVRTC or the
// kernel cache), and every run's steps with their time (device time from
// CUDA events on the GPU, host time on the CPU), named after the graph
// node or tc kernel each step came from. Written when the process exits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorc::trace {

struct Slice {
  std::string name, category;
  double startUs = 0, durationUs = 0; // microseconds since the process's first event
  int track = 0;                      // 0: host, 1: GPU, 2: GPU communication stream
  std::vector<std::pair<std::string, std::string>> args;
};

// Whether TENSORC_TRACE is set (read once).
bool enabled();
// Microseconds since the trace's origin (a steady clock).
double nowUs();
// Adds slices (thread-safe); a no-op when tracing is off.
void add(Slice slice);
void add(std::vector<Slice> slices);

} // namespace tensorc::trace
