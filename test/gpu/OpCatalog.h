// Named graphs covering every op (several dtypes) and the example models,
// for the CUDA backend's tests.
#pragma once

#include "compiler/graph/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace tensorc::gpu {

std::vector<std::pair<std::string, Graph>> opGraphs();
// `root`: the source tree (examples/, test/).
std::vector<std::pair<std::string, Graph>> modelGraphs(const std::string &root);

// Large static sizes (about a million elements): grid limits and tails.
std::vector<std::pair<std::string, Graph>> largeGraphs();
// The joint forward+backward graph of every differentiable f32 op graph,
// and precision cases (offset_*).
std::vector<std::pair<std::string, Graph>> backwardGraphs();

// A tolerance tighter than the dtype's default for a case (negative: the
// default): the precision cases check digits the default would not see.
double caseTolerance(const std::string &name);

} // namespace tensorc::gpu
