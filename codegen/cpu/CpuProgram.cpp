#include "codegen/cpu/CpuProgram.h"

#include "codegen/cpu/LoopNest.h"
#include "codegen/cpu/Lowering.h"
#include "codegen/cpu/ScalarOps.h"
#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"
#include "ir/dialect/Conversion.h"
#include "runtime/host/FloatBits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <cstring>
#include <set>

using namespace mlir;

namespace tensorc::codegen::cpu {
namespace {

using artifact::Step;
using artifact::Storage;

// How a tensor reads a stored value: for each dim k of the storage,
// index_k = offset + scale * viewIndex[dim] (dim < 0: just offset). Views
// (transpose, broadcast_to, slice, split) compose without copies.
struct Term {
  int dim;
  int64_t scale;
  int64_t offset;
  bool operator==(const Term &o) const {
    return dim == o.dim && scale == o.scale && offset == o.offset;
  }
};

// What a tc value is during lowering: stored in an artifact value (read
// through a view), or a scalar op evaluated inside whichever loop nest
// reads it (elementwise chains fuse by inlining).
struct Lazy {
  bool stored = false;
  int value = -1;
  std::vector<Term> terms;
  Operation *op = nullptr;
};

std::vector<Term> identityTerms(size_t rank) {
  std::vector<Term> t;
  for (size_t k = 0; k < rank; ++k)
    t.push_back({int(k), 1, 0});
  return t;
}

TensorSpec specOf(Value v) {
  std::optional<TensorSpec> s = tc::toTensorSpec(v.getType());
  check(s.has_value(), "cpu codegen: a value is not a !tc.tensor");
  return *s;
}

std::string opName(Operation *op) { return op->getName().getStringRef().drop_front(3).str(); }

const std::set<std::string> &reductionOps() {
  static const std::set<std::string> r = {"sum", "mean", "max", "min", "prod"};
  return r;
}
const std::set<std::string> &reshapeOps() {
  static const std::set<std::string> r = {"reshape", "squeeze", "unsqueeze", "flatten"};
  return r;
}
const std::set<std::string> &generatorOps() {
  static const std::set<std::string> r = {"full", "zeros", "ones", "iota"};
  return r;
}
const std::set<std::string> &viewOps() {
  static const std::set<std::string> r = {"transpose", "permute", "broadcast_to", "slice", "split"};
  return r;
}

class ProgramBuilder {
public:
  ProgramBuilder(ModuleOp kernels, const std::string &prefix) : kernels_(kernels), prefix_(prefix) {}

  artifact::Artifact build(func::FuncOp fn) {
    art_.function = fn.getName().str();
    collectSymbols(fn);
    for (BlockArgument arg : fn.getArguments()) {
      TensorSpec s = specOf(arg);
      auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tc.name");
      std::string n = name ? name.str() : "arg" + std::to_string(arg.getArgNumber());
      int v = newValue(s, {Storage::Kind::Input, int(art_.inputs.size())});
      art_.inputs.push_back({n, s.dtype, s.shape, v});
      lazy_[arg] = storedIdentity(v);
    }
    for (Operation &op : fn.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          auto name = fn.getResultAttrOfType<StringAttr>(unsigned(i), "tc.name");
          addOutput(v, name ? name.str() : "out" + std::to_string(i));
        }
        continue;
      }
      label_ = opName(&op);
      if (auto fused = dyn_cast<tc::FusedOp>(op)) {
        label_ = fused.getKernel().str();
        Block &body = fused.getBody().front();
        for (auto [arg, outer] : llvm::zip(body.getArguments(), fused.getInputs()))
          lazy_[arg] = lazy_.at(outer);
        for (Operation &inner : body) {
          if (inner.getName().getStringRef() == "tc.yield") {
            for (auto [res, y] : llvm::zip(fused.getResults(), inner.getOperands())) {
              if (!lazy_.at(y).stored)
                materialize(y);
              lazy_[res] = lazy_.at(y);
            }
            continue;
          }
          lower(&inner);
        }
        continue;
      }
      lower(&op);
      for (Value r : op.getResults())
        if (!lazy_.at(r).stored)
          materialize(r);
    }
    finalize();
    return std::move(art_);
  }

private:
  // ------------------------------------------------------------- values

