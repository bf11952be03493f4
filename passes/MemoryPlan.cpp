// tensorc-plan-memory: one arena for every intermediate buffer of a
// function, planned over the final schedule (top-level ops in order, one step
// each, normally after tensorc-fuse).
//
//  - inputs and outputs of the function are outside the arena (the caller
//    owns them), and so are buffers that a returned view aliases;
//  - reshape-like views, and transposes read only by GEMMs, alias their
//    operand's buffer and extend its life instead of copying;
//  - an elementwise kernel may write a result over an input buffer that
//    dies at that kernel (in place);
//  - a collective's operands live to the end of the function (the CUDA
//    runtime overlaps collectives with the kernels after them);
//  - offsets come from ir/core/MemoryPlanner (best fit, largest first).
// Symbolic sizes are measured at representative dims (the symbol's bound, at
// most 64, or `dims`); the runtime re-plans at bind time with the same
// planner. Each planned op gets `tc.buffer = array<i64: offset, bytes, ...>`
// (per result; -1 for results outside the arena) and the function
// `tc.memory_plan = {arena_bytes, lower_bound_bytes, ...}`.
#include "passes/Passes.h"

#include "ir/core/MemoryPlanner.h"
#include "ir/dialect/Conversion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

namespace tensorc {

#define GEN_PASS_DEF_MEMORYPLANPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

bool isAliasView(Operation *op) {
  StringRef n = op->getName().getStringRef();
  if (n == "tc.reshape" || n == "tc.squeeze" || n == "tc.unsqueeze" || n == "tc.flatten")
    return true;
  if (auto t = llvm::dyn_cast<tc::TransposeOp>(op)) {
    int64_t rank = int64_t(llvm::cast<tc::TcTensorType>(t.getX().getType()).getSizes().size());
    auto norm = [rank](int64_t a) { return a < 0 ? a + rank : a; };
    std::set<int64_t> dims{norm(t.getDim0()), norm(t.getDim1())};
    return rank >= 2 && dims == std::set<int64_t>{rank - 2, rank - 1} &&
           llvm::all_of(op->getUsers(),
                        [](Operation *u) { return u->getName().getStringRef() == "tc.matmul"; });
  }
  return false;
}

bool isElementwiseKernel(Operation *op) {
  if (auto f = llvm::dyn_cast<tc::FusedOp>(op))
    return f.getKind() == "elementwise";
  static const std::set<std::string> pointwise = {
      "neg",     "abs",   "exp",  "log",   "sqrt",   "rsqrt", "reciprocal", "tanh",
      "sigmoid", "relu",  "gelu", "silu",  "sin",    "cos",   "erf",        "floor",
      "ceil",    "sign",  "add",  "sub",   "mul",    "div",   "pow",        "maximum",
      "minimum", "where", "cast", "clamp", "dropout"};
  return pointwise.count(op->getName().getStringRef().drop_front(3).str()) != 0;
}

struct MemoryPlanPass : impl::MemoryPlanPassBase<MemoryPlanPass> {
  using MemoryPlanPassBase::MemoryPlanPassBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) {
      if (failed(plan(fn)))
        signalPassFailure();
    });
  }

  LogicalResult plan(func::FuncOp fn) {
    std::map<std::string, int64_t> bindings;
    for (const std::string &d : dims) {
      size_t eq = d.find('=');
      if (eq == std::string::npos)
        return fn.emitError() << "tensorc-plan-memory: dims entry '" << d
                              << "' must be SYMBOL=SIZE";
      bindings[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
    }
    auto bounds = fn->getAttrOfType<DictionaryAttr>("tc.dim_bounds");
    auto bytesOf = [&](Value v) -> std::optional<int64_t> {
      std::optional<TensorSpec> spec = tc::toTensorSpec(v.getType());
      if (!spec)
        return std::nullopt;
      int64_t n = int64_t(dtypeSize(spec->dtype));
      for (const Dim &d : spec->shape) {
        int64_t size = d.coefficient();
        for (const std::string &s : d.symbols()) {
          int64_t value = 64;
          if (bindings.count(s))
            value = bindings[s];
          else if (bounds)
            if (auto range = llvm::dyn_cast_or_null<DenseI64ArrayAttr>(bounds.get(s)))
              value = std::max(range[0], range.size() > 1 ? std::min<int64_t>(range[1], 64) : 64);
          size *= value;
        }
        n *= size;
      }
      return n;
    };
    Block &body = fn.getBody().front();
    Operation *ret = body.getTerminator();
    llvm::DenseSet<Value> returned(ret->operand_begin(), ret->operand_end());
    // Steps, buffers and aliases.
    std::map<Operation *, int> step;
    std::vector<Operation *> schedule;
    for (Operation &op : body.without_terminator()) {
      step[&op] = int(schedule.size());
      schedule.push_back(&op);
    }
    llvm::DenseMap<Value, Value> aliasOf; // view result -> the value owning storage
    auto owner = [&](Value v) {
      while (aliasOf.count(v))
        v = aliasOf.lookup(v);
      return v;
    };
    for (Operation *op : schedule)
      if (isAliasView(op))
        aliasOf[op->getResult(0)] = op->getOperand(0);
    llvm::DenseSet<Value> outside; // storage owned by the caller
    for (Value v : returned)
      outside.insert(owner(v));
    std::vector<Value> buffers;
    llvm::DenseMap<Value, int> bufferIndex;
    std::vector<BufferRequest> requests;
    for (Operation *op : schedule) {
      if (isAliasView(op))
        continue;
      for (Value r : op->getResults()) {
        if (outside.count(r))
          continue;
        std::optional<int64_t> bytes = bytesOf(r);
        if (!bytes)
          return op->emitError() << "tensorc-plan-memory: result is not a !tc.tensor";
        bufferIndex[r] = int(buffers.size());
        buffers.push_back(r);
        requests.push_back({*bytes, step[op], step[op], -1});
      }
    }
    // Liveness: every use of the buffer or of a view of it.
    for (Operation *op : schedule)
      for (Value v : op->getOperands()) {
        auto it = bufferIndex.find(owner(v));
        if (it != bufferIndex.end() && !isAliasView(op))
          requests[it->second].last = std::max(requests[it->second].last, step[op]);
        else if (it != bufferIndex.end())
          requests[it->second].last = std::max(requests[it->second].last, step[op]);
      }
    // A collective's operand lives to the end: the CUDA runtime runs
    // collectives on a communication stream beside the kernels after them,
    // and a kernel writing over the operand's buffer would wait for the
    // collective to finish (no overlap). DDP's gradients are small beside
    // the activations; PyTorch's gradient buckets hold as much.
    for (Operation *op : schedule)
      if (const OpSchema *schema = tc::schemaOf(op); schema && schema->category == "collective")
        for (Value v : op->getOperands())
          if (auto it = bufferIndex.find(owner(v)); it != bufferIndex.end())
            requests[it->second].last = int(schedule.size()) - 1;
    // In place: an elementwise kernel over an input buffer that dies here.
    for (Operation *op : schedule) {
      if (!isElementwiseKernel(op))
        continue;
      std::set<int> taken;
      for (Value r : op->getResults()) {
        auto ri = bufferIndex.find(r);
        if (ri == bufferIndex.end())
          continue;
        for (Value in : op->getOperands()) {
          auto ii = bufferIndex.find(owner(in));
          if (ii == bufferIndex.end() || taken.count(ii->second))
            continue;
          const BufferRequest &b = requests[ii->second];
          if (b.last == step[op] && b.size >= requests[ri->second].size &&
              in.getType() == r.getType()) {
            requests[ri->second].inPlaceWith = ii->second;
            taken.insert(ii->second);
            break;
          }
        }
      }
    }
    MemoryPlan plan = planMemory(requests);
    OpBuilder b(fn.getContext());
    int inPlace = 0;
    for (Operation *op : schedule) {
      SmallVector<int64_t> slots;
      bool any = false;
      for (Value r : op->getResults()) {
        auto it = bufferIndex.find(r);
        if (it == bufferIndex.end()) {
          slots.append({-1, 0});
          continue;
        }
        any = true;
        slots.append({plan.offsets[it->second], requests[it->second].size});
        inPlace += plan.inPlace[it->second];
      }
      if (any)
        op->setAttr("tc.buffer", b.getDenseI64ArrayAttr(slots));
    }
    int64_t aliases = int64_t(aliasOf.size());
    fn->setAttr("tc.memory_plan",
                b.getDictionaryAttr(
                    {b.getNamedAttr("arena_bytes", b.getI64IntegerAttr(plan.arenaBytes)),
                     b.getNamedAttr("lower_bound_bytes", b.getI64IntegerAttr(plan.lowerBound)),
                     b.getNamedAttr("buffers", b.getI64IntegerAttr(int64_t(buffers.size()))),
                     b.getNamedAttr("in_place", b.getI64IntegerAttr(inPlace)),
                     b.getNamedAttr("aliases", b.getI64IntegerAttr(aliases))}));
    if (report) {
      std::string sizes;
      for (auto &[s, v] : bindings)
        sizes += " " + s + "=" + std::to_string(v);
      llvm::outs() << "memory plan of @" << fn.getName() << ": arena " << plan.arenaBytes
                   << " bytes, lower bound " << plan.lowerBound << " bytes ("
                   << llvm::format("%.3f", plan.lowerBound
                                               ? double(plan.arenaBytes) / double(plan.lowerBound)
                                               : 1.0)
                   << "x), " << buffers.size() << " buffers, " << inPlace << " in place, "
                   << aliases << " aliases" << (sizes.empty() ? "" : ", at" + sizes) << "\n";
    }
    return success();
  }
};

} // namespace
} // namespace tensorc
