// The gradient rule of every differentiable op, in one table (see
// docs/autodiff.md for the formulas). Each rule builds backward nodes with
// the tracing API, so every node it adds is type-checked on the spot.
#include "compiler/autodiff/GradRules.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <cmath>
#include <numeric>
#include <unordered_map>

namespace tensorc::autodiff {

using namespace trace;
using Grads = std::vector<std::optional<Tensor>>;

const Tensor &GradContext::in(size_t i) const {
  const Tensor *t = std::get_if<Tensor>(&inputs.at(i));
  check(t != nullptr, "autodiff: operand " + std::to_string(i) + " is not a tensor");
  return *t;
}

trace::DimSpec dimSpec(const Shape &shape) {
  trace::DimSpec spec;
  for (const Dim &d : shape)
    d.isStatic() ? spec.emplace_back(d.value()) : spec.emplace_back(d.str());
  return spec;
}

Tensor zerosLike(Tracer &t, const TensorSpec &spec) {
  return zeros(t, dimSpec(spec.shape), spec.dtype);
}

Tensor GradContext::grad(size_t i) const {
  return gradOutputs[i] ? *gradOutputs[i] : zerosLike(tracer, outputs[i].spec());
}

Centered centerAroundShift(const Tensor &x, const std::vector<int64_t> &axes) {
  std::vector<int64_t> starts, ends;
  bool shiftable = !axes.empty() && isFloat(x.dtype());
  for (int64_t a : axes) {
    shiftable &= x.shape()[size_t(a)].isStatic();
    starts.push_back(0);
    ends.push_back(1);
  }
  if (!shiftable) {
    Tensor m = mean(x, axes, true);
    return {x - m, std::nullopt, m};
  }
  Tensor shift = slice(x, axes, starts, ends);
  Tensor d = x - shift;
  Tensor m = mean(d, axes, true);
  return {d - m, shift, m};
}

Operand countOver(Tracer &t, const Tensor &x, const std::vector<int64_t> &axes) {
  Shape dims;
  for (int64_t a : axes)
    dims.push_back(x.shape()[a]);
  Dim n = numElements(dims);
  if (n.isStatic())
    return double(n.value());
  return sum(ones(t, dimSpec(dims), x.dtype()));
}

Tensor reduceToShape(const Tensor &g, const Shape &shape) {
  const Shape &gs = g.shape();
  check(gs.size() >= shape.size(),
        "autodiff: cannot reduce " + shapeStr(gs) + " to " + shapeStr(shape));
  size_t lead = gs.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (shape[i - lead] == Dim::of(1) && gs[i] != Dim::of(1)))
      axes.push_back(int64_t(i));
  // Only leading axes (a bias broadcast over rows): summed away, not kept
  // and reshaped, so the sum is the result itself (an output of the
  // program then needs no copy out of a view).
  bool leadingOnly = !axes.empty() && size_t(axes.back()) < lead;
  Tensor r = axes.empty() ? g : sum(g, axes, /*keepdim=*/!leadingOnly);
  return r.shape() == shape ? r : reshape(r, dimSpec(shape));
}

