// SPMD partitioning: a global program and its sharding plan become the
// program every device runs, with local shapes and the communication made
// explicit as collectives (docs/sharding.md). Each node runs on its
// operands resharded to what its factor rule needs; a factor split only in
// operands (a matmul's inner dim, a reduced axis) leaves a partial result,
// completed where a consumer or an output needs the whole value: by a
// reduce_scatter when the target splits a dim over exactly the partial axis,
// else an all_reduce. Resharding gathers (all_gather) before it slices
// (all_slice, which moves no data). A plain symbolic dim split G ways that
// G does not divide (a batch B over `data`) is the per-device size: the
// global batch is G*B, and the per-device program keeps the symbol B.
#pragma once

#include "compiler/sharding/Propagation.h"
#include "runtime/host/HostTensor.h"

#include <string>
#include <vector>

namespace tensorc::sharding {

struct Communication {
  std::string node;    // the global node (or output) that needed it
  std::string value;   // the global value resharded
  std::string collective; // "all_gather over [data] along dim 0"
  int64_t bytes = 0;   // the collective's result per device; -1 if symbolic
};

struct SpmdProgram {
  Graph local; // the per-device program; inputs and outputs keep their names
  std::vector<DimAxes> inputShardings, outputShardings; // in the graph's order
  std::vector<Communication> communication;
};

struct PartitionOptions {
  // Every output whole on every device (tests; a caller that wants the
  // global values without assembling shards).
  bool replicateOutputs = false;
};

SpmdProgram partitionSpmd(const Graph &global, const GraphAnalysis &analysis,
                          const ShardingPlan &plan, const PartitionOptions &options = {});

// A device's piece of a global value under `dims` of `mesh` (inputs for
// the interpreter, expected values in tests).
HostTensor shardOf(const HostTensor &global, const DimAxes &dims, const Mesh &mesh, int64_t device);

} // namespace tensorc::sharding
