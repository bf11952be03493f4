// Decomposition: composite ops rewritten into primitives (elementwise ops,
// reductions, matmul, shape ops), for backends without a dedicated kernel.
// The decomposed and whole forms compute the same function (tested on the
// interpreter); a backend with a kernel for an op leaves it out of `ops`.
#pragma once

#include "compiler/graph/Graph.h"

#include <set>
#include <string>

namespace tensorc::transforms {

// The ops decomposeGraph knows how to decompose.
const std::set<std::string> &decomposableOps();

// Rewrites every node whose op is in `ops` (default: all decomposable ops).
// Nodes keep their names for their final value, so references stay valid.
// `keepFusedAttention`: attention the CUDA backend's fused kernels take
// stays whole (ir/core/FusedAttention.h). Where `ops` leaves logsumexp out
// (the backend reduces it in one pass), softmax, log_softmax and
// cross_entropy decompose into it instead of into max + sum(exp).
Graph decomposeGraph(const Graph &graph, const std::set<std::string> &ops = {},
                     bool keepFusedAttention = false);

} // namespace tensorc::transforms