namespace {

double floatOf(const Operand &o) {
  if (const double *d = std::get_if<double>(&o))
    return *d;
  if (const int64_t *i = std::get_if<int64_t>(&o))
    return double(*i);
  if (const bool *b = std::get_if<bool>(&o))
    return *b ? 1.0 : 0.0;
  fail("autodiff: expected a literal");
}

// Reduction axes of `x` as written in attrs (all when absent).
std::vector<int64_t> reducedAxes(const GradContext &c, const Tensor &x) {
  return normalizeAxes(c.attrs(), "axes", x.rank());
}

// `g` reduced over `axes` (keepdim or not) expanded back to x's shape.
Tensor expandReduced(const Tensor &g, const Tensor &x, const std::vector<int64_t> &axes,
                     bool keepdim) {
  Tensor r = g;
  if (!keepdim)
    for (int64_t a : axes) // ascending: each insertion lands at its final place
      r = unsqueeze(r, a);
  return r.shape() == x.shape() ? r : broadcast_to(r, dimSpec(x.shape()));
}

Tensor floatMask(const Tensor &condition, DType dtype) { return cast(condition, dtype); }

int64_t staticDim(const Tensor &x, int64_t axis, const char *why) {
  const Dim &d = x.shape()[axis];
  check(d.isStatic(), std::string("autodiff: ") + why + " needs a static dim " +
                          std::to_string(axis) + ", got " + d.str());
  return d.value();
}

// 0, 1, ..., n-1 shaped to broadcast along `axis` of a rank-`rank` tensor.
Tensor iotaAlong(Tracer &t, const Dim &n, int64_t axis, int64_t rank, DType dtype) {
  trace::DimSpec shape(rank, int64_t(1));
  shape[axis] = dimSpec({n})[0];
  return reshape(iota_length(t, shape[axis], 0, 1, dtype), shape);
}

// Pads (or crops, when negative) one axis.
Tensor padAxis(const Tensor &x, int64_t axis, int64_t before, int64_t after, double value = 0.0) {
  if (before == 0 && after == 0)
    return x;
  std::vector<int64_t> pads(2 * (x.rank() - axis), 0);
  pads[2 * (x.rank() - 1 - axis)] = before;
  pads[2 * (x.rank() - 1 - axis) + 1] = after;
  return pad(x, pads, value);
}

// The adjoint of a strided slice along one static axis: places `g` (length
// L along `axis`) at start, start + step, ... of an axis of length `size`.
Tensor unsliceAxis(const Tensor &g, int64_t axis, int64_t start, int64_t step, int64_t size) {
  int64_t length = g.shape()[axis].value();
  Tensor r = g;
  if (length == 0)
    return padAxis(r, axis, 0, size);
  if (step > 1) {
    r = unsqueeze(r, axis + 1);
    r = padAxis(r, axis + 1, 0, step - 1);
    r = flatten(r, axis, axis + 1);
    r = padAxis(r, axis, 0, -(step - 1)); // drop the zeros after the last element
  }
  int64_t span = (length - 1) * step + 1;
  return padAxis(r, axis, start, size - start - span);
}

// ------------------------------------------------------------- elementwise

Grads unaryRule(const GradContext &c) {
  const std::string &op = c.node.node->op;
  const Tensor &x = c.in(0), &y = c.outputs[0];
  Tensor g = c.grad();
  auto one = [](Tensor t) { return Grads{std::move(t)}; };
  if (op == "neg")
    return one(-g);
  if (op == "abs")
    return one(g * sign(x));
  if (op == "exp")
    return one(g * y);
  if (op == "log")
    return one(g / x);
  if (op == "sqrt")
    return one(g * 0.5 / y);
  if (op == "rsqrt")
    return one(g * -0.5 * y / x);
  if (op == "reciprocal")
    return one(-(g * y * y));
  if (op == "tanh")
    return one(g * sub(1.0, y * y));
  if (op == "sigmoid")
    return one(g * y * sub(1.0, y));
  if (op == "relu") // PyTorch's threshold_backward: 0 where x <= 0, the cotangent elsewhere (nan too)
    return one(where(le(x, 0.0), 0.0, g));
  if (op == "silu") {
    Tensor s = sigmoid(x);
    return one(g * s * add(1.0, x * sub(1.0, s)));
  }
  if (op == "sin")
    return one(g * cos(x));
  if (op == "cos")
    return one(-(g * sin(x)));
  if (op == "erf")
    return one(g * (2.0 / std::sqrt(M_PI)) * exp(-(x * x)));
  if (op == "gelu") {
    // The factor g multiplies, in f32 for 16-bit x and rounded once (in
    // bf16 its constants would round, 1/sqrt(2) to 0.70703, and the
    // interpreter would round each of its dozen steps). It stays in x's
    // dtype: a joint graph computes it in the forward and saves it, and in
    // f32 that doubled the MLP step's saved bytes.
    bool narrow = x.dtype() == DType::BF16 || x.dtype() == DType::F16;
    Tensor xf = narrow ? cast(x, DType::F32) : x;
    Tensor factor;
    if (getEnum(c.attrs(), "approximate") == "tanh") {
      const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
      Tensor t = tanh((xf + xf * xf * xf * a) * k);
      Tensor dInner = add(1.0, xf * xf * (3 * a)) * k;
      factor = add(1.0, t) * 0.5 + xf * 0.5 * sub(1.0, t * t) * dInner;
    } else {
      Tensor cdf = add(1.0, erf(xf * (1.0 / std::sqrt(2.0)))) * 0.5;
      Tensor pdf = exp(xf * xf * -0.5) * (1.0 / std::sqrt(2.0 * M_PI));
      factor = cdf + xf * pdf;
    }
    return one(g * (narrow ? cast(factor, x.dtype()) : factor));
  }
  fail("autodiff: no unary rule for " + op);
}

Grads binaryRule(const GradContext &c) {
  const std::string &op = c.node.node->op;
  Tensor g = c.grad();
  const Tensor &y = c.outputs[0];
  const Operand &a = c.inputs[0], &b = c.inputs[1];
  Grads out(2);
  auto set = [&](size_t i, const Tensor &value) {
    if (c.needsGrad[i])
      out[i] = reduceToShape(value, c.in(i).shape());
  };
  if (op == "add") {
    set(0, g);
    set(1, g);
  } else if (op == "sub") {
    set(0, g);
    if (c.needsGrad[1])
      set(1, -g);
  } else if (op == "mul") {
    if (c.needsGrad[0])
      set(0, mul(g, b));
    if (c.needsGrad[1])
      set(1, mul(g, a));
  } else if (op == "div") {
    if (c.needsGrad[0])
      set(0, div(g, b));
    if (c.needsGrad[1])
      set(1, -(g * y) / b);
  } else if (op == "pow") {
    if (c.needsGrad[0]) {
      Operand bm1 = c.has(1) ? Operand(sub(b, 1.0)) : Operand(floatOf(b) - 1.0);
      set(0, mul(g, b) * pow(a, bm1));
    }
    if (c.needsGrad[1] && !c.has(0)) {
      set(1, g * y * std::log(floatOf(a)));
    } else if (c.needsGrad[1]) {
      // d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (PyTorch).
      Tensor zeroBase = logical_and(eq(a, 0.0), ge(b, 0.0));
      set(1, where(zeroBase, 0.0, g * y * log(c.in(0))));
    }
  } else if (op == "maximum" || op == "minimum") {
    // Ties split the cotangent in half, as PyTorch does.
    bool isMax = op == "maximum";
    Tensor half = g * 0.5;
    Tensor tie = eq(a, b);
    Tensor aWins = isMax ? gt(a, b) : lt(a, b);
    Tensor bWins = isMax ? gt(b, a) : lt(b, a);
    if (c.needsGrad[0])
      set(0, where(aWins, g, where(tie, half, 0.0)));
    if (c.needsGrad[1])
      set(1, where(bWins, g, where(tie, half, 0.0)));
  } else {
    fail("autodiff: no binary rule for " + op);
  }
  return out;
}

Grads whereRule(const GradContext &c) {
  Tensor g = c.grad();
  Grads out(3);
  if (c.needsGrad[1])
    out[1] = reduceToShape(where(c.in(0), g, 0.0), c.in(1).shape());
  if (c.needsGrad[2])
    out[2] = reduceToShape(where(c.in(0), 0.0, g), c.in(2).shape());
  return out;
}

Grads castRule(const GradContext &c) { return {cast(c.grad(), c.in(0).dtype())}; }

Grads clampRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  Tensor g = c.grad();
  std::optional<Tensor> inside;
  if (hasAttr(c.attrs(), "min"))
    inside = ge(x, getFloat(c.attrs(), "min"));
  if (hasAttr(c.attrs(), "max")) {
    Tensor below = le(x, getFloat(c.attrs(), "max"));
    inside = inside ? logical_and(*inside, below) : below;
  }
  return {where(*inside, g, 0.0)};
}

