// Ahead-of-time reverse-mode differentiation of graphs.
//
// buildJointGraph turns a forward graph into one joint forward+backward graph:
// the forward nodes unchanged, then the backward nodes from the gradient rules
// (GradRules.cpp), only along paths from the differentiated outputs back to
// the inputs that need gradients. The result is an ordinary graph, so it can
// be imported as a tc module, run on the interpreter, and differentiated
// again.
#pragma once

#include "compiler/graph/Graph.h"

#include <string>
#include <vector>

namespace tensorc::autodiff {

struct AutodiffOptions {
  // Inputs to differentiate with respect to; empty: the trainable ones.
  std::vector<std::string> wrt;
  // Outputs to differentiate; empty: the single scalar float output if there
  // is exactly one, else every float output.
  std::vector<std::string> of;
  // Whether the forward outputs stay outputs of the joint graph.
  bool keepForwardOutputs = true;
  // The backward will run as its own program (partitionJointGraph): the
  // forward is first put in the form whose values the gradients read
  // (prepareForAutodiff), so the partition saves them instead of the
  // backward recomputing them. A joint program shares them through CSE and
  // keeps the forward as it is.
  bool separateBackward = false;
};

struct JointGraph {
  Graph graph;
  // Names in `graph`: the cotangent inputs added (one per non-scalar
  // differentiated output; a scalar output is seeded with 1), and per `wrt`
  // input the output reference holding its gradient.
  std::vector<std::string> cotangentInputs;
  std::vector<std::string> wrt;
  std::vector<std::string> gradientOutputs;
};

// Throws Error naming the op when an op on a differentiated path has no rule.
JointGraph buildJointGraph(const Graph &forward, const AutodiffOptions &options = {});

} // namespace tensorc::autodiff
