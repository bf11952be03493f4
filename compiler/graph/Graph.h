// A dataflow graph as graph files (docs/graph-format.md) and the tracing API
// describe it, before it becomes tc IR. MLIR-free: the interpreter and the
// tracer work on it directly.
#pragma once

#include "ir/core/Attr.h"
#include "ir/core/Mesh.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorc {

inline constexpr int kGraphFormatVersion = 1;

struct DimBound {
  int64_t min = 1;
  std::optional<int64_t> max;
  bool operator==(const DimBound &o) const { return min == o.min && max == o.max; }
};

// Per tensor dim, the mesh axes it is split over (Shardy style).
struct Sharding {
  std::string mesh;
  std::vector<std::vector<std::string>> dims;
  // An input stored split but read whole (FSDP's parameters, set by the
  // fsdp preset): every reader sees it replicated, so the partitioner
  // gathers it once before its first reader, and the computation lies as if
  // it were replicated (sharding propagation never spreads its split).
  bool gatheredAtUse = false;
  // A graph output's node computed as propagation decides and resharded to
  // this only where it leaves the program (FSDP's gradients: partial sums
  // reduce-scattered), so that it does not steer how the computation lies.
  bool atOutput = false;
  bool operator==(const Sharding &o) const {
    return mesh == o.mesh && dims == o.dims && gatheredAtUse == o.gatheredAtUse && atOutput == o.atOutput;
  }
};

struct GraphInput {
  std::string name;
  TensorSpec spec;
  bool trainable = false;
  std::optional<Sharding> sharding;
  bool operator==(const GraphInput &o) const {
    return name == o.name && spec == o.spec && trainable == o.trainable && sharding == o.sharding;
  }
};

// A scalar literal written in place of a tensor argument (`["x", 0.5]`).
struct Literal {
  enum class Kind { Int, Float, Bool } kind = Kind::Float;
  double floatValue = 0;
  int64_t intValue = 0;
  std::optional<DType> dtype; // explicit `{"literal": v, "dtype": d}`
  bool operator==(const Literal &o) const {
    return kind == o.kind && floatValue == o.floatValue && intValue == o.intValue &&
           dtype == o.dtype;
  }
};

struct Arg {
  enum class Kind { Absent, Value, Literal } kind = Kind::Absent;
  std::string value; // "x", "h", "h:1"
  tensorc::Literal literal;
  static Arg absent() { return {}; }
  static Arg ref(std::string v) { return {Kind::Value, std::move(v), {}}; }
  static Arg lit(tensorc::Literal l) { return {Kind::Literal, {}, l}; }
  bool operator==(const Arg &o) const {
    return kind == o.kind && value == o.value && literal == o.literal;
  }
};

struct Node {
  std::string name;
  std::string op;
  std::vector<Arg> args;
  AttrMap attrs;
  std::optional<Sharding> sharding;
  bool operator==(const Node &o) const {
    return name == o.name && op == o.op && args == o.args && attrs == o.attrs &&
           sharding == o.sharding;
  }
};

struct Graph {
  std::string name = "main";
  std::map<std::string, DimBound> dims;
  std::vector<Mesh> meshes;
  std::vector<GraphInput> inputs;
  std::vector<Node> nodes;
  std::vector<std::string> outputs; // value references
  // Run-time checks (compiler/transforms/RunChecks.h): the last
  // checks.size() outputs are i32 scalar flags, not results; a run where
  // one is non-zero fails with its message. Kept through partitioning, where
  // they are checked on each device's values (docs/sharding.md).
  std::vector<std::string> checks;
  size_t resultCount() const { return outputs.size() > checks.size() ? outputs.size() - checks.size() : 0; }
  bool operator==(const Graph &o) const {
    return name == o.name && dims == o.dims && meshes == o.meshes && inputs == o.inputs &&
           nodes == o.nodes && outputs == o.outputs && checks == o.checks;
  }
};

// `g` without its run-time checks (their outputs; the nodes computing them
// stay for dead-code elimination). Differentiation drops them: they are not
// part of the function, and compiling the result checks its ops again.
inline Graph withoutChecks(Graph g) {
  g.outputs.resize(g.resultCount());
  g.checks.clear();
  return g;
}

// A value reference split into its producer and result index: "h:1" -> (h, 1).
struct ValueRef {
  std::string producer;
  int index = 0;
};
ValueRef parseValueRef(const std::string &ref);

} // namespace tensorc
