#include "compiler/graph/GraphAnalysis.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>
#include <unordered_map>

namespace tensorc {

ValueRef parseValueRef(const std::string &ref) {
  size_t colon = ref.rfind(':');
  if (colon == std::string::npos)
    return {ref, 0};
  std::string digits = ref.substr(colon + 1);
  if (digits.empty() || digits.size() > 6 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return {ref, -1};
  return {ref.substr(0, colon), std::stoi(digits)};
}

DType literalDType(const Literal &literal, const std::vector<std::optional<TensorSpec>> &argTypes) {
  if (literal.dtype)
    return *literal.dtype;
  const TensorSpec *firstTensor = nullptr;
  for (const auto &t : argTypes) {
    if (!t)
      continue;
    if (!isBool(t->dtype))
      return t->dtype;
    if (!firstTensor)
      firstTensor = &*t;
  }
  if (firstTensor)
    return firstTensor->dtype;
  switch (literal.kind) {
  case Literal::Kind::Int:
    return DType::I64;
  case Literal::Kind::Float:
    return DType::F32;
  case Literal::Kind::Bool:
    return DType::I1;
  }
  return DType::F32;
}

namespace {

bool isValidName(const std::string &name) {
  return !name.empty() && name.size() <= 256 && name.find(':') == std::string::npos &&
         name.find_first_of("\"\\\n\t") == std::string::npos;
}

void checkInputShape(const GraphInput &in, const std::string &where) {
  for (const Dim &d : in.spec.shape)
    check(!d.isStatic() || d.value() >= 1,
          where + ": input \"" + in.name + "\": dim " + d.str() + " must be positive");
  try {
    Dim n = numElements(in.spec.shape);
    check(!n.isStatic() || n.value() <= kMaxElements,
          "shape " + shapeStr(in.spec.shape) + " has more than 2^40 elements");
    check(n.coefficient() <= kMaxElements, "shape " + shapeStr(in.spec.shape) + " is too large");
  } catch (const Error &e) {
    fail(where + ": input \"" + in.name + "\": " + e.what());
  }
}

// Kahn's algorithm, preferring file order, so a sorted file keeps its order.
std::vector<size_t> topologicalOrder(const Graph &g, const std::string &where) {
  std::unordered_map<std::string, size_t> nodeIndex;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    nodeIndex.emplace(g.nodes[i].name, i);
  std::vector<std::vector<size_t>> users(g.nodes.size());
  std::vector<size_t> pending(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Arg &a : g.nodes[i].args) {
      if (a.kind != Arg::Kind::Value)
        continue;
      auto it = nodeIndex.find(parseValueRef(a.value).producer);
      if (it == nodeIndex.end())
        continue; // an input, or undefined (reported when typing)
      users[it->second].push_back(i);
      ++pending[i];
    }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (pending[i] == 0)
      ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0)
        ready.push(u);
  }
  if (order.size() == g.nodes.size())
    return order;
  // Walk back along unfinished producers until a node repeats: that is a cycle.
  size_t start = 0;
  while (pending[start] == 0)
    ++start;
  std::vector<size_t> path{start};
  std::set<size_t> onPath{start};
  while (true) {
    size_t cur = path.back(), next = cur;
    for (const Arg &a : g.nodes[cur].args) {
      if (a.kind != Arg::Kind::Value)
        continue;
      auto it = nodeIndex.find(parseValueRef(a.value).producer);
      if (it != nodeIndex.end() && pending[it->second] > 0) {
        next = it->second;
        break;
      }
    }
    if (onPath.count(next)) {
      // `path` runs from consumers to producers; print it in dataflow order.
      std::string cycle;
      auto from = std::find(path.begin(), path.end(), next);
      for (auto it = from; it != path.end(); ++it)
        cycle = "\"" + g.nodes[*it].name + "\"" + (cycle.empty() ? "" : " -> ") + cycle;
      fail(where + ": the graph has a cycle: " + cycle + " -> \"" + g.nodes[path.back()].name +
           "\"");
    }
    path.push_back(next);
    onPath.insert(next);
  }
}

} // namespace

