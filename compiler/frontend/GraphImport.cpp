#include "compiler/frontend/GraphImport.h"

#include "ir/core/Error.h"
#include "ir/dialect/Conversion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <functional>
#include <map>
#include <set>

using namespace mlir;

namespace tensorc {

void loadTensorcDialects(MLIRContext &ctx) { ctx.loadDialect<tc::TCDialect, func::FuncDialect>(); }

static Attribute shardingAttr(MLIRContext *ctx, const Sharding &s) {
  Builder b(ctx);
  SmallVector<Attribute> dims;
  for (const auto &axes : s.dims) {
    SmallVector<Attribute> names;
    for (const std::string &a : axes)
      names.push_back(b.getStringAttr(a));
    dims.push_back(b.getArrayAttr(names));
  }
  return tc::ShardingAttr::get(ctx, FlatSymbolRefAttr::get(ctx, s.mesh), b.getArrayAttr(dims));
}

static Sharding shardingFrom(tc::ShardingAttr attr) {
  Sharding s;
  s.mesh = attr.getMesh().getValue().str();
  for (Attribute d : attr.getDims()) {
    std::vector<std::string> axes;
    for (Attribute a : llvm::cast<ArrayAttr>(d))
      axes.push_back(llvm::cast<StringAttr>(a).getValue().str());
    s.dims.push_back(axes);
  }
  return s;
}

// The node name a location carries: a NameLoc, or the first one inside a
// FusedLoc (CSE and folding fuse the locations of ops they merge).
static std::string locationName(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().getValue().str();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string n = locationName(inner); !n.empty())
        return n;
  return "";
}

void verifyModule(ModuleOp module, const std::string &where) {
  std::string message;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Error || !message.empty())
      return success();
    std::string node = locationName(d.getLocation());
    message = where + ": " + (node.empty() ? "" : "node \"" + node + "\": ") + d.str();
    return success();
  });
  if (failed(verify(module)))
    fail(message.empty() ? where + ": the module does not verify" : message);
}