// ------------------------------------------------------------- reductions

Grads reductionRule(const GradContext &c) {
  const std::string &op = c.node.node->op;
  const Tensor &x = c.in(0), &y = c.outputs[0];
  bool keepdim = getBool(c.attrs(), "keepdim");
  std::vector<int64_t> axes = reducedAxes(c, x);
  Tensor g = expandReduced(c.grad(), x, axes, keepdim);
  if (op == "sum")
    return {g};
  if (op == "mean")
    return {div(g, countOver(c.tracer, x, axes))};
  Tensor yb = expandReduced(y, x, axes, keepdim);
  if (op == "prod")
    return {g * yb / x};
  if (op == "logsumexp") // d lse / dx = softmax(x) = exp(x - lse)
    return {g * exp(x - yb)};
  if (op == "max" || op == "min") {
    // Ties share the cotangent evenly (the amax/amin convention).
    Tensor hit = floatMask(eq(x, yb), x.dtype());
    Tensor count = expandReduced(sum(hit, axes, true), x, axes, true);
    return {g * hit / count};
  }
  if (op == "var") {
    Tensor centered = x - mean(x, axes, true);
    Operand n = countOver(c.tracer, x, axes);
    double correction = double(getInt(c.attrs(), "correction"));
    Operand denom = std::holds_alternative<double>(n) ? Operand(std::get<double>(n) - correction)
                                                      : Operand(sub(n, correction));
    return {div(g * centered * 2.0, denom)};
  }
  fail("autodiff: no reduction rule for " + op);
}

// ------------------------------------------------------------- linalg

Grads matmulRule(const GradContext &c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor A = a.rank() == 1 ? unsqueeze(a, 0) : a;
  Tensor B = b.rank() == 1 ? unsqueeze(b, -1) : b;
  Tensor G = c.grad();
  if (a.rank() == 1)
    G = unsqueeze(G, G.rank() == 0 ? 0 : -1 - (b.rank() == 1 ? 0 : 1));
  if (b.rank() == 1)
    G = unsqueeze(G, -1);
  Grads out(2);
  if (c.needsGrad[0])
    out[0] = reduceToShape(matmul(G, transpose(B, -1, -2)), a.rank() == 1 ? A.shape() : a.shape());
  if (c.needsGrad[1] && b.rank() == 2 && A.rank() >= 3) {
    // A weight shared by every batch entry (a linear layer over [batch,
    // sequence, features]): one product over the flattened rows, K = every
    // row, instead of a batched product summed over the batch afterwards
    // (batch x K x N partials written and read back, and f16/bf16 partials
    // rounded before they are summed). A and G are contiguous in their rows,
    // so the reshapes are views.
    Dim rows = Dim::of(1);
    for (int64_t d = 0; d + 1 < A.rank(); ++d)
      rows = rows * A.shape()[size_t(d)];
    auto flat = [&](const Tensor &t) {
      trace::DimSpec spec;
      rows.isStatic() ? spec.emplace_back(rows.value()) : spec.emplace_back(rows.str());
      const Dim &last = t.shape().back();
      last.isStatic() ? spec.emplace_back(last.value()) : spec.emplace_back(last.str());
      return reshape(t, spec);
    };
    out[1] = matmul(transpose(flat(A), -1, -2), flat(G));
  } else if (c.needsGrad[1]) {
    out[1] = reduceToShape(matmul(transpose(A, -1, -2), G), b.rank() == 1 ? B.shape() : b.shape());
  }
  if (out[0] && a.rank() == 1)
    out[0] = reshape(*out[0], dimSpec(a.shape()));
  if (out[1] && b.rank() == 1)
    out[1] = reshape(*out[1], dimSpec(b.shape()));
  return out;
}

