#include "compiler/transforms/Autocast.h"

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/trace/Tracer.h"
#include "ir/core/Error.h"

#include <map>
#include <set>

namespace tensorc::transforms {

using trace::Tensor;
using trace::Tracer;

AutocastPolicy autocastPolicy(const std::string &op) {
  static const std::set<std::string> low = {"matmul", "conv2d", "scaled_dot_product_attention",
                                            "scaled_dot_product_attention_with_lse"};
  static const std::set<std::string> f32 = {"exp",      "log",        "pow",           "reciprocal",
                                            "rsqrt",    "softmax",    "log_softmax",   "layer_norm",
                                            "rms_norm", "batch_norm", "cross_entropy", "sum",
                                            "mean",     "var",        "prod",          "logsumexp"};
  if (low.count(op))
    return AutocastPolicy::LowPrecision;
  if (f32.count(op))
    return AutocastPolicy::Float32;
  return AutocastPolicy::Promote;
}

namespace {

int width(DType d) {
  switch (d) {
  case DType::F64:
    return 3;
  case DType::F32:
    return 2;
  case DType::F16:
  case DType::BF16:
    return 1;
  default:
    return 0;
  }
}

} // namespace

Graph autocastGraph(const Graph &graph, DType low) {
  check(low == DType::BF16 || low == DType::F16,
        "autocast: the low-precision dtype must be bf16 or f16");
  GraphAnalysis analysis = analyzeGraph(graph, "autocast " + graph.name);
  Graph start = graph;
  start.nodes.clear();
  start.outputs.clear();
  Tracer t(start);
  std::map<std::string, std::string> current; // old reference -> reference now carrying the value
  auto now = [&](const std::string &ref) {
    auto it = current.find(ref);
    if (it != current.end())
      return it->second;
    ValueRef v = parseValueRef(ref);
    auto it0 = current.find(v.producer + ":" + std::to_string(v.index));
    return it0 != current.end() ? it0->second : ref;
  };
  for (const TypedNode &n : analysis.nodes) {
    Node copy = *n.node;
    AutocastPolicy policy = autocastPolicy(copy.op);
    // The dtype every float tensor operand should have.
    std::optional<DType> target;
    // Attention's saved log-sum-exp (the backward's operand 6) stays f32:
    // it neither sets nor takes the operands' dtype.
    auto keeps = [&](size_t i) { return copy.op == "scaled_dot_product_attention_backward" && i == 6; };
    if (policy == AutocastPolicy::Promote) {
      for (size_t i = 0; i < copy.args.size(); ++i)
        if (const Arg &a = copy.args[i]; a.kind == Arg::Kind::Value && !keeps(i)) {
          DType d = t.value(now(a.value)).dtype();
          if (isFloat(d) && (!target || width(d) > width(*target)))
            target = d;
        }
    }
    for (size_t i = 0; i < copy.args.size(); ++i) {
      Arg &a = copy.args[i];
      if (a.kind != Arg::Kind::Value || keeps(i))
        continue;
      Tensor v = t.value(now(a.value));
      DType d = v.dtype();
      if (!isFloat(d))
        continue;
      std::optional<DType> want;
      if (policy == AutocastPolicy::LowPrecision && d == DType::F32)
        want = low;
      else if (policy == AutocastPolicy::Float32 && (d == DType::F16 || d == DType::BF16))
        want = DType::F32;
      else if (policy == AutocastPolicy::Promote && target && d != *target)
        want = target;
      a.value = want ? trace::cast(v, *want).ref() : v.ref();
    }
    std::vector<Tensor> results;
    try {
      results = t.addNode(copy);
    } catch (const Error &e) {
      fail("autocast: node \"" + copy.name + "\" (" + copy.op + "): " + e.what());
    }
    for (size_t r = 0; r < results.size(); ++r) {
      current[n.node->name + ":" + std::to_string(r)] = results[r].ref();
      if (r == 0)
        current[n.node->name] = results[r].ref();
    }
  }
  Graph out = t.graph();
  out.outputs.clear();
  // Outputs keep their dtypes.
  Tracer finish(out);
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    Tensor v = finish.value(now(graph.outputs[i]));
    DType original = analysis.outputs[i].dtype;
    finish.output(v.dtype() == original ? v : trace::cast(v, original));
  }
  return finish.graph();
}

} // namespace tensorc::transforms
