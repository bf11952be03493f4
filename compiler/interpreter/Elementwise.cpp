// Unary, binary and select ops: floats computed in double, integers in int64,
// each result rounded once to its dtype.
#include "compiler/interpreter/Kernels.h"

#include "ir/core/Error.h"

#include <cmath>
#include <optional>

namespace tensorc::interp {
namespace {

using FloatFn = double (*)(double);
using IntFn = int64_t (*)(int64_t);

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const std::unordered_map<std::string, FloatFn> &floatUnary() {
  static const std::unordered_map<std::string, FloatFn> m = {
      {"neg", [](double x) { return -x; }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }},
      {"reciprocal", [](double x) { return 1.0 / x; }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", sigmoid},
      {"relu", [](double x) { return std::isnan(x) ? x
                                     : x > 0       ? x
                                                   : 0.0; }},
      {"silu", [](double x) { return x * sigmoid(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"floor", [](double x) { return std::floor(x); }},
      {"ceil", [](double x) { return std::ceil(x); }},
      // 0 for nan and both zeros, as PyTorch's sign ((0 < x) - (x < 0)).
      {"sign", [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }},
  };
  return m;
}

const std::unordered_map<std::string, IntFn> &intUnary() {
  static const std::unordered_map<std::string, IntFn> m = {
      {"neg", [](int64_t x) { return int64_t(0 - uint64_t(x)); }},
      {"abs", [](int64_t x) { return x < 0 ? int64_t(0 - uint64_t(x)) : x; }},
      {"relu", [](int64_t x) { return x > 0 ? x : int64_t(0); }},
      {"floor", [](int64_t x) { return x; }},
      {"ceil", [](int64_t x) { return x; }},
      {"sign", [](int64_t x) { return int64_t(x > 0) - int64_t(x < 0); }},
  };
  return m;
}

double gelu(double x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

std::vector<HostTensor> unary(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  HostTensor out = c.result();
  const std::string &op = c.node.node->op;
  if (op == "logical_not") {
    for (int64_t i = 0; i < x.numel(); ++i)
      out.setI(i, x.getF(i) == 0);
  } else if (op == "gelu") {
    bool approx = getEnum(c.attrs(), "approximate") == "tanh";
    for (int64_t i = 0; i < x.numel(); ++i)
      out.setF(i, gelu(x.getF(i), approx));
  } else if (isFloat(x.dtype())) {
    FloatFn f = floatUnary().at(op);
    for (int64_t i = 0; i < x.numel(); ++i)
      out.setF(i, f(x.getF(i)));
  } else {
    IntFn f = intUnary().at(op);
    for (int64_t i = 0; i < x.numel(); ++i)
      out.setI(i, f(x.getI(i)));
  }
  return {std::move(out)};
}

// Comparisons and logical ops: the same rule for floats and integers.
template <typename T> std::optional<bool> compareOrLogical(const std::string &op, T a, T b) {
  if (op == "eq")
    return a == b;
  if (op == "ne")
    return a != b;
  if (op == "lt")
    return a < b;
  if (op == "le")
    return a <= b;
  if (op == "gt")
    return a > b;
  if (op == "ge")
    return a >= b;
  if (op == "logical_and")
    return (a != 0) && (b != 0);
  if (op == "logical_or")
    return (a != 0) || (b != 0);
  return std::nullopt;
}

double floatBinary(const std::string &op, double a, double b) {
  if (op == "add")
    return a + b;
  if (op == "sub")
    return a - b;
  if (op == "mul")
    return a * b;
  if (op == "div")
    return a / b;
  if (op == "pow")
    return std::pow(a, b);
  if (op == "maximum")
    return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  if (op == "minimum")
    return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  if (std::optional<bool> r = compareOrLogical(op, a, b))
    return *r;
  fail("no float rule for " + op);
}

int64_t intBinary(const std::string &op, int64_t a, int64_t b) {
  // Wrapping arithmetic, as two's-complement hardware does.
  if (op == "add")
    return int64_t(uint64_t(a) + uint64_t(b));
  if (op == "sub")
    return int64_t(uint64_t(a) - uint64_t(b));
  if (op == "mul")
    return int64_t(uint64_t(a) * uint64_t(b));
  if (op == "maximum")
    return std::max(a, b);
  if (op == "minimum")
    return std::min(a, b);
  if (std::optional<bool> r = compareOrLogical(op, a, b))
    return *r;
  fail("no integer rule for " + op);
}

std::vector<HostTensor> binary(const OpCall &c) {
  const HostTensor &a = c.arg(0), &b = c.arg(1);
  HostTensor out = c.result();
  const std::string &op = c.node.node->op;
  bool floats = isFloat(a.dtype()) || isFloat(b.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, out.shape());
    int64_t ia = broadcastOffset(coords, a.shape()), ib = broadcastOffset(coords, b.shape());
    if (floats)
      out.setF(i, floatBinary(op, a.getF(ia), b.getF(ib)));
    else
      out.setI(i, intBinary(op, a.getI(ia), b.getI(ib)));
  }
  return {std::move(out)};
}

std::vector<HostTensor> where(const OpCall &c) {
  const HostTensor &cond = c.arg(0), &x = c.arg(1), &y = c.arg(2);
  HostTensor out = c.result();
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, out.shape());
    const HostTensor &pick = cond.getI(broadcastOffset(coords, cond.shape())) ? x : y;
    int64_t j = broadcastOffset(coords, pick.shape());
    isFloat(out.dtype()) ? out.setF(i, pick.getF(j)) : out.setI(i, pick.getI(j));
  }
  return {std::move(out)};
}

std::vector<HostTensor> cast(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  HostTensor out = c.result();
  for (int64_t i = 0; i < x.numel(); ++i)
    isFloat(x.dtype()) ? out.setF(i, x.getF(i)) : out.setI(i, x.getI(i));
  return {std::move(out)};
}

std::vector<HostTensor> clamp(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  HostTensor out = c.result();
  bool hasMin = hasAttr(c.attrs(), "min"), hasMax = hasAttr(c.attrs(), "max");
  double lo = hasMin ? getFloat(c.attrs(), "min") : 0, hi = hasMax ? getFloat(c.attrs(), "max") : 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (isFloat(x.dtype())) {
      double v = x.getF(i);
      if (hasMin && v < lo)
        v = lo;
      if (hasMax && v > hi)
        v = hi;
      out.setF(i, v);
    } else {
      // Integer bounds: the nearest integers inside [min, max].
      int64_t v = x.getI(i);
      if (hasMin && double(v) < lo)
        v = int64_t(std::ceil(lo));
      if (hasMax && double(v) > hi)
        v = int64_t(std::floor(hi));
      out.setI(i, v);
    }
  }
  return {std::move(out)};
}

} // namespace

void addElementwiseKernels(KernelTable &t) {
  for (const auto &[name, fn] : floatUnary())
    t[name] = unary;
  t["gelu"] = t["logical_not"] = unary;
  for (const char *n : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt",
                        "le", "gt", "ge", "logical_and", "logical_or"})
    t[n] = binary;
  t["where"] = where;
  t["cast"] = cast;
  t["clamp"] = clamp;
}

} // namespace tensorc::interp