// ------------------------------------------------------------- nn

Grads softmaxRule(const GradContext &c) {
  int64_t axis = getInt(c.attrs(), "axis");
  const Tensor &y = c.outputs[0];
  Tensor g = c.grad();
  if (c.node.node->op == "softmax")
    return {y * (g - sum(g * y, {axis}, true))};
  return {g - exp(y) * sum(g, {axis}, true)};
}

std::vector<int64_t> trailingAxes(int64_t from, int64_t rank) {
  std::vector<int64_t> axes(rank - from);
  std::iota(axes.begin(), axes.end(), from);
  return axes;
}

// Normalization over `axes` with weight/bias shaped `affine` (broadcast by
// `affineView`): the shared backward of layer_norm and batch_norm (training).
Grads normalizeBackward(const GradContext &c, const std::vector<int64_t> &axes, double eps,
                        std::optional<Tensor> weight, size_t weightSlot, size_t biasSlot,
                        std::function<Tensor(const Tensor &)> affineView,
                        std::function<Tensor(const Tensor &, const Shape &)> reduceAffine) {
  const Tensor &x = c.in(0);
  Tensor g = c.grad();
  Tensor centered = centerAroundShift(x, axes).centered;
  Tensor rstd = rsqrt(add(mean(centered * centered, axes, true), eps));
  Tensor xhat = centered * rstd;
  Tensor gw = weight ? g * affineView(*weight) : g;
  Grads out(c.inputs.size());
  if (c.needsGrad[0])
    out[0] = rstd * (gw - mean(gw, axes, true) - xhat * mean(gw * xhat, axes, true));
  if (weight && weightSlot < c.needsGrad.size() && c.needsGrad[weightSlot])
    out[weightSlot] = reduceAffine(g * xhat, c.in(weightSlot).shape());
  if (c.has(biasSlot) && c.needsGrad[biasSlot])
    out[biasSlot] = reduceAffine(g, c.in(biasSlot).shape());
  return out;
}

Grads layerNormRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  std::optional<Tensor> w = c.has(1) ? std::optional<Tensor>(c.in(1)) : std::nullopt;
  return normalizeBackward(
      c, trailingAxes(axis, x.rank()), getFloat(c.attrs(), "eps"), w, 1, 2,
      [](const Tensor &t) { return t; }, reduceToShape);
}

Grads rmsNormRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  std::vector<int64_t> axes = trailingAxes(axis, x.rank());
  double eps = hasAttr(c.attrs(), "eps") ? getFloat(c.attrs(), "eps") : dtypeEpsilon(x.dtype());
  Tensor g = c.grad();
  Tensor r = rsqrt(add(mean(x * x, axes, true), eps));
  Tensor gw = c.has(1) ? g * c.in(1) : g;
  Grads out(c.inputs.size());
  if (c.needsGrad[0])
    out[0] = r * (gw - x * r * r * mean(gw * x, axes, true));
  if (c.has(1) && c.needsGrad[1])
    out[1] = reduceToShape(g * x * r, c.in(1).shape());
  return out;
}

Grads batchNormRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  std::vector<int64_t> axes{0};
  for (int64_t a = 2; a < x.rank(); ++a)
    axes.push_back(a);
  // (C) -> (1, C, 1, ...) so per-channel tensors broadcast against x.
  trace::DimSpec view(x.rank(), int64_t(1));
  view[1] = dimSpec({x.shape()[1]})[0];
  auto affineView = [view](const Tensor &t) { return reshape(t, view); };
  auto reduceAffine = [](const Tensor &t, const Shape &shape) {
    std::vector<int64_t> axes{0};
    for (int64_t a = 2; a < t.rank(); ++a)
      axes.push_back(a);
    return reshape(sum(t, axes), dimSpec(shape));
  };
  double eps = getFloat(c.attrs(), "eps");
  std::optional<Tensor> w = c.has(3) ? std::optional<Tensor>(c.in(3)) : std::nullopt;
  if (getBool(c.attrs(), "training"))
    return normalizeBackward(c, axes, eps, w, 3, 4, affineView, reduceAffine);
  // Inference: y = (x - mean) * rstd * w + b with the running statistics as
  // inputs, which the second and third results pass through.
  Tensor g = c.grad();
  Tensor rstd = affineView(rsqrt(add(c.in(2), eps)));
  Tensor gw = w ? g * affineView(*w) : g;
  Tensor centered = x - affineView(c.in(1));
  Grads out(c.inputs.size());
  if (c.needsGrad[0])
    out[0] = gw * rstd;
  if (c.needsGrad[1]) {
    Tensor d = reduceAffine(-(gw * rstd), c.in(1).shape());
    out[1] = c.gradOutputs[1] ? d + *c.gradOutputs[1] : d;
  }
  if (c.needsGrad[2]) {
    Tensor d = reduceAffine(gw * centered * rstd * rstd * rstd * -0.5, c.in(2).shape());
    out[2] = c.gradOutputs[2] ? d + *c.gradOutputs[2] : d;
  }
  if (w && c.needsGrad[3])
    out[3] = reduceAffine(g * centered * rstd, c.in(3).shape());
  if (c.has(4) && c.needsGrad[4])
    out[4] = reduceAffine(g, c.in(4).shape());
  return out;
}

