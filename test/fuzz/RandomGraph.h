// Random valid graphs drawn from the op schema, for differential testing
// (the interpreter against each backend). A graph is built op by op through
// the tracer, which type-checks every call: a drawn call the shape rules
// refuse is simply drawn again, so every graph returned is valid.
#pragma once

#include "compiler/graph/GraphAnalysis.h"

#include <cstdint>

namespace tensorc::fuzz {

struct RandomGraphOptions {
  int minNodes = 2, maxNodes = 10;
  int maxRank = 4;
  int64_t maxElements = 600; // per value, so a graph runs in milliseconds
  bool lowPrecision = true;  // f16/bf16 inputs and casts
  // Every float is f64 (gradient checks against finite differences, which
  // need the precision), and `pow` takes only literal exponents (its
  // gradient with respect to a tensor exponent is log(base): nan for a
  // negative base where the value itself is finite, as in PyTorch).
  bool onlyF64 = false;
};

// The same seed gives the same graph.
Graph randomGraph(uint64_t seed, const RandomGraphOptions &options = {});

// The tolerance a backend's output is held to against the interpreter: that
// of the least precise float dtype any value it depends on has (an f32 mean
// cast to f64 carries f32 rounding), per runtime/host/Parity.
double outputTolerance(const Graph &g, const GraphAnalysis &a, const std::string &output,
                       DType dtype);

} // namespace tensorc::fuzz
