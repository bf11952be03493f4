#include "test/fuzz/RandomGraph.h"

#include "compiler/trace/Tracer.h"
#include "ir/core/Error.h"
#include "runtime/host/Parity.h"

#include <algorithm>
#include <map>
#include <functional>
#include <numeric>
#include <random>
#include <set>

namespace tensorc::fuzz {
namespace {

using trace::Operand;
using trace::Tensor;
using trace::Tracer;

// A value in the pool. `exact`: computed without rounding from the inputs
// (inputs, views of them, integer and bool ops on exact values). Only exact
// values feed discontinuous ops (floor, comparisons, argmax, float -> int
// casts): on rounded values one ulp of legitimate difference between two
// engines flips their result, which is no bug.
//
// `lowp`: holds f16/bf16 rounding that the two engines do differently (the
// interpreter rounds every op's result to the dtype; compiled kernels keep
// f32 between fused ops). Such values only feed well-conditioned ops: a
// reciprocal near 0 or the sine of a large argument turns one bf16 ulp into
// any difference at all.
// `unbounded`: may be huge (from exp, reciprocal, div, ...). sin/cos take
// only bounded values: the CPU backend reduces their argument exactly up to
// |x| ~ 1e15 (docs/cpu-backend.md), not as far as libm does.
struct Value {
  Tensor t;
  bool exact;
  bool lowp = false;
  bool unbounded = false;
  bool input = false;
};

class Generator {
public:
  Generator(uint64_t seed, const RandomGraphOptions &o) : rng_(seed), o_(o), t_("fuzz") {}

  Graph build() {
    int inputs = 1 + pick(3);
    for (int i = 0; i < inputs; ++i)
      newInput(randomDType(), randomShape());
    int nodes = o_.minNodes + pick(o_.maxNodes - o_.minNodes + 1);
    int made = 0;
    for (int tries = 0; made < nodes && tries < nodes * 40; ++tries)
      made += step() ? 1 : 0;
    if (made == 0)
      add("cast", {pool_.back().t}, {{"to", DType::F32}}, false);
    // The last value is an output; others with some probability (several
    // outputs, values both stored and fused).
    std::vector<size_t> outputs = {pool_.size() - 1};
    for (size_t i = 0; i + 1 < pool_.size(); ++i)
      if (chance(0.2) && !pool_[i].input)
        outputs.push_back(i);
    std::sort(outputs.begin(), outputs.end());
    for (size_t i : outputs)
      t_.output(pool_[i].t);
    return t_.graph();
  }

private:
  int pick(int n) { return n <= 1 ? 0 : int(rng_() % uint64_t(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T> const T &oneOf(const std::vector<T> &v) { return v[size_t(pick(int(v.size())))]; }

  DType randomDType() {
    DType d = drawDType();
    return o_.onlyF64 && isFloat(d) ? DType::F64 : d;
  }
  DType drawDType() {
    int r = pick(100);
    if (o_.lowPrecision && r < 8)
      return DType::BF16;
    if (o_.lowPrecision && r < 16)
      return DType::F16;
    if (r < 26)
      return DType::F64;
    if (r < 34)
      return DType::I64;
    if (r < 40)
      return DType::I32;
    if (r < 44)
      return DType::I1;
    return DType::F32;
  }
  DType randomFloat() {
    if (o_.onlyF64)
      return DType::F64;
    int r = pick(10);
    return o_.lowPrecision && r == 0 ? DType::BF16 : o_.lowPrecision && r == 1 ? DType::F16
                                                   : r < 4                   ? DType::F64
                                                                             : DType::F32;
  }

  std::vector<int64_t> randomShape() {
    int rank = pick(o_.maxRank + 1);
    if (rank == 0 && chance(0.5))
      rank = 1 + pick(o_.maxRank);
    std::vector<int64_t> s;
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) {
      int64_t d = oneOf<int64_t>({1, 1, 2, 3, 4, 5, 7, 8, 13});
      if (n * d > o_.maxElements)
        d = 1;
      s.push_back(d);
      n *= d;
    }
    return s;
  }

  Tensor newInput(DType d, const std::vector<int64_t> &shape) {
    std::vector<std::variant<int64_t, std::string>> s(shape.begin(), shape.end());
    Tensor t = t_.input("in" + std::to_string(inputs_++), d, s);
    pool_.push_back({t, true, false, false, /*input=*/true});
    return t;
  }

  static std::vector<int64_t> staticShape(const Tensor &t) {
    std::vector<int64_t> s;
    for (const Dim &d : t.shape())
      s.push_back(d.value());
    return s;
  }
  static int64_t numel(const std::vector<int64_t> &s) {
    return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>());
  }

  // A pool value, preferring recent ones (deeper graphs), filtered.
  const Value *choose(const std::function<bool(const Value &)> &ok) {
    std::vector<const Value *> c;
    for (const Value &v : pool_)
      if (ok(v))
        c.push_back(&v);
    if (c.empty())
      return nullptr;
    if (chance(0.5))
      return c.back();
    return c[size_t(pick(int(c.size())))];
  }
  const Value *anyFloat() {
    return choose([](const Value &v) { return isFloat(v.t.dtype()); });
  }

  int64_t randomAxis(int64_t rank) { return rank == 0 ? 0 : pick(int(rank)) - (chance(0.3) ? rank : 0); }
  std::vector<int64_t> randomAxes(int64_t rank) {
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < rank; ++a)
      if (chance(0.5))
        axes.push_back(chance(0.3) ? a - rank : a);
    if (axes.empty() && rank > 0)
      axes.push_back(pick(int(rank)));
    return axes;
  }