Grads crossEntropyRule(const GradContext &c) {
  const Tensor &logits = c.in(0), &target = c.in(1);
  int64_t classAxis = logits.rank() >= 2 ? 1 : 0;
  const Dim &C = logits.shape()[classAxis];
  double smoothing = getFloat(c.attrs(), "label_smoothing");
  const std::string &reduction = getEnum(c.attrs(), "reduction");
  Tensor isValid = ne(target, getInt(c.attrs(), "ignore_index"));
  Tensor g = c.grad();
  if (reduction == "none" && smoothing == 0.0) {
    // Softmax from the forward's per-row loss (lse - x[target], which the
    // partition saves: a reduction is not recomputed): p = exp(x - x[target]
    // - loss), one pass over the logits (prepareForAutodiff puts mean and
    // sum reductions into this form). Rows whose target is ignore_index read
    // class 0 and are selected away: their exp(x - x[0]) may overflow, and
    // a product with 0 would be nan.
    Tensor safeTarget = unsqueeze(where(isValid, target, 0), classAxis);
    Tensor picked = gather(logits, safeTarget, classAxis);
    Tensor p = exp(logits - picked - unsqueeze(c.outputs[0], classAxis));
    Tensor oneHot = floatMask(
        eq(safeTarget, iotaAlong(c.tracer, C, classAxis, logits.rank(), target.dtype())),
        logits.dtype());
    Tensor d = (p - oneHot) * unsqueeze(g, classAxis);
    return {where(unsqueeze(isValid, classAxis), d, 0.0), std::nullopt};
  }
  Tensor valid = floatMask(isValid, logits.dtype());
  Tensor scale = reduction == "mean" ? valid * g / sum(valid) : valid * g;
  Tensor oneHot = floatMask(eq(unsqueeze(target, classAxis),
                               iotaAlong(c.tracer, C, classAxis, logits.rank(), target.dtype())),
                            logits.dtype());
  Tensor p = softmax(logits, classAxis);
  Operand classes = countOver(c.tracer, logits, {classAxis});
  Operand uniform = std::holds_alternative<double>(classes)
                        ? Operand(smoothing / std::get<double>(classes))
                        : Operand(div(smoothing, classes));
  Tensor d = smoothing == 0.0 ? p - oneHot : sub(p - oneHot * (1.0 - smoothing), uniform);
  return {d * unsqueeze(scale, classAxis), std::nullopt};
}

// embedding_backward's sum (f32 for 16-bit grads) in `like`'s dtype.
Tensor rowsSummedByIndex(const Tensor &grad, const Tensor &indices, int64_t rows, const Tensor &like,
                         std::optional<int64_t> paddingIdx = std::nullopt) {
  Tensor sums = embeddingBackward(grad, indices, rows, paddingIdx);
  return sums.dtype() == like.dtype() ? sums : cast(sums, like.dtype());
}

Grads embeddingRule(const GradContext &c) {
  const Tensor &indices = c.in(0), &weight = c.in(1);
  const Dim &V = weight.shape()[0];
  // A scatter-add of the cotangent's rows: O(N*D). A symbolic table size
  // (rare) keeps the one-hot product, O(V*N*D).
  std::optional<int64_t> padding;
  if (hasAttr(c.attrs(), "padding_idx"))
    padding = getInt(c.attrs(), "padding_idx");
  if (V.isStatic())
    return {std::nullopt, rowsSummedByIndex(c.grad(), indices, V.value(), weight, padding)};
  Dim n = numElements(indices.shape());
  trace::DimSpec flat = dimSpec({n});
  Tensor oneHot = floatMask(
      eq(unsqueeze(reshape(indices, flat), 1), iotaAlong(c.tracer, V, 1, 2, indices.dtype())),
      weight.dtype()); // (N, V)
  Tensor g = reshape(c.grad(), dimSpec({n, weight.shape()[1]}));
  if (padding)
    g = where(unsqueeze(ne(reshape(indices, flat), double(*padding)), 1), g, 0.0);
  return {std::nullopt, matmul(transpose(oneHot, 0, 1), g)};
}

Grads dropoutRule(const GradContext &c) {
  // The same mask and scale: dropout of the cotangent with the same seed.
  return {dropout(c.grad(), c.in(1), getFloat(c.attrs(), "p"), getInt(c.attrs(), "stream")),
          std::nullopt};
}

