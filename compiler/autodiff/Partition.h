// Splitting a joint forward+backward graph into a forward graph and a
// backward graph with an explicit list of saved tensors between them.
//
// What to save and what to recompute is chosen by a minimum cut, as in
// AOTAutograd's min-cut rematerialization: the flow network has one edge per
// forward value whose capacity is the bytes of saving it, and the cut
// separating the inputs from the backward's needs with the fewest bytes is
// the saved set. Cheap ops (elementwise, views, creation) may be recomputed
// in the backward; expensive ones (matmul, conv, attention, reductions) may
// not, unless a memory budget asks for more recomputation (automatic
// activation checkpointing).
#pragma once

#include "compiler/autodiff/Autodiff.h"
#include "compiler/graph/GraphAnalysis.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorc::autodiff {

struct PartitionOptions {
  // Saved bytes allowed, measured at `dims`; nullopt: the minimum-cut default.
  std::optional<int64_t> memoryBudget;
  // Representative sizes of symbolic dims for costs; unlisted symbols take
  // min(their upper bound, 64).
  std::map<std::string, int64_t> dims;
  // Save everything the backward reads from the forward (no recomputation).
  bool saveAll = false;
};

struct SavedTensor {
  std::string ref;  // the value in the joint graph ("h", "split0:1")
  std::string name; // its name in both graphs ("h", "split0_1")
  TensorSpec spec;
  Dim bytes;       // symbolic bytes
  int64_t bytesAt; // bytes at the representative dims
};

struct PartitionResult {
  Graph forward;  // inputs -> forward outputs, then the saved tensors
  Graph backward; // primal inputs it reads, saved tensors, cotangents -> gradients
  std::vector<SavedTensor> saved;
  std::vector<std::string> recomputed;        // forward nodes the backward computes again
  int64_t savedBytes = 0;                     // at the representative dims
  int64_t recomputeFlops = 0;                 // at the representative dims
  std::vector<std::string> extraRecomputable; // expensive nodes allowed to recompute for the budget
  bool budgetMet = true;
  std::map<std::string, int64_t> dims; // the representative dims used
};

PartitionResult partitionJointGraph(const Graph &forwardGraph, const JointGraph &joint,
                                    const PartitionOptions &options = {});

// A human-readable report: saved tensors with shapes and bytes, recompute
// FLOPs, the recomputed nodes, the budget outcome.
std::string partitionReport(const PartitionResult &result);

// Estimated FLOPs of one node at concrete sizes (for reports and costs).
int64_t estimateFlops(const TypedNode &node, const std::map<std::string, int64_t> &dims);

} // namespace tensorc::autodiff
