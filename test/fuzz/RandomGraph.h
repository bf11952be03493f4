// Random valid graphs drawn from the op schema, for differential testing
// (the interpreter against each backend). A graph is built op by op through
// the tracer, which type-checks every call: a drawn call the shape rules
// refuse is simply drawn again, so every graph returned is valid.
#pragma once

#include "compiler/graph/Graph.h"

#include <cstdint>

namespace tensorc::fuzz {

struct RandomGraphOptions {
  int minNodes = 2, maxNodes = 10;
  int maxRank = 4;
  int64_t maxElements = 600; // per value, so a graph runs in milliseconds
  bool lowPrecision = true;  // f16/bf16 inputs and casts
};

// The same seed gives the same graph.
Graph randomGraph(uint64_t seed, const RandomGraphOptions &options = {});

} // namespace tensorc::fuzz