Grads attentionRule(const GradContext &c) {
  // Formed after autodiff (tensorc-narrow-attention), for inference kernels.
  check(!hasAttr(c.attrs(), "out_dtype"),
        "scaled_dot_product_attention with out_dtype has no gradient rule; differentiate the f32 attention of "
        "converted operands");
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  // scaled_dot_product_attention_with_lse (prepareForAutodiff's form for a
  // separate backward): the backward reads the saved output and
  // log-sum-exp. Nothing differentiates the log-sum-exp itself.
  bool withLse = c.outputs.size() == 2;
  check(!withLse || !c.gradOutputs[1],
        "the log-sum-exp result of scaled_dot_product_attention_with_lse has no gradient rule");
  // One fused backward op, unless an additive mask needs its gradient too.
  bool maskGrad = c.has(3) && c.needsGrad[3];
  bool dropout = c.has(4); // the seed: the same mask drawn again in the backward
  check(!(maskGrad && dropout),
        "scaled_dot_product_attention with dropout has no gradient rule for an additive mask that needs a gradient");
  if (!maskGrad) {
    AttrMap attrs{{"is_causal", getBool(c.attrs(), "is_causal")}};
    if (hasAttr(c.attrs(), "scale"))
      attrs["scale"] = getFloat(c.attrs(), "scale");
    std::vector<Operand> args{c.grad(), q, k, v, c.has(3) ? Operand(c.in(3)) : Operand(std::monostate{})};
    if (withLse) {
      args.push_back(c.outputs[0]);
      args.push_back(c.outputs[1]);
    }
    if (dropout) {
      args.resize(7, Operand(std::monostate{}));
      args.push_back(c.in(4));
      attrs["dropout_p"] = getFloat(c.attrs(), "dropout_p");
      attrs["dropout_stream"] = getInt(c.attrs(), "dropout_stream");
    }
    std::vector<Tensor> g = c.tracer.call("scaled_dot_product_attention_backward", args, attrs);
    Grads out(c.inputs.size());
    for (int i = 0; i < 3; ++i)
      if (c.needsGrad[i])
        out[i] = g[i];
    return out;
  }
  int64_t E = staticDim(q, q.rank() - 1, "scaled_dot_product_attention");
  double scale =
      hasAttr(c.attrs(), "scale") ? getFloat(c.attrs(), "scale") : 1.0 / std::sqrt(double(E));
  // Recompute the probabilities P = softmax(q k^T * scale + mask).
  Tensor s = matmul(q, transpose(k, -1, -2)) * scale;
  if (getBool(c.attrs(), "is_causal")) {
    const Dim &L = q.shape()[q.rank() - 2], &S = k.shape()[k.rank() - 2];
    Tensor allowed =
        ge(iotaAlong(c.tracer, L, 0, 2, DType::I64), iotaAlong(c.tracer, S, 1, 2, DType::I64));
    s = where(allowed, s, -INFINITY);
  }
  if (c.has(3)) {
    const Tensor &mask = c.in(3);
    s = isBool(mask.dtype()) ? where(mask, s, -INFINITY) : s + mask;
  }
  Tensor p = softmax(s, -1);
  Tensor g = c.grad();
  Grads out(c.inputs.size());
  if (c.needsGrad[2])
    out[2] = reduceToShape(matmul(transpose(p, -1, -2), g), v.shape());
  Tensor dp = matmul(g, transpose(v, -1, -2));
  Tensor dScores = p * (dp - sum(dp * p, {-1}, true)); // d/d(q k^T * scale + mask)
  if (c.has(3) && c.needsGrad[3])
    out[3] = reduceToShape(dScores, c.in(3).shape()); // an additive mask
  Tensor ds = dScores * scale;
  if (c.needsGrad[0])
    out[0] = reduceToShape(matmul(ds, k), q.shape());
  if (c.needsGrad[1])
    out[1] = reduceToShape(matmul(transpose(ds, -1, -2), q), k.shape());
  return out;
}

// ------------------------------------------------------------- convolution and pooling

} // namespace

// The window of output (i, j) reads padded input (i*s + ki*d, j*s + kj*d).
// Slicing the padded input at offset (ki*d, kj*d) with step s gives, for each
// kernel tap, the (N, C, Ho, Wo) tensor of the inputs that tap reads; the
// backward of each tap is unsliceAxis of its cotangent.
Tensor tapSlice(const Tensor &padded, int64_t ki, int64_t kj, const std::vector<int64_t> &stride,
                const std::vector<int64_t> &dilation, int64_t Ho, int64_t Wo) {
  int64_t y0 = ki * dilation[0], x0 = kj * dilation[1];
  return slice(padded, {2, 3}, {y0, x0},
               {y0 + (Ho - 1) * stride[0] + 1, x0 + (Wo - 1) * stride[1] + 1},
               {stride[0], stride[1]});
}

Tensor untap(const Tensor &g, int64_t ki, int64_t kj, const std::vector<int64_t> &stride,
             const std::vector<int64_t> &dilation, int64_t Hp, int64_t Wp) {
  Tensor r = unsliceAxis(g, 2, ki * dilation[0], stride[0], Hp);
  return unsliceAxis(r, 3, kj * dilation[1], stride[1], Wp);
}

Tensor unpad2d(const Tensor &t, const std::vector<int64_t> &pad) {
  return padAxis(padAxis(t, 2, -pad[0], -pad[0]), 3, -pad[1], -pad[1]);
}