  int newValue(const TensorSpec &s, Storage storage) {
    art_.values.push_back({s.dtype, s.shape, storage});
    produced_.push_back(false);
    return int(art_.values.size()) - 1;
  }
  int newProducedValue(const TensorSpec &s) {
    int v = newValue(s, {Storage::Kind::Buffer, -1});
    produced_[v] = true;
    return v;
  }
  Lazy storedIdentity(int v) {
    Lazy l;
    l.stored = true;
    l.value = v;
    l.terms = identityTerms(art_.values[v].shape.size());
    return l;
  }
  bool isIdentity(const Lazy &l, const TensorSpec &s) const {
    return l.stored && art_.values[l.value].shape == s.shape && l.terms == identityTerms(s.rank());
  }

  void collectSymbols(func::FuncOp fn) {
    std::map<std::string, artifact::SymbolDecl> symbols;
    if (auto bounds = fn->getAttrOfType<DictionaryAttr>("tc.dim_bounds"))
      for (NamedAttribute nb : bounds) {
        auto range = llvm::cast<DenseI64ArrayAttr>(nb.getValue());
        artifact::SymbolDecl d{nb.getName().getValue().str(), range[0], std::nullopt};
        if (range.size() > 1)
          d.max = range[1];
        symbols[d.name] = d;
      }
    auto addShape = [&](Type t) {
      if (std::optional<TensorSpec> s = tc::toTensorSpec(t))
        for (const Dim &d : s->shape)
          for (const std::string &sym : d.symbols())
            symbols.emplace(sym, artifact::SymbolDecl{sym, 1, std::nullopt});
    };
    fn.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        addShape(t);
    });
    for (Type t : fn.getArgumentTypes())
      addShape(t);
    for (auto &[name, d] : symbols) {
      art_.symbols.push_back(d);
      symbolNames_.push_back(name);
    }
  }

  // ---------------------------------------------------------- lowering

  void lower(Operation *op) {
    std::string name = opName(op);
    const OpSchema *schema = tc::schemaOf(op);
    check(schema != nullptr, "cpu codegen: unknown op " + name);
    AttrMap attrs = completeAttrs(*schema, tc::coreAttrs(op, *schema));
    if (isScalarOp(name) || generatorOps().count(name)) {
      Lazy l;
      l.op = op;
      lazy_[op->getResult(0)] = l;
      return;
    }
    if (name == "constant") {
      lowerConstant(op);
      return;
    }
    if (reductionOps().count(name)) {
      Value x = op->getOperand(0);
      TensorSpec in = specOf(x), out = specOf(op->getResult(0));
      std::vector<int64_t> axes = normalizeAxes(attrs, "axes", in.rank());
      std::vector<bool> reduced(size_t(in.rank()), false);
      for (int64_t a : axes)
        reduced[size_t(a)] = true;
      int v = newProducedValue(out);
      emitNest(x, in.shape, reduced, name, getBool(attrs, "keepdim"), v);
      lazy_[op->getResult(0)] = storedIdentity(v);
      return;
    }
    if (reshapeOps().count(name)) {
      int base = materialize(op->getOperand(0));
      int v = newValue(specOf(op->getResult(0)), {Storage::Kind::Alias, base});
      lazy_[op->getResult(0)] = storedIdentity(v);
      return;
    }
    if (viewOps().count(name)) {
      lowerView(op, name, attrs);
      return;
    }
    if (name == "matmul") {
      lowerMatmul(op);
      return;
    }
    fail("cpu codegen: op '" + name + "' has no CPU implementation yet");
  }

  void lowerConstant(Operation *op) {
    auto dense = llvm::dyn_cast<DenseElementsAttr>(op->getAttr("value"));
    check(bool(dense), "cpu codegen: constant without dense value");
    if (dense.isSplat()) {
      Lazy l;
      l.op = op;
      lazy_[op->getResult(0)] = l;
      return;
    }
    TensorSpec s = specOf(op->getResult(0));
    std::string bytes;
    auto put = [&](const void *p, size_t n) { bytes.append(static_cast<const char *>(p), n); };
    if (isFloat(s.dtype)) {
      for (APFloat f : dense.getValues<APFloat>()) {
        bool lost;
        f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        double d = f.convertToDouble();
        if (s.dtype == DType::F64) {
          put(&d, 8);
        } else if (s.dtype == DType::F32) {
          float x = float(d);
          put(&x, 4);
        } else {
          uint16_t h = s.dtype == DType::F16 ? doubleToHalfBits(d) : doubleToBFloat16Bits(d);
          put(&h, 2);
        }
      }
    } else {
      for (APInt i : dense.getValues<APInt>()) {
        int64_t x = s.dtype == DType::I1 ? int64_t(i.getZExtValue()) : i.getSExtValue();
        if (s.dtype == DType::I64) {
          put(&x, 8);
        } else if (s.dtype == DType::I32) {
          int32_t y = int32_t(x);
          put(&y, 4);
        } else {
          uint8_t y = x != 0;
          put(&y, 1);
        }
      }
    }
    // 64-byte alignment for every constant.
    art_.data.resize((art_.data.size() + 63) / 64 * 64, '\0');
    art_.constants.push_back({art_.data.size(), bytes.size()});
    art_.data += bytes;
    int v = newValue(s, {Storage::Kind::Constant, int(art_.constants.size()) - 1});
    lazy_[op->getResult(0)] = storedIdentity(v);
  }

  // Views re-index their operand's storage.
  void lowerView(Operation *op, const std::string &name, const AttrMap &attrs) {
    Value x = op->getOperand(0);
    if (!lazy_.at(x).stored)
      materialize(x);
    const Lazy &in = lazy_.at(x);
    TensorSpec inSpec = specOf(x);
    int64_t r = inSpec.rank();
    // For each operand dim m: operand index = offset[m] + scale[m] * result[dim[m]].
    auto remap = [&](Value result, const std::vector<Term> &operandFromResult) {
      Lazy out = in;
      for (Term &t : out.terms) {
        if (t.dim < 0)
          continue;
        const Term &m = operandFromResult[size_t(t.dim)];
        t.offset += t.scale * m.offset;
        t.scale *= m.scale;
        t.dim = m.dim;
        if (t.dim < 0)
          t.scale = 0;
      }
      lazy_[result] = out;
    };
    auto norm = [&](int64_t a) { return a < 0 ? a + r : a; };
    if (name == "transpose" || name == "permute") {
      std::vector<int64_t> perm(static_cast<size_t>(r));
      for (int64_t i = 0; i < r; ++i)
        perm[size_t(i)] = i;
      if (name == "transpose")
        std::swap(perm[size_t(norm(getInt(attrs, "dim0")))], perm[size_t(norm(getInt(attrs, "dim1")))]);
      else
        for (int64_t i = 0; i < r; ++i)
          perm[size_t(i)] = norm(getInts(attrs, "dims")[size_t(i)]);
      // result dim i is operand dim perm[i].
      std::vector<Term> m(static_cast<size_t>(r));
      for (int64_t i = 0; i < r; ++i)
        m[size_t(perm[size_t(i)])] = {int(i), 1, 0};
      remap(op->getResult(0), m);
      return;
    }
    if (name == "broadcast_to") {
      TensorSpec out = specOf(op->getResult(0));
      int64_t R = out.rank();
      std::vector<Term> m(static_cast<size_t>(r));
      for (int64_t k = 0; k < r; ++k) {
        bool broadcast = inSpec.shape[size_t(k)] == Dim::of(1) && out.shape[size_t(R - r + k)] != Dim::of(1);
        m[size_t(k)] = broadcast ? Term{-1, 0, 0} : Term{int(R - r + k), 1, 0};
      }
      remap(op->getResult(0), m);
      return;
    }
    auto staticSize = [&](int64_t axis) {
      const Dim &d = inSpec.shape[size_t(axis)];
      check(d.isStatic(), "cpu codegen: " + name + " along a symbolic dim");
      return d.value();
    };
    if (name == "slice") {
      SliceAttrs s = sliceAttrs(attrs);
      std::vector<Term> m = identityTerms(size_t(r));
      for (size_t i = 0; i < s.axes.size(); ++i) {
        int64_t a = norm(s.axes[i]);
        SliceRange range = sliceRange(staticSize(a), s.starts[i], s.ends[i], s.steps[i]);
        m[size_t(a)] = {int(a), range.step, range.start};
      }
      remap(op->getResult(0), m);
      return;
    }
    // split: each result is a slice along the axis.
    int64_t axis = norm(getInt(attrs, "axis"));
    int64_t start = 0;
    for (Value res : op->getResults()) {
      std::vector<Term> m = identityTerms(size_t(r));
      m[size_t(axis)] = {int(axis), 1, start};
      remap(res, m);
      const Dim &len = specOf(res).shape[size_t(axis)];
      check(len.isStatic(), "cpu codegen: split along a symbolic dim");
      start += len.value();
    }
  }

  void lowerMatmul(Operation *op) {
    // A stored operand read as is, or with its last two dims swapped
    // (a transpose feeding the GEMM: BLAS reads it transposed, no copy).
    auto operand = [&](Value v, bool &transposed) {
      transposed = false;
      const Lazy &l = lazy_.at(v);
      TensorSpec s = specOf(v);
      if (l.stored && s.rank() >= 2) {
        std::vector<Term> swapped = identityTerms(size_t(s.rank()));
        std::swap(swapped[size_t(s.rank() - 1)], swapped[size_t(s.rank() - 2)]);
        const TensorSpec &stored = {art_.values[l.value].dtype, art_.values[l.value].shape};
        Shape t = s.shape;
        std::swap(t[t.size() - 1], t[t.size() - 2]);
        if (l.terms == swapped && stored.shape == t) {
          transposed = true;
          return l.value;
        }
      }
      return materialize(v);
    };
    bool ta, tb;
    int a = operand(op->getOperand(0), ta);
    int b = operand(op->getOperand(1), tb);
    int out = newProducedValue(specOf(op->getResult(0)));
    Step s;
    s.kind = Step::Kind::Matmul;
    s.label = label_;
    s.operands = {out, a, b};
    s.transposeA = ta;
    s.transposeB = tb;
    art_.steps.push_back(s);
    lazy_[op->getResult(0)] = storedIdentity(out);
  }

  // Makes `v` a contiguous stored value (a loop nest if it is not one yet).
  int materialize(Value v) {
    const Lazy &l = lazy_.at(v);
    TensorSpec s = specOf(v);
    if (isIdentity(l, s))
      return l.value;
    int out = newProducedValue(s);
    emitNest(v, s.shape, std::vector<bool>(size_t(s.rank()), false), "", false, out);
    lazy_[v] = storedIdentity(out);
    return out;
  }

  // ------------------------------------------------------------- nests

  void collectLeaves(Value v, std::vector<int> &leaves, llvm::DenseSet<Value> &seen) {
    if (!seen.insert(v).second)
      return;
    const Lazy &l = lazy_.at(v);
    if (l.stored) {
      if (std::find(leaves.begin(), leaves.end(), l.value) == leaves.end())
        leaves.push_back(l.value);
      return;
    }
    for (Value o : l.op->getOperands())
      collectLeaves(o, leaves, seen);
  }

  void emitNest(Value point, const Shape &space, const std::vector<bool> &reduced,
                const std::string &reduction, bool keepdim, int out) {
    std::vector<int> leaves;
    llvm::DenseSet<Value> seen;
    collectLeaves(point, leaves, seen);
    NestSpec spec;
    spec.symbol = prefix_ + std::to_string(art_.steps.size());
    spec.symbols = symbolNames_;
    spec.space = space;
    spec.reduced = reduced;
    spec.reduction = reduction;
    spec.keepdim = keepdim;
    std::vector<int> operands = {out};
    operands.insert(operands.end(), leaves.begin(), leaves.end());
    for (int o : operands)
      spec.operands.push_back({art_.values[o].dtype, art_.values[o].shape});
    int64_t R = int64_t(space.size());
    emitLoopNest(kernels_, spec, [&](OpBuilder &b, Location loc, ArrayRef<Value> ivs,
                                     ArrayRef<Value> memrefs) {
      llvm::DenseMap<Value, Value> memo;
      // The index of dim j of a rank-r value at this point (numpy
      // broadcasting: right-aligned, size-1 dims read index 0).
      auto viewIndex = [&](const TensorSpec &s, int64_t j) -> Value {
        int64_t d = R - s.rank() + j;
        if (s.shape[size_t(j)] == Dim::of(1) && space[size_t(d)] != Dim::of(1))
          return b.create<arith::ConstantIndexOp>(loc, 0);
        return ivs[size_t(d)];
      };
      std::function<Value(Value)> emit = [&](Value v) -> Value {
        if (Value m = memo.lookup(v))
          return m;
        const Lazy &l = lazy_.at(v);
        TensorSpec s = specOf(v);
        Value result;
        if (l.stored) {
          SmallVector<Value> idx;
          for (const Term &t : l.terms) {
            Value i = b.create<arith::ConstantIndexOp>(loc, t.offset);
            if (t.dim >= 0 && t.scale != 0) {
              Value vi = viewIndex(s, t.dim);
              if (t.scale != 1)
                vi = b.create<arith::MulIOp>(loc, vi, b.create<arith::ConstantIndexOp>(loc, t.scale));
              i = t.offset == 0 ? vi : b.create<arith::AddIOp>(loc, i, vi).getResult();
            }
            idx.push_back(i);
          }
          size_t which = size_t(std::find(operands.begin() + 1, operands.end(), l.value) - operands.begin());
          Value loaded = b.create<memref::LoadOp>(loc, memrefs[which], idx);
          result = fromStorage(b, loc, loaded, art_.values[l.value].dtype);
        } else {
          result = emitScalar(b, loc, l.op, s, emit, viewIndex);
        }
        memo[v] = result;
        return result;
      };
      Value x = emit(point);
      DType from = specOf(point).dtype, to = art_.values[out].dtype;
      return convert(b, loc, x, from, to);
    });
    Step st;
    st.kind = Step::Kind::Loop;
    st.label = label_;
    st.symbol = spec.symbol;
    st.operands = operands;
    st.parallel = nestIsParallel(spec);
    st.extent = nestExtent(spec);
    st.work = nestWork(spec);
    art_.steps.push_back(st);
  }

  Value emitScalar(OpBuilder &b, Location loc, Operation *op, const TensorSpec &s,
                   const std::function<Value(Value)> &emit,
                   const std::function<Value(const TensorSpec &, int64_t)> &viewIndex) {
    std::string name = opName(op);
    AttrMap attrs = completeAttrs(*tc::schemaOf(op), tc::coreAttrs(op, *tc::schemaOf(op)));
    if (name == "full" || name == "zeros" || name == "ones")
      return scalarConstant(b, loc, name == "zeros" ? 0 : name == "ones" ? 1 : getFloat(attrs, "value"),
                            s.dtype);
    if (name == "constant") {
      auto dense = llvm::cast<DenseElementsAttr>(op->getAttr("value"));
      double v = isFloat(s.dtype) ? (*dense.getValues<APFloat>().begin()).convertToDouble()
                 : s.dtype == DType::I1
                     ? double((*dense.getValues<APInt>().begin()).getZExtValue())
                     : double((*dense.getValues<APInt>().begin()).getSExtValue());
      if (isFloat(s.dtype) && !dense.getElementType().isF64()) {
        APFloat f = *dense.getValues<APFloat>().begin();
        bool lost;
        f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        v = f.convertToDouble();
      }
      return scalarConstant(b, loc, v, s.dtype);
    }
    if (name == "iota") {
      check(s.rank() == 1, "cpu codegen: iota of rank " + std::to_string(s.rank()));
      Value i = viewIndex(s, 0);
      Value i64 = b.create<arith::IndexCastOp>(loc, b.getI64Type(), i);
      Value v = b.create<arith::AddIOp>(
          loc, scalarConstant(b, loc, double(getInt(attrs, "start")), DType::I64),
          b.create<arith::MulIOp>(loc, i64, scalarConstant(b, loc, double(getInt(attrs, "step")), DType::I64)));
      return convert(b, loc, v, DType::I64, s.dtype);
    }
    SmallVector<Value> operands;
    SmallVector<DType> dtypes;
    for (Value o : op->getOperands()) {
      operands.push_back(emit(o));
      dtypes.push_back(specOf(o).dtype);
    }
    return emitScalarOp(b, loc, name, attrs, operands, dtypes, s.dtype);
  }

  // --------------------------------------------------------- signature

  void addOutput(Value v, const std::string &name) {
    if (!lazy_.at(v).stored)
      materialize(v);
    const Lazy &l = lazy_.at(v);
    TensorSpec s = specOf(v);
    int index = int(art_.outputs.size());
    int value;
    if (isIdentity(l, s) && produced_[l.value]) {
      value = l.value;
    } else if (isIdentity(l, s)) {
      // An input, constant, alias or earlier output: copy into the output.
      value = newProducedValue(s);
      Step c;
      c.kind = Step::Kind::Copy;
      c.label = "output " + name;
      c.operands = {value, l.value};
      art_.steps.push_back(c);
    } else {
      label_ = "output " + name;
      value = materialize(v);
    }
    produced_[value] = false;
    art_.values[value].storage = {Storage::Kind::Output, index};
    art_.outputs.push_back({name, s.dtype, s.shape, value});
    // A later return of the same value must copy.
    lazy_[v] = storedIdentity(value);
  }

  // Arena buffers for produced values, live from the step that writes them
  // to the last step that reads them (or an alias of them).
  void finalize() {
    int n = int(art_.values.size());
    std::vector<int> first(size_t(n), -1), last(size_t(n), -1);
    auto base = [&](int v) {
      while (art_.values[v].storage.kind == Storage::Kind::Alias)
        v = art_.values[v].storage.index;
      return v;
    };
    for (size_t si = 0; si < art_.steps.size(); ++si) {
      const Step &s = art_.steps[si];
      for (size_t k = 0; k < s.operands.size(); ++k) {
        int v = base(s.operands[k]);
        if (k == 0 && first[v] < 0)
          first[v] = int(si);
        last[v] = std::max(last[v], int(si));
      }
    }
    for (int v = 0; v < n; ++v) {
      if (!produced_[v])
        continue;
      const artifact::ValueDecl &d = art_.values[v];
      Dim bytes = numElements(d.shape) * Dim::of(int64_t(dtypeSize(d.dtype)));
      int f = std::max(first[v], 0);
      art_.buffers.push_back({bytes, f, std::max(last[v], f)});
      art_.values[v].storage = {Storage::Kind::Buffer, int(art_.buffers.size()) - 1};
    }
  }

  ModuleOp kernels_;
  std::string prefix_;
  artifact::Artifact art_;
  std::vector<bool> produced_;
  std::vector<std::string> symbolNames_;
  llvm::DenseMap<Value, Lazy> lazy_;
  std::string label_;
};

} // namespace

