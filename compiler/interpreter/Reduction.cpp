// sum, mean, max, min, prod, var, argmax, argmin: accumulate in double (floats)
// or int64 (integers) over the reduced axes, visiting elements in row-major
// order so "first on ties" is well defined.
#include "compiler/interpreter/Kernels.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <cmath>

namespace tensorc::interp {
namespace {

// For each input element, the linear index of its output element (the
// keepdim layout, which has the same order as the squeezed one).
struct ReductionMap {
  std::vector<int64_t> outIndex; // per input element
  int64_t outCount = 1;
  int64_t groupSize = 1; // elements per output
};

ReductionMap mapReduction(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes) {
  std::vector<int64_t> keep = shape;
  ReductionMap m;
  for (int64_t a : axes) {
    m.groupSize *= shape[a];
    keep[a] = 1;
  }
  m.outCount = product(keep, 0, keep.size());
  int64_t n = product(shape, 0, shape.size());
  m.outIndex.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> coords = unravel(i, shape);
    for (int64_t a : axes)
      coords[a] = 0;
    int64_t o = 0;
    for (size_t d = 0; d < keep.size(); ++d)
      o = o * keep[d] + coords[d];
    m.outIndex[i] = o;
  }
  return m;
}

std::vector<HostTensor> reduce(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  const std::string &op = c.node.node->op;
  std::vector<int64_t> axes = normalizeAxes(c.attrs(), "axes", x.rank());
  ReductionMap m = mapReduction(x.shape(), axes);
  HostTensor out = c.result();
  bool floats = isFloat(x.dtype());
  if ((op == "max" || op == "min") && m.groupSize == 0)
    fail(op + " over an empty range has no identity");
  std::vector<double> accF(m.outCount, op == "prod" ? 1.0 : 0.0);
  std::vector<int64_t> accI(m.outCount, op == "prod" ? 1 : 0);
  std::vector<bool> seen(m.outCount, false);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = m.outIndex[i];
    if (floats) {
      double v = x.getF(i);
      if (op == "sum" || op == "mean" || op == "var")
        accF[o] += v;
      else if (op == "prod")
        accF[o] *= v;
      else if (!seen[o] || std::isnan(v) ||
               (!std::isnan(accF[o]) && (op == "max" ? v > accF[o] : v < accF[o])))
        accF[o] = v;
    } else {
      int64_t v = x.getI(i);
      if (op == "sum")
        accI[o] = int64_t(uint64_t(accI[o]) + uint64_t(v));
      else if (op == "prod")
        accI[o] = int64_t(uint64_t(accI[o]) * uint64_t(v));
      else if (!seen[o] || (op == "max" ? v > accI[o] : v < accI[o]))
        accI[o] = v;
    }
    seen[o] = true;
  }
  if (op == "mean" || op == "var")
    for (double &v : accF)
      v /= double(m.groupSize);
  if (op == "var") {
    // Second pass: sum of squared deviations from the mean.
    std::vector<double> sq(m.outCount, 0.0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      double d = x.getF(i) - accF[m.outIndex[i]];
      sq[m.outIndex[i]] += d * d;
    }
    double denom = double(m.groupSize - getInt(c.attrs(), "correction"));
    for (int64_t o = 0; o < m.outCount; ++o)
      // As sq / max(0, n - correction) in IEEE arithmetic (PyTorch): 0/0 and
      // nan/0 are nan, anything else over 0 is inf.
      accF[o] = denom > 0 ? sq[o] / denom : (sq[o] == 0 || std::isnan(sq[o]) ? NAN : INFINITY);
  }
  for (int64_t o = 0; o < m.outCount; ++o)
    floats ? out.setF(o, accF[o]) : out.setI(o, accI[o]);
  return {std::move(out)};
}

// log(sum(exp(x))) per output, around each group's maximum (no overflow):
// -inf for an empty group or one of -inf only, +inf if any element is +inf,
// nan if any is nan.
std::vector<HostTensor> logSumExp(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  ReductionMap m = mapReduction(x.shape(), normalizeAxes(c.attrs(), "axes", x.rank()));
  std::vector<double> top(m.outCount, -INFINITY), sum(m.outCount, 0.0);
  std::vector<bool> nan(m.outCount, false);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.getF(i);
    int64_t o = m.outIndex[i];
    if (std::isnan(v))
      nan[o] = true;
    else if (v > top[o])
      top[o] = v;
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = m.outIndex[i];
    double v = x.getF(i);
    if (!nan[o] && std::isfinite(top[o]))
      sum[o] += std::exp(v - top[o]);
  }
  HostTensor out = c.result();
  for (int64_t o = 0; o < m.outCount; ++o)
    out.setF(o, nan[o] ? NAN : std::isfinite(top[o]) ? top[o] + std::log(sum[o]) : top[o]);
  return {std::move(out)};
}

std::vector<HostTensor> argReduce(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  bool isMax = c.node.node->op == "argmax";
  bool flat = !hasAttr(c.attrs(), "axis");
  std::vector<int64_t> axes;
  if (flat)
    for (int64_t a = 0; a < x.rank(); ++a)
      axes.push_back(a);
  else
    axes.push_back(normalizeAxis(getInt(c.attrs(), "axis"), x.rank()));
  ReductionMap m = mapReduction(x.shape(), axes);
  check(m.groupSize > 0, c.node.node->op + " over an empty range");
  int64_t axisLen = flat ? 1 : x.shape()[axes[0]];
  int64_t inner = flat ? 1 : product(x.shape(), axes[0] + 1, x.shape().size());
  std::vector<double> best(m.outCount);
  std::vector<int64_t> bestIndex(m.outCount, -1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = m.outIndex[i];
    int64_t index = flat ? i : (i / inner) % axisLen;
    double v = isFloat(x.dtype()) ? x.getF(i) : double(x.getI(i));
    bool better;
    if (bestIndex[o] < 0)
      better = true;
    else if (std::isnan(best[o]))
      better = false; // the first nan wins
    else if (std::isnan(v))
      better = true;
    else
      better = isMax ? v > best[o] : v < best[o];
    if (better) {
      best[o] = v;
      bestIndex[o] = index;
    }
  }
  HostTensor out = c.result();
  for (int64_t o = 0; o < m.outCount; ++o)
    out.setI(o, bestIndex[o]);
  return {std::move(out)};
}

} // namespace

void addReductionKernels(KernelTable &t) {
  for (const char *n : {"sum", "mean", "max", "min", "prod", "var"})
    t[n] = reduce;
  t["argmax"] = t["argmin"] = argReduce;
  t["logsumexp"] = logSumExp;
}

} // namespace tensorc::interp