namespace {

// The input and weight gradients are ops of their own (cuDNN's backward-data
// and backward-filter convolutions on GPUs); backends without them
// decompose them into per-tap GEMMs (compiler/transforms/Decompose.cpp).
Grads conv2dRule(const GradContext &c) {
  const Tensor &x = c.in(0), &w = c.in(1);
  AttrMap geometry{{"stride", getInts(c.attrs(), "stride")},
                   {"padding", getInts(c.attrs(), "padding")},
                   {"dilation", getInts(c.attrs(), "dilation")},
                   {"groups", getInt(c.attrs(), "groups")}};
  // Channels-last (N, H, W, C): the spatial dims are 1 and 2, the channels last.
  const bool last = c.attrs().count("channels_last") && getBool(c.attrs(), "channels_last");
  const size_t h = last ? 1 : 2;
  if (last)
    geometry["channels_last"] = true;
  Tensor g = c.grad();
  Grads out(c.inputs.size());
  if (c.needsGrad[0]) {
    AttrMap attrs = geometry;
    attrs["input_size"] = std::vector<int64_t>{x.shape()[h].value(), x.shape()[h + 1].value()};
    out[0] = c.tracer.call("conv2d_backward_input", {g, w}, attrs)[0];
  }
  if (c.needsGrad[1]) {
    AttrMap attrs = geometry;
    attrs["kernel_size"] = std::vector<int64_t>{w.shape()[h].value(), w.shape()[h + 1].value()};
    out[1] = c.tracer.call("conv2d_backward_weight", {g, x}, attrs)[0];
  }
  if (c.has(2) && c.needsGrad[2])
    out[2] = last ? sum(g, {0, 1, 2}) : sum(g, {0, 2, 3});
  return out;
}

Grads poolRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  bool isMax = c.node.node->op == "max_pool2d";
  std::vector<int64_t> k = getInts(c.attrs(), "kernel_size"), stride = poolStride(c.attrs()),
                       padding = getInts(c.attrs(), "padding");
  std::vector<int64_t> dilation =
      isMax ? getInts(c.attrs(), "dilation") : std::vector<int64_t>{1, 1};
  int64_t H = x.shape()[2].value(), W = x.shape()[3].value();
  Tensor g = c.grad();
  int64_t Ho = g.shape()[2].value(), Wo = g.shape()[3].value();
  // ceil_mode windows may run past the padded input: pad the far side too.
  int64_t Hp = std::max(H + 2 * padding[0], (Ho - 1) * stride[0] + (k[0] - 1) * dilation[0] + 1);
  int64_t Wp = std::max(W + 2 * padding[1], (Wo - 1) * stride[1] + (k[1] - 1) * dilation[1] + 1);
  std::optional<Tensor> dx;
  if (isMax) {
    // The cotangent goes to the first maximum of each window, as PyTorch:
    // its tap found once per window (max_pool2d_taps, PyTorch's saved
    // indices), then each input element gathers its share from the windows
    // that hold it (max_pool2d_backward), one nest each. (Taps compared as
    // slices of the -inf-padded input and shares scattered per tap were 27
    // padded copies of the input, 5.5 ms of ResNet-50's backward on an H200
    // where PyTorch's kernel takes 0.2.)
    Tensor which = c.tracer.call("max_pool2d_taps", {x}, c.attrs())[0];
    AttrMap attrs{{"kernel_size", k}, {"stride", stride}, {"padding", padding}, {"dilation", dilation},
                  {"input_size", std::vector<int64_t>{H, W}}};
    return {c.tracer.call("max_pool2d_backward", {g, which}, attrs)[0]};
  }
  {
    // Each output's divisor, computed here: spatial sizes are static.
    bool includePad = getBool(c.attrs(), "count_include_pad");
    DenseValue divisor{x.dtype(), {Ho, Wo}, {}, {}};
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        int64_t y0 = i * stride[0] - padding[0], x0 = j * stride[1] - padding[1];
        int64_t y1 = std::min(y0 + k[0], H + padding[0]), x1 = std::min(x0 + k[1], W + padding[1]);
        int64_t area = includePad ? (y1 - y0) * (x1 - x0)
                                  : (std::min(y1, H) - std::max<int64_t>(y0, 0)) *
                                        (std::min(x1, W) - std::max<int64_t>(x0, 0));
        divisor.floats.push_back(double(area));
      }
    Tensor share = g / constant(c.tracer, divisor);
    for (int64_t ki = 0; ki < k[0]; ++ki)
      for (int64_t kj = 0; kj < k[1]; ++kj) {
        Tensor placed = untap(share, ki, kj, stride, dilation, Hp, Wp);
        dx = dx ? *dx + placed : placed;
      }
  }
  Tensor r = padAxis(padAxis(*dx, 2, -padding[0], -(Hp - H - padding[0])), 3, -padding[1],
                     -(Wp - W - padding[1]));
  return {r};
}

// ------------------------------------------------------------- shape ops

Grads reshapeLikeRule(const GradContext &c) {
  return {reshape(c.grad(), dimSpec(c.in(0).shape()))};
}

Grads permuteRule(const GradContext &c) {
  std::vector<int64_t> dims = getInts(c.attrs(), "dims"), inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[normalizeAxis(dims[i], int64_t(dims.size()))] = int64_t(i);
  return {permute(c.grad(), inverse)};
}

Grads transposeRule(const GradContext &c) {
  return {transpose(c.grad(), getInt(c.attrs(), "dim0"), getInt(c.attrs(), "dim1"))};
}

Grads broadcastRule(const GradContext &c) { return {reduceToShape(c.grad(), c.in(0).shape())}; }

Grads sliceRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  const AttrMap &a = c.attrs();
  const auto &[axes, starts, ends, steps] = sliceAttrs(a);
  Tensor g = c.grad();
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = normalizeAxis(axes[i], x.rank());
    if (!x.shape()[axis].isStatic())
      continue; // a symbolic dim is always sliced whole
    int64_t size = x.shape()[axis].value();
    SliceRange r = sliceRange(size, starts[i], ends[i], steps[i]);
    g = unsliceAxis(g, axis, r.start, r.step, size);
  }
  return {g};
}