bool cpuSupportsOp(const std::string &op) {
  // Composites the CPU pipeline decomposes into supported primitives.
  static const std::set<std::string> decomposed = {"softmax", "log_softmax", "layer_norm",
                                                   "rms_norm", "cross_entropy", "var",
                                                   "batch_norm", "scaled_dot_product_attention"};
  return isScalarOp(op) || reductionOps().count(op) || reshapeOps().count(op) ||
         viewOps().count(op) || generatorOps().count(op) || op == "constant" || op == "matmul" ||
         decomposed.count(op);
}

artifact::Artifact compileCpuArtifact(ModuleOp module, const CpuCompileOptions &options) {
  func::FuncOp fn;
  for (auto f : module.getOps<func::FuncOp>()) {
    check(!fn, "cpu codegen: the module must hold one function");
    fn = f;
  }
  check(bool(fn), "cpu codegen: the module has no function");
  MLIRContext *ctx = module.getContext();
  loadCpuDialects(*ctx);
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(UnknownLoc::get(ctx));
  artifact::Artifact art = ProgramBuilder(*kernels, "tc_" + fn.getName().str() + "_nest")
                               .build(fn);
  NativeCode code = compileToSharedLibrary(*kernels, options.cpu);
  art.code = std::move(code.library);
  art.target.kind = "cpu";
  art.target.triple = code.triple;
  art.target.cpu = code.cpu;
  art.target.features = code.features;
  art.options = options.record;
  return art;
}

} // namespace tensorc::codegen::cpu
