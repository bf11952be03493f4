#include "compiler/transforms/Autocast.h"

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/trace/RewriteGraph.h"
#include "compiler/trace/Tracer.h"
#include "ir/core/Error.h"

#include <optional>
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
  // Every node again, under its own name, with its float operands cast to
  // the dtype its policy wants.
  Graph out = trace::rewriteGraph(
      graph, "autocast",
      [&](Tracer &t, const TypedNode &n, const std::vector<trace::Operand> &args)
          -> std::optional<std::vector<Tensor>> {
        Node copy = *n.node;
        AutocastPolicy policy = autocastPolicy(copy.op);
        // Attention's saved log-sum-exp (the backward's operand 6) stays
        // f32: it neither sets nor takes the operands' dtype.
        auto keeps = [&](size_t i) { return copy.op == "scaled_dot_product_attention_backward" && i == 6; };
        // The dtype every float tensor operand should have.
        std::optional<DType> target;
        if (policy == AutocastPolicy::Promote)
          for (size_t i = 0; i < args.size(); ++i)
            if (const Tensor *v = std::get_if<Tensor>(&args[i]); v && !keeps(i)) {
              DType d = v->dtype();
              if (isFloat(d) && (!target || width(d) > width(*target)))
                target = d;
            }
        for (size_t i = 0; i < copy.args.size() && i < args.size(); ++i) {
          const Tensor *v = std::get_if<Tensor>(&args[i]);
          if (!v || copy.args[i].kind != Arg::Kind::Value)
            continue;
          DType d = v->dtype();
          std::optional<DType> want;
          if (keeps(i) || !isFloat(d))
            want = std::nullopt;
          else if (policy == AutocastPolicy::LowPrecision && d == DType::F32)
            want = low;
          else if (policy == AutocastPolicy::Float32 && (d == DType::F16 || d == DType::BF16))
            want = DType::F32;
          else if (policy == AutocastPolicy::Promote && target && d != *target)
            want = target;
          copy.args[i].value = want ? trace::cast(*v, *want).ref() : v->ref();
        }
        return t.addNode(copy);
      },
      /*sameTypes=*/false);
  // Outputs keep their dtypes.
  Graph restored = out;
  restored.outputs.clear();
  Tracer t(restored);
  for (size_t i = 0; i < out.outputs.size(); ++i) {
    Tensor v = t.value(out.outputs[i]);
    DType original = analysis.outputs[i].dtype;
    t.output(v.dtype() == original ? v : trace::cast(v, original));
  }
  return t.graph();
}

} // namespace tensorc::transforms
