// Sharding propagation: from the shardings a graph file or the tracing API
// puts on some inputs and nodes to one sharding of every value.
//
// Sweeps over the nodes, forward then backward, until nothing changes. At
// each node the factors (ShardingRules.h) take their axes from its
// operands' shardings first (how the data already lies: no movement), then
// its results'; the first tensor that splits a factor over axes not yet used
// by another of the node's factors decides it; factors that must stay whole
// get none. A value without a sharding takes the factors' axes; a value the
// propagation decided earlier takes them too where they only split it
// further (so an optimizer's sharded moments make the gradient that feeds
// them sharded, back through the elementwise math); annotated values never
// change. Where a value's sharding differs from what a node needs, the
// partitioner reshards (docs/sharding.md, "Propagation"). An op without a
// rule makes its results replicated.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/sharding/ShardingRules.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace tensorc::sharding {

// Per tensor dim, the mesh axes that split it (major first); empty: whole.
using DimAxes = std::vector<std::vector<std::string>>;

struct ShardingPlan {
  Mesh mesh;
  std::map<std::string, DimAxes> values; // by canonical reference: "x", "h:0"
  std::set<std::string> gatheredAtUse;    // inputs read whole (Sharding::gatheredAtUse)
  std::map<std::string, DimAxes> outputTargets; // outputs resharded where they leave (Sharding::atOutput)
  const DimAxes &of(const std::string &canonicalRef) const;
};

// "h" -> "h:0" for node results; input names stay.
std::string canonicalRef(const Graph &graph, const std::string &ref);

// The graph's shardings propagated to every value. The graph declares
// exactly one mesh, which every sharding names. Throws Error otherwise, and
// for graphs that already contain collectives (they are per-device programs).
ShardingPlan propagateShardings(const Graph &graph, const GraphAnalysis &analysis);

// The axes of each factor of `rule` from the tensors' shardings (operands
// first, then results; nullptr: not decided, or not a value), as the
// propagation decides them.
std::vector<std::vector<std::string>> assignFactors(const FactorRule &rule,
                                                    const std::vector<const DimAxes *> &results,
                                                    const std::vector<const DimAxes *> &operands);

// A sharding's text: "[data, _]", "[{data, model}, _]".
std::string dimAxesStr(const DimAxes &dims);

} // namespace tensorc::sharding
