#include "compiler/autodiff/PrepareForward.h"

#include "compiler/trace/RewriteGraph.h"

namespace tensorc::autodiff {

using namespace trace;

namespace {

// Attention with its rows' log-sum-exp: the backward reads the saved output
// and statistics (FlashAttention-2) instead of running the forward again.
std::vector<Tensor> attentionWithLse(Tracer &t, const TypedNode &n, const std::vector<Operand> &args) {
  return {t.call("scaled_dot_product_attention_with_lse", args, n.attrs).at(0)};
}

std::optional<std::vector<Tensor>> perRowCrossEntropy(Tracer &t, const TypedNode &n,
                                                      const std::vector<Operand> &args) {
  if (n.node->op != "cross_entropy" || getEnum(n.attrs, "reduction") == "none" ||
      getFloat(n.attrs, "label_smoothing") != 0.0)
    return std::nullopt;
  Tensor logits = std::get<Tensor>(args.at(0));
  const Tensor &target = std::get<Tensor>(args.at(1));
  DType dtype = logits.dtype();
  // The saved per-row loss is the gradient's row statistic: in bf16 its
  // rounding (0.4% of a loss of 10) would move every probability by ~4%.
  if (dtype != DType::F32 && dtype != DType::F64)
    logits = cast(logits, DType::F32);
  AttrMap attrs = n.attrs;
  attrs["reduction"] = std::string("none");
  const std::string &name = n.node->name;
  Tensor perRow = t.call("cross_entropy", {logits, target}, attrs, t.freshName(name + "_rows")).at(0);
  Tensor loss = sum(perRow); // ignored rows are 0
  if (getEnum(n.attrs, "reduction") == "mean") {
    Tensor counted = sum(cast(ne(target, getInt(n.attrs, "ignore_index")), perRow.dtype()));
    loss = loss / counted.named(t.freshName(name + "_count"));
  }
  return std::vector{loss.dtype() == dtype ? loss : cast(loss, dtype)};
}

} // namespace

Graph prepareForAutodiff(const Graph &forward) {
  return rewriteGraph(forward, "autodiff",
                      [](Tracer &t, const TypedNode &n,
                         const std::vector<Operand> &args) -> std::optional<std::vector<Tensor>> {
                        if (n.node->op == "scaled_dot_product_attention")
                          return attentionWithLse(t, n, args);
                        return perRowCrossEntropy(t, n, args);
                      });
}

} // namespace tensorc::autodiff