TypedNode typeNode(const Node &n, const std::map<std::string, TensorSpec> &values,
                   const std::vector<Mesh> &meshes) {
  TypedNode typed;
  typed.node = &n;
  typed.schema = findOpSchema(n.op);
  check(typed.schema != nullptr, "unknown op '" + n.op + "'");
  const OpSchema &op = *typed.schema;
  // Arity.
  if (op.hasVariadicOperands()) {
    check(!n.args.empty(), "expects at least one argument");
  } else {
    std::string expected;
    for (const OperandDef &o : op.operands)
      expected += (expected.empty() ? "" : ", ") + o.name + (o.arity == Arity::Optional ? "?" : "");
    check(n.args.size() <= op.operands.size(),
          "expects " + std::to_string(op.operands.size()) +
              (op.operands.size() == 1 ? " argument (" : " arguments (") + expected + "), got " +
              std::to_string(n.args.size()));
    for (size_t i = 0; i < op.operands.size(); ++i)
      check(op.operands[i].arity == Arity::Optional ||
                (i < n.args.size() && n.args[i].kind != Arg::Kind::Absent),
            "argument " + std::to_string(i) + " (" + op.operands[i].name +
                ") is required; expects (" + expected + ")");
  }
  if (op.hasVariadicOperands())
    for (const Arg &a : n.args)
      check(a.kind != Arg::Kind::Absent, "arguments of a variadic op cannot be null");
  // Types of value arguments first; literals then take theirs from them.
  size_t slots = op.hasVariadicOperands() ? n.args.size() : op.operands.size();
  typed.argTypes.assign(slots, std::nullopt);
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Arg &a = n.args[i];
    if (a.kind != Arg::Kind::Value)
      continue;
    auto it = values.find(a.value);
    if (it == values.end()) {
      ValueRef ref = parseValueRef(a.value);
      check(ref.index < 0 || !values.count(ref.producer + ":0"),
            "argument \"" + a.value + "\" names a result that node \"" + ref.producer +
                "\" does not have");
      fail("argument \"" + a.value + "\" is not defined");
    }
    typed.argTypes[i] = it->second;
  }
  // Literals follow tensor arguments only, never each other.
  const std::vector<std::optional<TensorSpec>> tensorTypes = typed.argTypes;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Arg &a = n.args[i];
    if (a.kind != Arg::Kind::Literal)
      continue;
    DType d = literalDType(a.literal, tensorTypes);
    if (isInteger(d) && a.literal.kind == Literal::Kind::Float)
      check(std::abs(a.literal.floatValue) < 9.2e18 && // int64_t(v) is undefined beyond
                a.literal.floatValue == double(int64_t(a.literal.floatValue)),
            "literal " + attrStr(Attr(a.literal.floatValue)) + " is not an integer for dtype " +
                std::string(dtypeName(d)));
    if (d == DType::I32) {
      double v = a.literal.kind == Literal::Kind::Float ? a.literal.floatValue
                                                        : double(a.literal.intValue);
      check(v >= -2147483648.0 && v <= 2147483647.0,
            "literal " + attrStr(a.literal.kind == Literal::Kind::Float ? Attr(a.literal.floatValue)
                                                                        : Attr(a.literal.intValue)) +
                " does not fit dtype i32");
    }
    typed.argTypes[i] = TensorSpec{d, {}};
  }
  std::vector<OperandRef> operands;
  for (size_t i = 0; i < typed.argTypes.size(); ++i) {
    std::string name = i < n.args.size() && n.args[i].kind == Arg::Kind::Value
                           ? n.args[i].value
                           : op.operands[std::min(i, op.operands.size() - 1)].name;
    operands.push_back({typed.argTypes[i], name});
  }
  typed.attrs = completeAttrs(op, n.attrs);
  typed.results = inferResultTypes(op, operands, typed.attrs, meshes);
  return typed;
}

// The MLIR verifier checks shardings too; checking them here names the
// input or node in the words of the graph file.
static void checkSharding(const Graph &g, const Sharding &s, const TensorSpec &spec,
                          const std::string &what) {
  const Mesh *mesh = nullptr;
  for (const Mesh &m : g.meshes)
    if (m.name == s.mesh)
      mesh = &m;
  check(mesh != nullptr, what + ": sharding names unknown mesh \"" + s.mesh + "\"");
  check(int64_t(s.dims.size()) == spec.rank(),
        what + ": sharding has " + std::to_string(s.dims.size()) + " dim entries for rank " +
            std::to_string(spec.rank()));
  std::set<std::string> used;
  for (size_t d = 0; d < s.dims.size(); ++d) {
    int64_t parts = 1;
    for (const std::string &axis : s.dims[d]) {
      auto it = std::find(mesh->axes.begin(), mesh->axes.end(), axis);
      check(it != mesh->axes.end(),
            what + ": sharding uses axis \"" + axis + "\" not in mesh \"" + mesh->name + "\"");
      check(used.insert(axis).second, what + ": sharding uses mesh axis \"" + axis + "\" twice");
      int64_t size = mesh->sizes[size_t(it - mesh->axes.begin())];
      check(size >= 1 && !__builtin_mul_overflow(parts, size, &parts) && parts <= kMaxElements,
            what + ": sharding splits dim " + std::to_string(d) +
                " into more than 2^40 parts (mesh \"" + mesh->name + "\")");
    }
    const Dim &dim = spec.shape[d];
    check(!dim.isStatic() || dim.value() % parts == 0,
          what + ": sharding splits dim " + std::to_string(d) + " of size " + dim.str() + " into " +
              std::to_string(parts) + " parts, which does not divide it");
  }
}

