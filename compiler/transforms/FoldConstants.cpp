#include "compiler/transforms/FoldConstants.h"

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"

#include <cmath>
#include <map>

namespace tensorc::transforms {

namespace {

DenseValue toDense(const HostTensor &t) {
  DenseValue v;
  v.dtype = t.dtype();
  v.shape = t.shape();
  for (int64_t i = 0; i < t.numel(); ++i)
    isFloat(t.dtype()) ? v.floats.push_back(t.getF(i)) : v.ints.push_back(t.getI(i));
  // One value repeated is stored as a splat.
  bool splat = t.numel() > 1;
  for (int64_t i = 1; i < t.numel() && splat; ++i)
    splat = isFloat(t.dtype()) ? (v.floats[i] == v.floats[0] ||
                                  (std::isnan(v.floats[i]) && std::isnan(v.floats[0])))
                               : v.ints[i] == v.ints[0];
  if (splat) {
    v.floats.resize(v.floats.empty() ? 0 : 1);
    v.ints.resize(v.ints.empty() ? 0 : 1);
  }
  return v;
}

} // namespace

Graph foldConstants(const Graph &graph, int64_t maxElements) {
  GraphAnalysis analysis = analyzeGraph(graph, "fold-constants " + graph.name);
  std::map<std::string, HostTensor> known; // value key -> its constant value
  Graph out = graph;
  out.nodes.clear();
  for (const TypedNode &n : analysis.nodes) {
    Node node = *n.node;
    bool allConstant = n.node->op != "constant"; // creation ops have no operands: constant too
    for (const Arg &a : n.node->args)
      if (a.kind == Arg::Kind::Value) {
        ValueRef v = parseValueRef(a.value);
        allConstant &= known.count(v.producer + ":" + std::to_string(v.index)) != 0;
      }
    bool small = true;
    for (const TensorSpec &r : n.results)
      // Constants have positive dims: an empty result stays a computation.
      small &= isStaticShape(r.shape) && numElements(r.shape).value() <= maxElements &&
               numElements(r.shape).value() > 0;
    if (n.node->op == "constant" && small) {
      // Evaluate to record the value for consumers.
      Graph one;
      one.nodes = {node};
      one.outputs = {node.name};
      known[node.name + ":0"] = interpret(one, analyzeGraph(one, "fold"), {}).outputs[0];
    } else if (allConstant && small && n.results.size() == 1) {
      // A one-node graph whose inputs are the known constants.
      Graph one;
      Node copy = node;
      std::map<std::string, HostTensor> inputs;
      for (Arg &a : copy.args)
        if (a.kind == Arg::Kind::Value) {
          ValueRef v = parseValueRef(a.value);
          std::string name = "c" + std::to_string(inputs.size());
          const HostTensor &value = known.at(v.producer + ":" + std::to_string(v.index));
          if (!inputs.count(name))
            one.inputs.push_back({name, TensorSpec{value.dtype(), {}}, false, std::nullopt});
          for (int64_t d : value.shape())
            one.inputs.back().spec.shape.push_back(Dim::of(d));
          inputs.emplace(name, value);
          a.value = name;
        }
      one.nodes = {copy};
      one.outputs = {copy.name};
      try {
        HostTensor value = interpret(one, analyzeGraph(one, "fold"), inputs).outputs[0];
        Node folded;
        folded.name = node.name;
        folded.op = "constant";
        folded.attrs["value"] = toDense(value);
        folded.sharding = node.sharding;
        known[node.name + ":0"] = value;
        out.nodes.push_back(folded);
        continue;
      } catch (const Error &) {
        // An op that fails on these values (an index out of range) is left
        // to fail at run time, where the error is reported.
      }
    }
    out.nodes.push_back(node);
  }
  return out;
}

} // namespace tensorc::transforms
