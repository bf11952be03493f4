// libFuzzer target: graph files. Any bytes either parse and type-check or
// throw one tensorc::Error; nothing else (no crash, no other exception, no
// sanitizer report). Seeds: examples/*.json and the bad-file corpus.
#include "compiler/graph/GraphAnalysis.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    tensorc::Graph g = tensorc::parseGraphJson(std::string(reinterpret_cast<const char *>(data), size), "fuzz.json");
    tensorc::analyzeGraph(g, "fuzz.json");
  } catch (const tensorc::Error &) {
  }
  return 0;
}
