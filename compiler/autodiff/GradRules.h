// Gradient rules: for each differentiable op, how the cotangents of its
// results become cotangents of its operands, written with the tracing API so
// that every backward node is type-checked as it is built. One table, in
// GradRules.cpp; the formulas are in docs/autodiff.md.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/trace/Tracer.h"

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
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
// The collectives' rules (CollectiveGradRules.cpp), part of findGradRule's table.
const std::unordered_map<std::string, GradRule> &collectiveGradRules();

// Sums a broadcast cotangent back to `shape` (undoing NumPy broadcasting).
Tensor reduceToShape(const Tensor &g, const Shape &shape);
// A tensor of zeros of `spec`'s type in `t`.
Tensor zerosLike(trace::Tracer &t, const TensorSpec &spec);
trace::DimSpec dimSpec(const Shape &shape);
// The element count of `x` over `axes`: a literal when static, else a
// tensor computed from the symbols' run-time sizes.
Operand countOver(trace::Tracer &t, const Tensor &x, const std::vector<int64_t> &axes);

// x - mean(x) over `axes` (keepdim), computed around a shift: x's first
// element of each reduced slice. With d = x - shift, x - mean(x) is
// d - mean(d): d is exact in f32 when x's values are close, and neither the
// sum nor the result carries the rounding of a large mean (x = 1e4 + U(-1, 1)
// lost 3 digits with the plain form, beyond the f32 tolerance). Symbolic
// reduced axes cannot be sliced statically: they keep the plain form. The
// normalizations' decompositions and their gradients center alike, so the
// backward's statistics are the forward's (one computation after CSE).
struct Centered {
  Tensor centered;             // x - mean(x)
  std::optional<Tensor> shift; // mean(x) = shift + meanOfShifted (no shift: symbolic axes)
  Tensor meanOfShifted;
  Tensor mean() const { return shift ? *shift + meanOfShifted : meanOfShifted; }
};
Centered centerAroundShift(const Tensor &x, const std::vector<int64_t> &axes);

// A 2-D window's kernel taps (pooling and convolution gradients). The window
// of output (i, j) reads padded input (i*s + ki*d, j*s + kj*d): tapSlice is
// the (N, C, Ho, Wo) tensor of the inputs tap (ki, kj) reads; untap places a
// tap's cotangent back into the padded input's (Hp, Wp) frame; unpad2d
// drops the padding.
Tensor tapSlice(const Tensor &padded, int64_t ki, int64_t kj, const std::vector<int64_t> &stride,
                const std::vector<int64_t> &dilation, int64_t Ho, int64_t Wo);
Tensor untap(const Tensor &g, int64_t ki, int64_t kj, const std::vector<int64_t> &stride,
             const std::vector<int64_t> &dilation, int64_t Hp, int64_t Wp);
Tensor unpad2d(const Tensor &t, const std::vector<int64_t> &pad);

} // namespace tensorc::autodiff