OwningOpRef<ModuleOp> importGraph(MLIRContext &ctx, const Graph &g, const GraphAnalysis &analysis,
                                  const std::string &where) {
  loadTensorcDialects(ctx);
  OpBuilder b(&ctx);
  Location fileLoc = FileLineColLoc::get(&ctx, where, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  for (const Mesh &m : g.meshes) {
    SmallVector<StringRef> axes(m.axes.begin(), m.axes.end());
    b.create<tc::MeshOp>(fileLoc, b.getStringAttr(m.name), b.getStrArrayAttr(axes),
                         b.getDenseI64ArrayAttr(m.sizes));
  }
  SmallVector<Type> inputTypes, outputTypes;
  for (const GraphInput &in : g.inputs)
    inputTypes.push_back(tc::toMlirType(&ctx, in.spec));
  for (const TensorSpec &out : analysis.outputs)
    outputTypes.push_back(tc::toMlirType(&ctx, out));
  auto fn = b.create<func::FuncOp>(fileLoc, g.name, b.getFunctionType(inputTypes, outputTypes));
  if (!g.dims.empty()) {
    SmallVector<NamedAttribute> bounds;
    for (const auto &[symbol, bound] : g.dims) {
      SmallVector<int64_t> range{bound.min};
      if (bound.max)
        range.push_back(*bound.max);
      bounds.push_back(b.getNamedAttr(symbol, b.getDenseI64ArrayAttr(range)));
    }
    fn->setAttr("tc.dim_bounds", b.getDictionaryAttr(bounds));
  }
  Block *body = fn.addEntryBlock();
  std::map<std::string, Value> values;
  // Every argument's attributes at once: setArgAttr rebuilds the array of
  // all of them per call, and each array stays in the context (100k inputs:
  // quadratic time and tens of GB).
  SmallVector<DictionaryAttr> argAttrs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const GraphInput &in = g.inputs[i];
    SmallVector<NamedAttribute> attrs = {b.getNamedAttr("tc.name", b.getStringAttr(in.name))};
    if (in.trainable)
      attrs.push_back(b.getNamedAttr("tc.trainable", b.getUnitAttr()));
    if (in.sharding)
      attrs.push_back(b.getNamedAttr("tc.sharding", shardingAttr(&ctx, *in.sharding)));
    argAttrs.push_back(b.getDictionaryAttr(attrs));
    values[in.name] = body->getArgument(i);
  }
  fn.setAllArgAttrs(argAttrs);
  b.setInsertionPointToEnd(body);
  for (const TypedNode &typed : analysis.nodes) {
    const Node &n = *typed.node;
    Location loc = NameLoc::get(b.getStringAttr(n.name), fileLoc);
    SmallVector<Value> operands;
    SmallVector<int32_t> segments;
    for (size_t i = 0; i < typed.argTypes.size(); ++i) {
      const Arg arg = i < n.args.size() ? n.args[i] : Arg::absent();
      if (arg.kind == Arg::Kind::Absent) {
        segments.push_back(0);
        continue;
      }
      segments.push_back(1);
      if (arg.kind == Arg::Kind::Value) {
        operands.push_back(values.at(arg.value));
        continue;
      }
      DenseValue v;
      v.dtype = typed.argTypes[i]->dtype;
      if (isFloat(v.dtype))
        v.floats.push_back(arg.literal.kind == Literal::Kind::Float ? arg.literal.floatValue
                                                                    : double(arg.literal.intValue));
      else
        v.ints.push_back(arg.literal.kind == Literal::Kind::Float ? int64_t(arg.literal.floatValue)
                                                                  : arg.literal.intValue);
      OperationState state(loc, "tc.constant");
      state.addAttribute("value", tc::toMlirAttr(&ctx, Attr(v)));
      state.addAttribute("tc.literal", b.getUnitAttr());
      state.addTypes(tc::toMlirType(&ctx, *typed.argTypes[i]));
      operands.push_back(b.create(state)->getResult(0));
    }
    OperationState state(loc, "tc." + n.op);
    state.addOperands(operands);
    for (const auto &[name, value] : canonicalAttrs(*typed.schema, n.attrs))
      state.addAttribute(name, tc::toMlirAttr(&ctx, value));
    // Segment sizes where the op's definition needs them, or where an absent
    // optional operand comes before a present one (tc::addSchemaOperands).
    bool ambiguous = false;
    for (size_t i = 1; i < segments.size(); ++i)
      ambiguous = ambiguous || (segments[i] && std::count(segments.begin(), segments.begin() + i, 0) > 0);
    std::optional<RegisteredOperationName> info = state.name.getRegisteredInfo();
    if (typed.schema->hasOptionalOperands() &&
        ((info && info->hasTrait<OpTrait::AttrSizedOperandSegments>()) || ambiguous))
      state.addAttribute("operandSegmentSizes", b.getDenseI32ArrayAttr(segments));
    for (const TensorSpec &r : typed.results)
      state.addTypes(tc::toMlirType(&ctx, r));
    Operation *op = b.create(state);
    if (n.sharding)
      op->setAttr("tc.sharding", shardingAttr(&ctx, *n.sharding));
    for (size_t r = 0; r < op->getNumResults(); ++r) {
      values[n.name + ":" + std::to_string(r)] = op->getResult(r);
      if (r == 0)
        values[n.name] = op->getResult(r);
    }
  }
  SmallVector<Value> results;
  for (const std::string &out : g.outputs)
    results.push_back(values.at(out));
  b.create<func::ReturnOp>(fileLoc, results);
  // The outputs end with the run-time checks' flags (resultCount() on).
  SmallVector<DictionaryAttr> resultAttrs;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    SmallVector<NamedAttribute> attrs = {b.getNamedAttr("tc.name", b.getStringAttr(g.outputs[i]))};
    if (i >= g.resultCount() && i - g.resultCount() < g.checks.size())
      attrs.push_back(b.getNamedAttr("tc.check", b.getStringAttr(g.checks[i - g.resultCount()])));
    resultAttrs.push_back(b.getDictionaryAttr(attrs));
  }
  fn.setAllResultAttrs(resultAttrs);
  verifyModule(*module, where);
  return module;
}

