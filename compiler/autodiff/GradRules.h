// Gradient rules: for each differentiable op, how the cotangents of its
// results become cotangents of its operands, written with the tracing API so
// that every backward node is type-checked as it is built. One table, in
// GradRules.cpp; the formulas are in docs/autodiff.md.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/trace/Tracer.h"

#include <functional>
#include <optional>
#include <vector>

namespace tensorc::autodiff {

using trace::Operand;
using trace::Tensor;

struct GradContext {
  trace::Tracer &tracer;
  const TypedNode &node;                          // the forward node, attributes complete
  std::vector<Operand> inputs;                    // its operands (tensor, literal or absent)
  std::vector<Tensor> outputs;                    // its results
  std::vector<std::optional<Tensor>> gradOutputs; // cotangent per result; nullopt = zero
  std::vector<bool> needsGrad;                    // per operand

  const Tensor &in(size_t i) const;
  bool has(size_t i) const {
    return i < inputs.size() && std::holds_alternative<Tensor>(inputs[i]);
  }
  const AttrMap &attrs() const { return node.attrs; }
  // The cotangent of result `i`, zeros of its type when none flows back.
  Tensor grad(size_t i = 0) const;
};

// Cotangent per operand: nullopt where the operand needs none or has none.
using GradRule = std::function<std::vector<std::optional<Tensor>>(const GradContext &)>;

// nullptr when the op has no rule (not differentiable, or not yet).
const GradRule *findGradRule(const std::string &op);

// Sums a broadcast cotangent back to `shape` (undoing NumPy broadcasting).
Tensor reduceToShape(const Tensor &g, const Shape &shape);
// A tensor of zeros of `spec`'s type in `t`.
Tensor zerosLike(trace::Tracer &t, const TensorSpec &spec);
trace::DimSpec dimSpec(const Shape &shape);
// The element count of `x` over `axes`: a literal when static, else a
// tensor computed from the symbols' run-time sizes.
Operand countOver(trace::Tracer &t, const Tensor &x, const std::vector<int64_t> &axes);

} // namespace tensorc::autodiff