  bool add(const std::string &op, const std::vector<Operand> &args, AttrMap attrs, bool exact) {
    std::vector<Tensor> results;
    try {
      results = t_.call(op, args, std::move(attrs));
    } catch (const Error &) {
      return false; // the shape rules refused this draw: draw again
    }
    bool lowp = false;
    static const std::set<std::string> growing = {"exp", "reciprocal", "div", "rsqrt", "log",
                                                  "pow", "prod", "sum", "matmul", "var"};
    bool unbounded = growing.count(op) != 0;
    for (const Operand &a : args)
      if (const Tensor *t = std::get_if<Tensor>(&a))
        for (const Value &v : pool_)
          if (v.t.ref() == t->ref()) {
            lowp |= v.lowp;
            unbounded |= v.unbounded;
          }
    // Normalizations are computed differently by the engines (the
    // interpreter in f64, kernels in f32 around a shift), and their outputs
    // sum to ~0 by construction (a mean of a layer_norm is cancellation):
    // like rounded values, they never feed ill-conditioned ops (a division
    // by them, rsqrt of their mean). Found by long runs: div by layer_norm *
    // x near 0, rsqrt(clamp(mean(layer_norm(x)))). Sums and dot products of
    // mixed signs likewise (OpenBLAS and f32 accumulation vs the interpreter's
    // f64): 2 / matmul(x, w) near 0 differed by 0.6%.
    static const std::set<std::string> normalizing = {"layer_norm", "rms_norm", "softmax",
                                                      "log_softmax", "var", "matmul",
                                                      "sum", "mean", "prod"};
    lowp |= normalizing.count(op) != 0;
    // gelu/silu/sigmoid of a large negative argument are ~0 by cancellation
    // (gelu tanh: 0.5 x (1 + tanh(...)) with tanh ~ -1): their relative error
    // is unbounded. Found by a long run: reciprocal(gelu_tanh(reciprocal(x))).
    static const std::set<std::string> vanishing = {"gelu", "silu", "sigmoid"};
    lowp |= unbounded && vanishing.count(op) != 0;
    for (const Tensor &r : results) {
      if (numel(staticShape(r)) > o_.maxElements * 4)
        return false; // still valid, but the pool stays small; it is simply unused
      bool narrow = r.dtype() == DType::F16 || r.dtype() == DType::BF16;
      pool_.push_back({r, exact, (lowp || narrow) && !exact, unbounded});
    }
    return true;
  }

