// Constant folding: a node whose operands are all constants is evaluated at
// compile time by the reference interpreter (so folding computes exactly
// what running would) and replaced by a constant. Results above
// `maxElements` stay as computations, so constants never bloat the program.
#pragma once

#include "compiler/graph/Graph.h"

namespace tensorc::transforms {

Graph foldConstants(const Graph &graph, int64_t maxElements = 4096);

} // namespace tensorc::transforms
