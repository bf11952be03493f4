// Checks a Graph and types every value: names defined once and used after
// definition (any node order; cycles rejected), ops known, attributes valid,
// literal dtypes resolved, shapes and dtypes inferred. Every problem is one
// Error naming the file, the node and the op.
#pragma once

#include "compiler/graph/Graph.h"
#include "ir/core/ShapeInference.h"

#include <map>
#include <string>
#include <vector>

namespace tensorc {

struct TypedNode {
  const Node *node = nullptr;
  const OpSchema *schema = nullptr;
  AttrMap attrs; // complete: defaults filled in
  // Per arg: its type (literals get theirs resolved); nullopt if absent.
  std::vector<std::optional<TensorSpec>> argTypes;
  std::vector<TensorSpec> results;
};

struct GraphAnalysis {
  std::vector<TypedNode> nodes;             // topological order
  std::map<std::string, TensorSpec> values; // every reference form: "x", "h", "h:0", "h:1"
  std::vector<TensorSpec> outputs;
};

// Types one node against already-typed values (every reference form) and
// the graph's meshes (collectives name one). Throws Error with the bare
// problem; the caller says where.
TypedNode typeNode(const Node &node, const std::map<std::string, TensorSpec> &values,
                   const std::vector<Mesh> &meshes = {});

// `where` prefixes messages ("model.json"); a Literal's dtype when not given.
// `requireOutputs` = false accepts a graph under construction (no outputs yet).
GraphAnalysis analyzeGraph(const Graph &graph, const std::string &where,
                           bool requireOutputs = true);
DType literalDType(const Literal &literal, const std::vector<std::optional<TensorSpec>> &argTypes);

} // namespace tensorc