GraphAnalysis analyzeGraph(const Graph &g, const std::string &where, bool requireOutputs) {
  GraphAnalysis result;
  std::set<std::string> names;
  for (const auto &[symbol, bound] : g.dims) {
    check(Dim::isValidSymbolName(symbol),
          where + ": dims: \"" + symbol + "\" is not a valid symbol name");
    check(bound.min >= 1 && (!bound.max || *bound.max >= bound.min),
          where + ": dims: \"" + symbol + "\" needs 1 <= min <= max");
  }
  std::set<std::string> meshNames;
  for (const Mesh &m : g.meshes) {
    check(isValidName(m.name) && meshNames.insert(m.name).second,
          where + ": mesh \"" + m.name + "\" is defined twice or badly named");
    try {
      checkMesh(m);
    } catch (const Error &e) {
      fail(where + ": " + e.what());
    }
  }
  for (const GraphInput &in : g.inputs) {
    check(isValidName(in.name),
          where + ": input name \"" + in.name + "\" is not valid (empty, or contains ':')");
    check(names.insert(in.name).second, where + ": input \"" + in.name + "\" is defined twice");
    checkInputShape(in, where);
    if (in.sharding)
      checkSharding(g, *in.sharding, in.spec, where + ": input \"" + in.name + "\"");
    result.values.emplace(in.name, in.spec);
  }
  for (const Node &n : g.nodes) {
    check(isValidName(n.name),
          where + ": node name \"" + n.name + "\" is not valid (empty, or contains ':')");
    check(names.insert(n.name).second,
          where + ": node \"" + n.name + "\": the name is already defined");
  }

  for (size_t index : topologicalOrder(g, where)) {
    const Node &n = g.nodes[index];
    std::string prefix = where + ": node \"" + n.name + "\" (" + n.op + "): ";
    TypedNode typed;
    try {
      typed = typeNode(n, result.values, g.meshes);
    } catch (const Error &e) {
      if (!findOpSchema(n.op))
        fail(where + ": node \"" + n.name + "\": " + e.what());
      fail(prefix + e.what());
    }
    if (n.sharding) {
      check(typed.results.size() == 1, prefix + "a sharding needs an op with one result");
      checkSharding(g, *n.sharding, typed.results[0], where + ": node \"" + n.name + "\"");
    }
    for (size_t r = 0; r < typed.results.size(); ++r) {
      result.values[n.name + ":" + std::to_string(r)] = typed.results[r];
      if (r == 0)
        result.values[n.name] = typed.results[r];
    }
    result.nodes.push_back(std::move(typed));
  }
  check(!requireOutputs || !g.outputs.empty(), where + ": the graph has no outputs");
  for (const std::string &out : g.outputs) {
    auto it = result.values.find(out);
    check(it != result.values.end(), where + ": output \"" + out + "\" is not defined");
    result.outputs.push_back(it->second);
  }
  // A graph being built (no outputs required) may hold its checks before
  // its outputs.
  if (!requireOutputs)
    return result;
  check(g.checks.size() <= g.outputs.size(),
        where + ": " + std::to_string(g.checks.size()) + " run-time checks but " +
            std::to_string(g.outputs.size()) + " outputs (checks are the last outputs)");
  for (size_t o = g.resultCount(); o < g.outputs.size(); ++o)
    check(result.outputs[o].dtype == DType::I32 && result.outputs[o].rank() == 0,
          where + ": output \"" + g.outputs[o] + "\" is a run-time check (\"" +
              g.checks[o - g.resultCount()] + "\") and must be an i32 scalar, not " +
              result.outputs[o].str());
  return result;
}

} // namespace tensorc
