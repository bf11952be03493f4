#include "compiler/driver/RandomInputs.h"

#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"

#include <set>
#include <random>

namespace tensorc {

std::map<std::string, int64_t> defaultBindings(const Graph &g,
                                               const std::map<std::string, int64_t> &dims) {
  std::map<std::string, int64_t> b = dims;
  for (const GraphInput &in : g.inputs)
    for (const Dim &d : in.spec.shape)
      for (const std::string &s : d.symbols())
        if (!b.count(s)) {
          auto bound = g.dims.find(s);
          int64_t v = 4;
          if (bound != g.dims.end()) {
            v = std::max(v, bound->second.min);
            if (bound->second.max)
              v = std::min(v, *bound->second.max);
          }
          b[s] = v;
        }
  return b;
}

HostTensor randomTensor(DType dtype, const std::vector<int64_t> &shape, uint64_t seed,
                        int64_t intBound) {
  HostTensor t(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> integer(0, std::max<int64_t>(intBound, 1) - 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(dtype))
      t.setF(i, real(rng));
    else if (isBool(dtype))
      t.setI(i, int64_t(rng() & 1));
    else
      t.setI(i, integer(rng));
  }
  return t;
}

// The tightest index range any node imposes on the input `name`.
static int64_t indexBound(const GraphAnalysis &analysis, const std::string &name,
                          const std::map<std::string, int64_t> &bindings) {
  int64_t bound = 10;
  auto size = [&](const Dim &d) { return d.evaluate(bindings).value_or(bound); };
  for (const TypedNode &n : analysis.nodes) {
    const std::string &op = n.node->op;
    for (size_t i = 0; i < n.node->args.size(); ++i) {
      const Arg &a = n.node->args[i];
      if (a.kind != Arg::Kind::Value || a.value != name)
        continue;
      if (op == "embedding" && i == 0)
        bound = std::min(bound, size(n.argTypes[1]->shape[0]));
      else if (op == "embedding_backward" && i == 1)
        bound = std::min(bound, getInt(n.attrs, "num_weights"));
      else if (op == "cross_entropy" && i == 1) {
        const Shape &logits = n.argTypes[0]->shape;
        bound = std::min(bound, size(logits[logits.size() >= 2 ? 1 : 0]));
      } else if ((op == "gather" || op == "index_select") && i == 1) {
        int64_t axis = getInt(n.attrs, "axis");
        const Shape &x = n.argTypes[0]->shape;
        bound = std::min(bound, size(x[axis < 0 ? axis + int64_t(x.size()) : axis]));
      }
    }
  }
  return bound;
}

void checkDimSymbols(const Graph &g, const std::map<std::string, int64_t> &dims) {
  std::set<std::string> symbols;
  for (const GraphInput &in : g.inputs)
    for (const Dim &d : in.spec.shape)
      for (const std::string &s : d.symbols())
        symbols.insert(s);
  for (const auto &[name, bound] : g.dims)
    symbols.insert(name);
  for (const auto &[symbol, size] : dims) {
    if (symbols.count(symbol))
      continue;
    std::string known;
    for (const std::string &s : symbols)
      known += (known.empty() ? "" : ", ") + s;
    fail("dim " + symbol + "=" + std::to_string(size) + ": the model has no symbolic dim " + symbol +
         (known.empty() ? " (it has none)" : " (its symbolic dims: " + known + ")"));
  }
}

namespace {

// Shared by both entry points; without an analysis integers use [0, 10).
std::map<std::string, HostTensor> complete(const Graph &g, const GraphAnalysis *analysis,
                                           std::map<std::string, HostTensor> given, uint64_t seed,
                                           const std::map<std::string, int64_t> &dims) {
  // Symbols bound by given inputs take precedence over defaults.
  std::map<std::string, int64_t> bindings = dims;
  for (const GraphInput &in : g.inputs) {
    auto it = given.find(in.name);
    if (it == given.end() || it->second.rank() != in.spec.rank())
      continue;
    for (size_t i = 0; i < in.spec.shape.size(); ++i)
      if (in.spec.shape[i].isPlainSymbol())
        bindings.emplace(in.spec.shape[i].symbols()[0], it->second.shape()[i]);
  }
  bindings = defaultBindings(g, bindings);
  uint64_t stream = 0;
  for (const GraphInput &in : g.inputs) {
    ++stream;
    if (given.count(in.name))
      continue;
    int64_t bound = analysis ? indexBound(*analysis, in.name, bindings) : 10;
    given.emplace(in.name, randomTensor(in.spec.dtype, concreteShape(in.spec.shape, bindings),
                                        seed * 1000003 + stream, bound));
  }
  return given;
}

} // namespace

std::map<std::string, HostTensor> completeInputs(const Graph &g, const GraphAnalysis &analysis,
                                                 std::map<std::string, HostTensor> given,
                                                 uint64_t seed,
                                                 const std::map<std::string, int64_t> &dims) {
  return complete(g, &analysis, std::move(given), seed, dims);
}

std::map<std::string, HostTensor> completeSignatureInputs(const Graph &signature,
                                                          std::map<std::string, HostTensor> given,
                                                          uint64_t seed,
                                                          const std::map<std::string, int64_t> &dims) {
  return complete(signature, nullptr, std::move(given), seed, dims);
}

} // namespace tensorc
