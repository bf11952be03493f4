// Run-time checks for compiled code. The interpreter raises an error for
// inputs that make an op undefined (docs/ops.md: a cross_entropy target
// outside the classes, an embedding/gather/index_select index out of range,
// max/min/argmax/argmin over an empty range). A compiled kernel cannot stop
// in the middle of a run, and clamps indices so that it never reads out of
// bounds; without a check it would return an answer where the interpreter
// refuses. So each such index gets a small computation appended to the graph
// as an extra output: an i32 scalar that is 1 when some element is out of
// range, its message in Graph::checks. The code generators list these
// outputs as the artifact's checks (not user outputs) and the runtime raises
// the message, naming the node, after the run (the interpreter too, for a
// graph that carries checks). An empty range known at compile time is a
// compile error.
//
// A sharded program is checked before SPMD partitioning (the global ops'
// index ranges; a partitioned vocab-parallel lookup reads only in-range
// rows by construction) and keeps its checks, each device checking its own
// values; a graph that already carries checks is returned unchanged.
#pragma once

#include "compiler/graph/Graph.h"

#include <string>

namespace tensorc::transforms {

// `graph` with one output per check appended. Throws Error naming the node
// for a reduction over a static empty range.
Graph addRunChecks(const Graph &graph, const std::string &where);

} // namespace tensorc::transforms