Grads concatRule(const GradContext &c) {
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), c.in(0).rank());
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    sizes.push_back(staticDim(c.in(i), axis, "concat"));
  std::vector<Tensor> parts =
      c.inputs.size() == 1 ? std::vector<Tensor>{c.grad()} : split(c.grad(), sizes, axis);
  Grads out;
  for (size_t i = 0; i < parts.size(); ++i)
    out.push_back(c.needsGrad[i] ? std::optional<Tensor>(parts[i]) : std::nullopt);
  return out;
}

Grads splitRule(const GradContext &c) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < c.outputs.size(); ++i)
    parts.push_back(c.grad(i));
  return {concat(parts, getInt(c.attrs(), "axis"))};
}

Grads gatherRule(const GradContext &c) {
  const Tensor &x = c.in(0), &index = c.in(1);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  const Dim &S = x.shape()[axis];
  int64_t r = x.rank();
  // contribution[..., s] = g * (index == s), summed over the gather axis.
  Tensor oneHot = floatMask(
      eq(unsqueeze(index, -1), iotaAlong(c.tracer, S, r, r + 1, index.dtype())), x.dtype());
  Tensor contrib = sum(unsqueeze(c.grad(), -1) * oneHot, {axis}); // index dims without axis, then S
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < r - 1; ++d) {
    if (d == axis)
      perm.push_back(r - 1);
    perm.push_back(d);
  }
  if (axis == r - 1)
    perm.push_back(r - 1);
  Tensor dx = permute(contrib, perm);
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && dx.shape()[d] != x.shape()[d])
      dx = padAxis(dx, d, 0, x.shape()[d].value() - dx.shape()[d].value());
  return {dx, std::nullopt};
}

Grads indexSelectRule(const GradContext &c) {
  const Tensor &x = c.in(0), &index = c.in(1);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  const Dim &S = x.shape()[axis];
  auto oneHot = [&] { // (n, S)
    return floatMask(eq(unsqueeze(index, 1), iotaAlong(c.tracer, S, 1, 2, index.dtype())), x.dtype());
  };
  std::vector<int64_t> front{axis};
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis)
      front.push_back(d);
  Tensor g = permute(c.grad(), front);
  Shape rest(g.shape().begin() + 1, g.shape().end());
  Tensor flat = reshape(g, dimSpec({g.shape()[0], numElements(rest)}));
  Tensor dFront = S.isStatic() ? rowsSummedByIndex(flat, index, S.value(), x)
                               : matmul(transpose(oneHot(), 0, 1), flat); // (S, rest)
  Shape frontShape{S};
  frontShape.insert(frontShape.end(), rest.begin(), rest.end());
  std::vector<int64_t> inverse(front.size());
  for (size_t i = 0; i < front.size(); ++i)
    inverse[front[i]] = int64_t(i);
  return {permute(reshape(dFront, dimSpec(frontShape)), inverse), std::nullopt};
}

Grads padRule(const GradContext &c) {
  std::vector<int64_t> pads = getInts(c.attrs(), "pads");
  for (int64_t &p : pads)
    p = -p;
  return {pad(c.grad(), pads)};
}

const std::unordered_map<std::string, GradRule> &table() {
  static const std::unordered_map<std::string, GradRule> t = [] {
    std::unordered_map<std::string, GradRule> r;
    for (const char *op : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh",
                           "sigmoid", "relu", "gelu", "silu", "sin", "cos", "erf"})
      r[op] = unaryRule;
    for (const char *op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum"})
      r[op] = binaryRule;
    r["where"] = whereRule;
    r["cast"] = castRule;
    r["clamp"] = clampRule;
    for (const char *op : {"sum", "mean", "max", "min", "prod", "var", "logsumexp"})
      r[op] = reductionRule;
    r["matmul"] = matmulRule;
    r["softmax"] = r["log_softmax"] = softmaxRule;
    r["layer_norm"] = layerNormRule;
    r["rms_norm"] = rmsNormRule;
    r["batch_norm"] = batchNormRule;
    r["cross_entropy"] = crossEntropyRule;
    r["embedding"] = embeddingRule;
    r["dropout"] = dropoutRule;
    r["scaled_dot_product_attention"] = r["scaled_dot_product_attention_with_lse"] = attentionRule;
    r["conv2d"] = conv2dRule;
    r["max_pool2d"] = r["avg_pool2d"] = poolRule;
    r["reshape"] = r["squeeze"] = r["unsqueeze"] = r["flatten"] = reshapeLikeRule;
    r["permute"] = permuteRule;
    r["transpose"] = transposeRule;
    r["broadcast_to"] = broadcastRule;
    r["slice"] = sliceRule;
    r["concat"] = concatRule;
    r["split"] = splitRule;
    r["gather"] = gatherRule;
    r["index_select"] = indexSelectRule;
    r["pad"] = padRule;
    r.insert(collectiveGradRules().begin(), collectiveGradRules().end());
    return r;
  }();
  return t;
}

} // namespace

const GradRule *findGradRule(const std::string &op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

} // namespace tensorc::autodiff