Graph exportGraph(ModuleOp module) {
  Graph g;
  func::FuncOp fn;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto mesh = llvm::dyn_cast<tc::MeshOp>(op)) {
      Mesh m;
      m.name = mesh.getSymName().str();
      for (StringRef a : mesh.getAxes().getAsValueRange<StringAttr>())
        m.axes.push_back(a.str());
      m.sizes.assign(mesh.getSizes().begin(), mesh.getSizes().end());
      g.meshes.push_back(m);
    } else if (auto f = llvm::dyn_cast<func::FuncOp>(op)) {
      check(!fn, "the module has more than one function");
      fn = f;
    } else {
      fail("the module holds an unexpected top-level op '" + op.getName().getStringRef().str() +
           "'");
    }
  }
  check(bool(fn), "the module has no function");
  check(fn.getBody().hasOneBlock(), "function @" + fn.getName().str() + " must have one block");
  g.name = fn.getName().str();
  if (auto bounds = fn->getAttrOfType<DictionaryAttr>("tc.dim_bounds"))
    for (NamedAttribute nb : bounds) {
      auto range = llvm::cast<DenseI64ArrayAttr>(nb.getValue());
      DimBound bound{range[0], std::nullopt};
      if (range.size() > 1)
        bound.max = range[1];
      g.dims.emplace(nb.getName().getValue().str(), bound);
    }
  std::map<void *, std::string> names; // Value -> reference
  std::set<std::string> used;
  auto unique = [&](std::string base) {
    std::string name = base;
    for (int i = 1; name.empty() || used.count(name); ++i)
      name = (base.empty() ? "v" : base + "_") + std::to_string(i);
    used.insert(name);
    return name;
  };
  for (BlockArgument arg : fn.getArguments()) {
    GraphInput in;
    auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tc.name");
    in.name = unique(name ? name.getValue().str() : "arg" + std::to_string(arg.getArgNumber()));
    std::optional<TensorSpec> spec = tc::toTensorSpec(arg.getType());
    check(spec.has_value(), "argument " + in.name + " is not a !tc.tensor");
    in.spec = *spec;
    in.trainable = bool(fn.getArgAttr(arg.getArgNumber(), "tc.trainable"));
    if (auto s = fn.getArgAttrOfType<tc::ShardingAttr>(arg.getArgNumber(), "tc.sharding"))
      in.sharding = shardingFrom(s);
    names[arg.getAsOpaquePointer()] = in.name;
    g.inputs.push_back(in);
  }
  // A returned value is named after the output that returns it (passes may
  // have returned another op's value, e.g. the optimizer state `w.exp_avg.next`
  // computed by an `add`), so the exported graph keeps the output names.
  std::map<Operation *, std::string> outputNames;
  if (!fn.getBody().front().empty())
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(fn.getBody().front().back()))
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        if (auto name = fn.getResultAttrOfType<StringAttr>(i, "tc.name"))
          if (Operation *def = v.getDefiningOp(); def && def->getNumResults() == 1 &&
                                                  !name.getValue().empty() &&
                                                  !name.getValue().contains(':'))
            outputNames.emplace(def, name.getValue().str()); // "h:1" is no node name
  std::map<void *, Literal> literals;
  // A literal constant is an inline argument of the ops that read it; one
  // that is also returned (simplification can reduce an output to a literal,
  // e.g. the zero gradient of an unused input) becomes a constant node there.
  std::map<void *, Operation *> literalOps;
  auto refOf = [&](Value v) {
    auto it = names.find(v.getAsOpaquePointer());
    if (it == names.end())
      if (auto op = literalOps.find(v.getAsOpaquePointer()); op != literalOps.end()) {
        const OpSchema *schema = tc::schemaOf(op->second);
        Node n;
        n.name = unique(locationName(op->second->getLoc()).empty() ? "constant"
                                                                    : locationName(op->second->getLoc()));
        n.op = schema->name;
        n.attrs = canonicalAttrs(*schema, tc::coreAttrs(op->second, *schema));
        g.nodes.push_back(std::move(n));
        it = names.emplace(v.getAsOpaquePointer(), g.nodes.back().name).first;
      }
    check(it != names.end(), "a value is used before it is defined");
    return it->second;
  };
  // Kernels (tc.fused) are inlined: the graph is the flat computation.
  std::function<void(Block &)> visitBlock;
  auto visit = [&](Operation &op) {
    if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        g.outputs.push_back(refOf(v));
      return;
    }
    if (auto fused = llvm::dyn_cast<tc::FusedOp>(op)) {
      Block &body = fused.getBody().front();
      for (auto [arg, input] : llvm::zip(body.getArguments(), fused.getInputs())) {
        auto lit = literals.find(input.getAsOpaquePointer());
        if (lit != literals.end()) {
          literals[arg.getAsOpaquePointer()] = lit->second;
          literalOps[arg.getAsOpaquePointer()] = literalOps.at(input.getAsOpaquePointer());
        }
        else
          names[arg.getAsOpaquePointer()] = refOf(input);
      }
      visitBlock(body);
      auto yield = llvm::cast<tc::YieldOp>(body.getTerminator());
      for (auto [result, value] : llvm::zip(fused.getResults(), yield.getValues()))
        names[result.getAsOpaquePointer()] = refOf(value);
      return;
    }
    if (llvm::isa<tc::YieldOp>(op))
      return;
    const OpSchema *schema = tc::schemaOf(&op);
    check(schema != nullptr, "op '" + op.getName().getStringRef().str() + "' has no graph form");
    if (schema->name == "constant" && op.hasAttr("tc.literal")) {
      DenseValue v =
          std::get<DenseValue>(tc::toCoreAttr(op.getAttr("value"), *schema->findAttr("value")));
      Literal l;
      l.kind = isFloat(v.dtype)  ? Literal::Kind::Float
               : isBool(v.dtype) ? Literal::Kind::Bool
                                 : Literal::Kind::Int;
      l.floatValue = isFloat(v.dtype) ? v.floats[0] : double(v.ints[0]);
      l.intValue = isFloat(v.dtype) ? 0 : v.ints[0];
      l.dtype = v.dtype;
      literals[op.getResult(0).getAsOpaquePointer()] = l;
      literalOps[op.getResult(0).getAsOpaquePointer()] = &op;
      return;
    }
    Node n;
    // A returned value is named after its output (the API), else after its op.
    std::string base = outputNames.count(&op) ? outputNames.at(&op) : locationName(op.getLoc());
    n.name = unique(base);
    n.op = schema->name;
    n.attrs = canonicalAttrs(*schema, tc::coreAttrs(&op, *schema));
    if (auto s = op.getAttrOfType<tc::ShardingAttr>("tc.sharding"))
      n.sharding = shardingFrom(s);
    std::vector<std::optional<TensorSpec>> argTypes;
    for (const std::optional<Value> &v : tc::schemaOperands(&op, *schema)) {
      argTypes.push_back(v ? tc::toTensorSpec(v->getType()) : std::nullopt);
      if (!v) {
        n.args.push_back(Arg::absent());
      } else if (auto lit = literals.find(v->getAsOpaquePointer()); lit != literals.end()) {
        n.args.push_back(Arg::lit(lit->second));
      } else {
        n.args.push_back(Arg::ref(refOf(*v)));
      }
    }
    // A literal states its dtype only when the default rule would pick another.
    for (size_t i = 0; i < n.args.size(); ++i)
      if (n.args[i].kind == Arg::Kind::Literal) {
        Literal &l = n.args[i].literal;
        DType actual = *l.dtype;
        l.dtype.reset();
        std::vector<std::optional<TensorSpec>> valueTypes = argTypes;
        for (size_t k = 0; k < n.args.size(); ++k)
          if (n.args[k].kind == Arg::Kind::Literal)
            valueTypes[k].reset();
        if (literalDType(l, valueTypes) != actual)
          l.dtype = actual;
      }
    while (!n.args.empty() && n.args.back().kind == Arg::Kind::Absent)
      n.args.pop_back();
    for (size_t r = 0; r < op.getNumResults(); ++r)
      names[op.getResult(r).getAsOpaquePointer()] =
          op.getNumResults() == 1 ? n.name : n.name + ":" + std::to_string(r);
    g.nodes.push_back(std::move(n));
  };
  visitBlock = [&](Block &block) {
    for (Operation &op : block.getOperations())
      visit(op);
  };
  visitBlock(fn.getBody().front());
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto message = fn.getResultAttrOfType<StringAttr>(i, "tc.check")) {
      g.checks.push_back(message.str());
    } else {
      check(g.checks.empty(), "result " + std::to_string(i) + " of @" + g.name +
                                  " follows a run-time check (tc.check): checks are the last results");
    }
  return g;
}

} // namespace tensorc
