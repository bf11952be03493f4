// The sharding options `tensorc shard` and `tensorc compile` share: a mesh
// (`data=2,model=2`), presets (ddp, fsdp) and annotations (`w1=_,model`).
#pragma once

#include "compiler/sharding/SpmdPartition.h"

#include <string>
#include <vector>

namespace tensorc::driver {

// Puts the mesh (unless the graph declares the same one) and the shardings
// on `graph`: annotations by input or node name first, then the presets for
// what they leave. Throws Error naming the bad option.
void applyShardOptions(Graph &graph, const std::string &mesh, const std::vector<std::string> &presets,
                       const std::vector<std::string> &annotations);

// The per-device program of `graph` under the options: applyShardOptions,
// the global program's run-time checks (unless `runChecks` is false:
// compiler/transforms/RunChecks.h), propagation, SPMD partitioning.
// `graph` keeps the shardings and checks put on it. Throws Error.
sharding::SpmdProgram partitionWithOptions(Graph &graph, const std::string &mesh,
                                           const std::vector<std::string> &presets,
                                           const std::vector<std::string> &annotations, bool runChecks);

} // namespace tensorc::driver