  // One random op; false if the draw was refused.
  bool step() {
    switch (pick(15)) {
    case 0:
    case 1: { // unary float
      const Value *x = anyFloat();
      if (!x)
        return false;
      static const std::vector<std::string> ops = {"neg",  "abs",  "exp",     "tanh", "sigmoid",
                                                   "relu", "gelu", "silu",    "sin",  "cos",
                                                   "erf",  "sqrt", "log",     "rsqrt", "reciprocal"};
      static const std::set<std::string> illConditioned = {"exp",   "sin",       "cos", "log",
                                                           "rsqrt", "reciprocal", "sqrt"};
      std::string op = oneOf(ops);
      if ((x->lowp && illConditioned.count(op)) || ((op == "sin" || op == "cos") && x->unbounded))
        op = "tanh";
      AttrMap attrs;
      if (op == "gelu" && chance(0.5))
        attrs["approximate"] = std::string("tanh");
      return add(op, {x->t}, attrs, false);
    }
    case 2: { // discontinuous unary on exact values
      const Value *x = choose([](const Value &v) { return v.exact && !isBool(v.t.dtype()); });
      if (!x)
        return false;
      if (isFloat(x->t.dtype()))
        return add(oneOf<std::string>({"floor", "ceil", "sign"}), {x->t}, {}, x->exact);
      return add(oneOf<std::string>({"neg", "abs", "sign"}), {x->t}, {}, true);
    }
    case 3:
    case 4: { // binary arithmetic with broadcasting (or a literal)
      const Value *a = choose([](const Value &v) { return !isBool(v.t.dtype()); });
      if (!a)
        return false;
      bool fl = isFloat(a->t.dtype());
      std::string op = fl ? oneOf<std::string>({"add", "sub", "mul", "div", "maximum", "minimum", "pow"})
                          : oneOf<std::string>({"add", "sub", "mul", "maximum", "minimum"});
      if (chance(0.3)) {
        Operand lit = fl ? Operand(double(pick(7)) * 0.5 - 1.0) : Operand(int64_t(pick(7) - 3));
        if (op == "pow" && fl)
          lit = Operand(double(1 + pick(3)));
        if (op == "div" && a->lowp)
          op = "mul"; // a literal divided by a rounded value
        return add(op, chance(0.5) ? std::vector<Operand>{a->t, lit} : std::vector<Operand>{lit, a->t},
                   {}, !fl && a->exact);
      }
      const Value *b = choose([&](const Value &v) { return v.t.dtype() == a->t.dtype(); });
      // pow of a negative base jumps between nan and a number as the exponent
      // crosses an integer: only exact operands, as for other discontinuities.
      if (op == "pow" && (!(a->exact && b->exact) || o_.onlyF64))
        op = "mul";
      if (op == "div" && b->lowp)
        op = "mul";
      return add(op, {a->t, b->t}, {}, !fl && a->exact && b->exact);
    }
    case 5: { // comparisons and logic on exact values
      const Value *a = choose([](const Value &v) { return v.exact; });
      if (!a)
        return false;
      if (isBool(a->t.dtype())) {
        if (chance(0.3))
          return add("logical_not", {a->t}, {}, true);
        const Value *b = choose([](const Value &v) { return v.exact && isBool(v.t.dtype()); });
        return add(oneOf<std::string>({"logical_and", "logical_or", "eq", "ne"}), {a->t, b->t}, {}, true);
      }
      const Value *b = choose([&](const Value &v) { return v.exact && v.t.dtype() == a->t.dtype(); });
      return add(oneOf<std::string>({"eq", "ne", "lt", "le", "gt", "ge"}), {a->t, b->t}, {}, true);
    }
    case 6: { // where
      const Value *c = choose([](const Value &v) { return isBool(v.t.dtype()); });
      const Value *x = choose([](const Value &v) { return !isBool(v.t.dtype()); });
      if (!c || !x)
        return false;
      const Value *y = choose([&](const Value &v) { return v.t.dtype() == x->t.dtype(); });
      return add("where", {c->t, x->t, y->t}, {}, x->exact && y->exact);
    }
    case 7: { // cast: every pair; float -> int/bool only from exact values
      const Value *x = choose([](const Value &) { return true; });
      DType to = randomDType();
      if (isFloat(x->t.dtype()) && !isFloat(to) && !x->exact)
        return false;
      bool exact = x->exact && (!isFloat(to) || (isFloat(x->t.dtype()) &&
                                                 dtypeSize(to) >= dtypeSize(x->t.dtype())));
      return add("cast", {x->t}, {{"to", to}}, exact);
    }
    case 8: { // clamp
      const Value *x = choose([](const Value &v) { return !isBool(v.t.dtype()); });
      if (!x)
        return false;
      AttrMap attrs;
      if (chance(0.7))
        attrs["min"] = double(pick(5)) * 0.25 - 0.75;
      if (chance(0.7) || attrs.empty())
        attrs["max"] = double(pick(5)) * 0.25;
      return add("clamp", {x->t}, attrs, x->exact);
    }
    case 9:
    case 10: { // reductions
      const Value *x = choose([](const Value &v) { return !isBool(v.t.dtype()) && v.t.rank() > 0; });
      if (!x)
        return false;
      int64_t r = x->t.rank();
      bool fl = isFloat(x->t.dtype());
      int kind = pick(10);
      AttrMap attrs;
      if (chance(0.5))
        attrs["keepdim"] = true;
      if (kind < 5) {
        std::string op = oneOf<std::string>({"sum", "mean", "max", "min", "prod", "logsumexp"});
        if (!fl && (op == "mean" || op == "logsumexp"))
          op = "sum";
        if (op == "prod" && numel(staticShape(x->t)) > 16)
          op = "max"; // prod of many values overflows to inf in one engine and not another
        if (chance(0.8))
          attrs["axes"] = randomAxes(r);
        bool exact = !fl && x->exact;
        return add(op, {x->t}, attrs, exact || ((op == "max" || op == "min") && x->exact));
      }
      if (kind < 7) {
        if (!x->exact)
          return false;
        if (chance(0.8))
          attrs["axis"] = randomAxis(r);
        return add(oneOf<std::string>({"argmax", "argmin"}), {x->t}, attrs, true);
      }
      // Normalizations subtract a large shared part (log_softmax of values
      // near 15 gives results near 1): one f16 ulp of the input's rounding is
      // past the output's tolerance. Not on lowp values.
      if (!fl || x->lowp)
        return false;
      if (kind == 7)
        return add(oneOf<std::string>({"softmax", "log_softmax"}), {x->t}, {{"axis", randomAxis(r)}},
                   false);
      if (kind == 8) {
        attrs["axes"] = randomAxes(r);
        attrs["correction"] = int64_t(pick(2));
        return add("var", {x->t}, attrs, false);
      }
      return add(oneOf<std::string>({"layer_norm", "rms_norm"}), {x->t}, {{"axis", randomAxis(r)}},
                 false);
    }
    case 11:
    case 12: // views
      return view();
    case 13: { // concat / split
      const Value *x = choose([](const Value &v) { return v.t.rank() > 0; });
      if (!x)
        return false;
      int64_t r = x->t.rank(), axis = randomAxis(r);
      std::vector<int64_t> shape = staticShape(x->t);
      int64_t a = axis < 0 ? axis + r : axis;
      if (chance(0.5)) {
        const Value *y = choose([&](const Value &v) {
          if (v.t.dtype() != x->t.dtype() || v.t.rank() != r)
            return false;
          std::vector<int64_t> s = staticShape(v.t);
          for (int64_t d = 0; d < r; ++d)
            if (d != a && s[size_t(d)] != shape[size_t(d)])
              return false;
          return true;
        });
        return add("concat", {x->t, y->t}, {{"axis", axis}}, x->exact && y->exact);
      }
      int64_t n = shape[size_t(a)];
      std::vector<int64_t> sizes;
      for (int64_t left = n; left > 0;) {
        int64_t s = 1 + pick(int(left));
        sizes.push_back(s);
        left -= s;
      }
      return add("split", {x->t}, {{"sizes", sizes}, {"axis", axis}}, x->exact);
    }
    default: { // matmul with a fresh weight
      // Not on lowp values: a dot product of rounded bf16 values with
      // cancellation amplifies one ulp past the tolerance.
      const Value *x = choose([](const Value &v) {
        return isFloat(v.t.dtype()) && v.t.rank() > 0 && v.t.rank() <= 3 && !v.lowp;
      });
      if (!x)
        return false;
      Tensor xt = x->t; // newInput grows the pool: x would dangle
      int64_t k = staticShape(xt).back(), n = oneOf<int64_t>({1, 3, 4, 6});
      if (k < 1)
        return false;
      Tensor w = chance(0.3) ? newInput(xt.dtype(), {k}) : newInput(xt.dtype(), {k, n});
      return add("matmul", {xt, w}, {}, false);
    }
    }
  }

  bool view() {
    const Value *x = choose([](const Value &) { return true; });
    int64_t r = x->t.rank();
    std::vector<int64_t> shape = staticShape(x->t);
    switch (pick(9)) {
    case 0:
      if (r < 1)
        return false;
      return add("transpose", {x->t}, {{"dim0", randomAxis(r)}, {"dim1", randomAxis(r)}}, x->exact);
    case 1: {
      std::vector<int64_t> perm(static_cast<size_t>(r));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng_);
      return add("permute", {x->t}, {{"dims", perm}}, x->exact);
    }
    case 2: { // reshape to a random factorization
      int64_t n = numel(shape);
      Shape target;
      for (int64_t left = n; left > 1;) {
        std::vector<int64_t> divisors;
        for (int64_t d = 2; d <= left; ++d)
          if (left % d == 0)
            divisors.push_back(d);
        int64_t d = oneOf(divisors);
        target.push_back(Dim::of(d));
        left /= d;
        if (chance(0.2))
          target.push_back(Dim::of(1));
      }
      return add("reshape", {x->t}, {{"shape", target}}, x->exact);
    }
    case 3:
      return add("unsqueeze", {x->t}, {{"axis", int64_t(pick(int(r) + 1))}}, x->exact);
    case 4:
      return add("squeeze", {x->t}, {}, x->exact);
    case 5:
      if (r < 1)
        return false;
      return add("flatten", {x->t}, {{"start_axis", int64_t(pick(int(r)))}}, x->exact);
    case 6: { // slice with steps and negative indices
      if (r < 1)
        return false;
      int64_t a = pick(int(r)), n = shape[size_t(a)];
      int64_t start = pick(int(n)) - (chance(0.3) ? n : 0), end = 1 + pick(int(n) + 1);
      return add("slice", {x->t},
                 {{"axes", std::vector<int64_t>{a}},
                  {"starts", std::vector<int64_t>{start}},
                  {"ends", std::vector<int64_t>{chance(0.2) ? int64_t(1) << 40 : end}},
                  {"steps", std::vector<int64_t>{1 + pick(3)}}},
                 x->exact);
    }
    case 7: { // broadcast_to: expand size-1 dims, maybe prepend one
      Shape target;
      if (chance(0.5))
        target.push_back(Dim::of(oneOf<int64_t>({2, 3})));
      for (int64_t d : shape)
        target.push_back(Dim::of(d == 1 && chance(0.6) ? oneOf<int64_t>({2, 5}) : d));
      return add("broadcast_to", {x->t}, {{"shape", target}}, x->exact);
    }
    default: { // pad, cropping too
      if (r < 1 || isBool(x->t.dtype()))
        return false;
      std::vector<int64_t> pads = {int64_t(pick(3)) - 1, int64_t(pick(3))};
      return add("pad", {x->t}, {{"pads", pads}, {"value", 0.5}}, x->exact);
    }
    }
  }

  std::mt19937_64 rng_;
  RandomGraphOptions o_;
  Tracer t_;
  std::vector<Value> pool_;
  int inputs_ = 0;
};

} // namespace

Graph randomGraph(uint64_t seed, const RandomGraphOptions &options) {
  return Generator(seed, options).build();
}

double outputTolerance(const Graph &g, const GraphAnalysis &a, const std::string &output,
                       DType dtype) {
  std::map<std::string, double> tol; // producer -> tolerance of its inputs' path
  for (const GraphInput &in : g.inputs)
    tol[in.name] = parityTolerance(in.spec.dtype);
  for (const TypedNode &n : a.nodes) {
    double t = 0;
    for (const Arg &arg : n.node->args)
      if (arg.kind == Arg::Kind::Value)
        t = std::max(t, tol[parseValueRef(arg.value).producer]);
    for (const TensorSpec &r : n.results)
      t = std::max(t, parityTolerance(r.dtype));
    tol[n.node->name] = t;
  }
  return isFloat(dtype) ? std::max(parityTolerance(dtype), tol[parseValueRef(output).producer]) : 0;
}

} // namespace tensorc::fuzz
