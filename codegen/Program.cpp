#include "codegen/Program.h"

#include "codegen/cpu/LoopNest.h"
#include "codegen/cpu/ScalarOps.h"
#include "ir/core/Error.h"
#include "ir/core/FusedAttention.h"
#include "ir/core/ReductionSplit.h"
#include "ir/core/ShapeInference.h"
#include "ir/dialect/Conversion.h"
#include "ir/dialect/MatrixTranspose.h"
#include "runtime/host/FloatBits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>

using namespace mlir;

namespace tensorc::codegen {
namespace {

using namespace cpu;

using artifact::Step;
using artifact::Storage;

// The most loops one chain kernel runs. A chain is one kernel whose body
// inlines every chained loop's row pass, and NVRTC's time grows faster than
// its length: BERT-base's training backward chained the 77 loops that
// recompute the 12 layers' residual stream, one kernel NVVM optimized for
// 5.9 s per variant, on the load's critical path. Chains of real row
// passes (softmax, layer norm and their backwards, cross-entropy) are 2-10
// loops. Independent loops over the same rows (siblings: the same layer
// op of every layer, run as one kernel) gain little past a few and group
// by fours, so that a 12-layer model's groups are one text (compiled once;
// BERT-base's 12 attention-probability dropout recomputes were one sibling
// kernel of 3.0 s in NVVM).
constexpr int kMaxChainedLoops = 16;
constexpr int kMaxSiblingLoops = 4;

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
  static const std::set<std::string> r = {"sum", "mean", "max", "min", "prod", "logsumexp"};
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
// Whether two shapes are equal once their leading unit dims are dropped
// ([C] and [1, 1, C]): right-aligned indexing maps them element for element.
bool sameUpToLeadingOnes(const Shape &a, const Shape &b) {
  auto strip = [](const Shape &s) {
    size_t k = 0;
    while (k < s.size() && s[k] == Dim::of(1))
      ++k;
    return Shape(s.begin() + long(k), s.end());
  };
  return strip(a) == strip(b);
}
const std::set<std::string> &viewOps() {
  static const std::set<std::string> r = {"transpose", "permute", "broadcast_to", "slice", "split"};
  return r;
}

class ProgramBuilder {
public:
  ProgramBuilder(NestEmitter emitNest, const std::string &prefix, const ProgramOptions &options,
                 AttentionEmitter emitAttention)
      : emitNest_(std::move(emitNest)), prefix_(prefix), options_(options),
        emitAttention_(std::move(emitAttention)) {}

  const ProgramNotes &notes() const { return notes_; }

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
    for (Operation *opp : loweringOrder(fn)) {
      Operation &op = *opp;
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          auto name = fn.getResultAttrOfType<StringAttr>(unsigned(i), "tc.name");
          if (auto message = fn.getResultAttrOfType<StringAttr>(unsigned(i), "tc.check"))
            addCheck(v, message.str());
          else
            addOutput(v, name ? name.str() : "out" + std::to_string(i));
        }
        continue;
      }
      label_ = opName(&op);
      if (auto fused = dyn_cast<tc::FusedOp>(op)) {
        label_ = fused.getKernel().str();
        Block &body = fused.getBody().front();
        for (auto [arg, outer] : llvm::zip(body.getArguments(), fused.getInputs())) {
          setLazy(arg, Lazy(lazy_.at(outer)));
          outerOf_[arg] = outer;
        }
        // Full reductions only the kernel's results read (a summed loss)
        // run last, after the other results are stored: their second stage
        // (one block) would split the row chain of the rest in two, each
        // part reading the rows again.
        std::vector<Operation *> last;
        for (Operation &inner : body) {
          if (isTwoStageResult(&inner)) {
            last.push_back(&inner);
            continue;
          }
          if (inner.getName().getStringRef() != "tc.yield") {
            lower(&inner);
            continue;
          }
          for (Value y : inner.getOperands())
            if (lazy_.count(y) && !lazy_.at(y).stored)
              materialize(y);
          for (Operation *deferred : last)
            lower(deferred);
          for (auto [res, y] : llvm::zip(fused.getResults(), inner.getOperands())) {
            if (!lazy_.at(y).stored)
              materialize(y);
            setLazy(res, Lazy(lazy_.at(y)));
          }
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
  // Whether `axes` are exactly every axis of a rank-`rank` tensor but the
  // last (rank >= 2).
  static bool sumsLeadingAxes(DenseI64ArrayAttr axes, int64_t rank) {
    if (!axes || rank < 2)
      return false;
    std::set<int64_t> set;
    for (int64_t a : axes.asArrayRef())
      set.insert(a < 0 ? a + rank : a);
    return int64_t(set.size()) == rank - 1 && *set.begin() == 0 && *set.rbegin() == rank - 2;
  }

  // The value a column sum reads (a linear layer's bias gradient, the sum
  // of dy over every axis but the last), bare or as a fused kernel of that sum
  // alone; null for any other op.
  static Value columnSumOperand(Operation *op) {
    auto isColumnSum = [](Operation *o) {
      return opName(o) == "sum" && sumsLeadingAxes(o->getAttrOfType<DenseI64ArrayAttr>("axes"),
                                                   specOf(o->getOperand(0)).rank());
    };
    if (auto fused = dyn_cast<tc::FusedOp>(op)) {
      Block &body = fused.getBody().front();
      if (body.getOperations().size() != 2 || !isColumnSum(&body.front()))
        return {};
      auto arg = llvm::dyn_cast<BlockArgument>(body.front().getOperand(0));
      return arg ? fused.getInputs()[arg.getArgNumber()] : Value();
    }
    return isColumnSum(op) ? op->getOperand(0) : Value();
  }

  // The value `v` is the transpose of the last two dims of (a view a GEMM
  // reads with its transpose flag), or null.
  static Value lastTwoTransposed(Value v) {
    Operation *def = v.getDefiningOp();
    return isMatrixTranspose(def) ? def->getOperand(0) : Value();
  }

  // The value `v` is a reshape of (through reshapes, also those a fused
  // kernel yields beside the value they reshape), or v.
  static Value reshapeRoot(Value v) {
    for (;;) {
      Operation *def = v.getDefiningOp();
      if (def && opName(def) == "reshape") {
        v = def->getOperand(0);
        continue;
      }
      auto fused = def ? dyn_cast<tc::FusedOp>(def) : tc::FusedOp();
      if (!fused)
        return v;
      Operation *yield = fused.getBody().front().getTerminator();
      Value y = yield->getOperand(llvm::cast<OpResult>(v).getResultNumber());
      while (Operation *inner = y.getDefiningOp()) {
        if (opName(inner) != "reshape")
          break;
        y = inner->getOperand(0);
      }
      if (auto arg = llvm::dyn_cast<BlockArgument>(y)) {
        v = fused.getInputs()[arg.getArgNumber()];
        continue;
      }
      for (OpOperand &o : yield->getOpOperands())
        if (o.get() == y)
          return fused.getResult(o.getOperandNumber());
      return v;
    }
  }

  // The function's ops in the order they are lowered: the body's order,
  // except that a column sum of dy moves to just after a later matmul
  // that reads dy as its right operand (the weight gradient x^T @ dy) or
  // transposed as its left one (dy^T @ x) when nothing reads the sum
  // before it, so that the sum can ride in that GEMM's bias-gradient
  // epilogue (biasGradientEpilogue looks back for
  // the GEMM). Autodiff emits a layer's bias gradient first. The ops are
  // pure: lowering one later than its place in the body changes nothing
  // else.
  std::vector<Operation *> loweringOrder(func::FuncOp fn) const {
    std::vector<Operation *> order;
    for (Operation &op : fn.getBody().front())
      order.push_back(&op);
    if (!options_.matmulEpilogues || !options_.biasGradientEpilogues)
      return order;
    std::set<Operation *> moved;
    for (size_t i = 0; i < order.size(); ++i) {
      Operation *sum = order[i];
      Value dy = columnSumOperand(sum);
      if (!dy || moved.count(sum))
        continue;
      // A collective of the sum alone (a DDP gradient's all_reduce, which
      // tensorc-schedule issues right after it) moves along with it.
      auto followsSum = [&](Operation *u) {
        const OpSchema *schema = tc::schemaOf(u);
        return schema && schema->category == "collective" &&
               llvm::all_of(u->getOperands(), [&](Value v) { return v.getDefiningOp() == sum; });
      };
      size_t firstUse = order.size();
      std::vector<size_t> followers;
      for (size_t j = i + 1; j < order.size() && firstUse == order.size(); ++j)
        for (Value r : sum->getResults())
          for (Operation *u : r.getUsers())
            if (u == order[j] && firstUse == order.size()) {
              if (followsSum(u) && (followers.empty() || followers.back() != j))
                followers.push_back(j);
              else if (!followsSum(u))
                firstUse = j;
            }
      for (size_t j = i + 1; j < firstUse; ++j) {
        Operation *mm = order[j];
        if (opName(mm) != "matmul")
          continue;
        // x^T @ dy, or dy^T @ x (dy, or flat(dy)).
        Value dyRoot = reshapeRoot(dy);
        Value left = lastTwoTransposed(mm->getOperand(0));
        if (reshapeRoot(mm->getOperand(1)) != dyRoot && !(left && reshapeRoot(left) == dyRoot))
          continue;
        // The sum and its followers before mm go just after mm.
        std::vector<Operation *> group = {sum};
        for (size_t f : followers)
          if (f < j)
            group.push_back(order[f]);
        for (size_t g = group.size(); g-- > 0;)
          order.erase(std::find(order.begin(), order.end(), group[g]));
        auto at = std::find(order.begin(), order.end(), mm) + 1;
        order.insert(at, group.begin(), group.end());
        moved.insert(sum);
        --i; // order[i] is now the op that followed the sum (wraps at 0; ++i restores it)
        break;
      }
    }
    return order;
  }

  // A reduction over every axis that runs in two stages (lowerFullReduction).
  static bool isTwoStageReduction(Operation *op) {
    if (!reductionOps().count(opName(op)))
      return false;
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    TensorSpec in = specOf(op->getOperand(0));
    return (!axes || std::set<int64_t>(axes.asArrayRef().begin(), axes.asArrayRef().end()).size() ==
                         size_t(in.rank())) &&
           fullReductionKeptDims(in.shape) > 0;
  }

  // ... whose result only its fused kernel's yield reads.
  static bool isTwoStageResult(Operation *op) {
    return isTwoStageReduction(op) && llvm::all_of(op->getResult(0).getUsers(), [](Operation *u) {
             return u->getName().getStringRef() == "tc.yield";
           });
  }

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
      bool keepdim = getBool(attrs, "keepdim");
      if (isTwoStageReduction(op)) {
        lazy_[op->getResult(0)] = storedIdentity(lowerFullReduction(x, name, keepdim, out));
        return;
      }
      if (name == "sum" && sumsLeadingAxes(op->getAttrOfType<DenseI64ArrayAttr>("axes"), in.rank()))
        if (int v = biasGradientEpilogue(x, out); v >= 0) {
          lazy_[op->getResult(0)] = storedIdentity(v);
          return;
        }
      if (int v = lowerColumnReduction(x, name, reduced, keepdim, out); v >= 0) {
        lazy_[op->getResult(0)] = storedIdentity(v);
        return;
      }
      if (int v = lowerTrailingThenLeading(x, name, reduced, keepdim, out); v >= 0) {
        lazy_[op->getResult(0)] = storedIdentity(v);
        return;
      }
      int v = newProducedValue(out);
      emitNest(x, in.shape, reduced, name, keepdim, v);
      lazy_[op->getResult(0)] = storedIdentity(v);
      return;
    }
    if (reshapeOps().count(name)) {
      // Adding leading unit dims to a value not in memory (an
      // iota, a fill, a recomputed broadcast) keeps it lazy: right-aligned
      // indexing reads the same elements. Materialized, every consumer read
      // it from memory (the cross-entropy gradient's one-hot compared each
      // logit's class with an i64 iota [1, C] stored in memory).
      // Only adding them: an operand of higher rank than its consumers'
      // loop space would index outside it.
      if (!lazy_.at(op->getOperand(0)).stored &&
          specOf(op->getResult(0)).rank() >= specOf(op->getOperand(0)).rank() &&
          sameUpToLeadingOnes(specOf(op->getOperand(0)).shape, specOf(op->getResult(0)).shape)) {
        Lazy l;
        l.op = op;
        lazy_[op->getResult(0)] = l;
        return;
      }
      int base = materialize(op->getOperand(0));
      int v = newValue(specOf(op->getResult(0)), {Storage::Kind::Alias, base});
      lazy_[op->getResult(0)] = storedIdentity(v);
      return;
    }
    if (name == "broadcast_to" && !lazy_.at(op->getOperand(0)).stored) {
      // A broadcast of a value not in memory (a splat constant, a
      // recomputed expression) stays lazy: numpy broadcasting composes, so
      // every nest reads the operand right-aligned at its own indices.
      // Materialized, a [1, 1] constant of ones became a kernel of its own
      // between the passes of a layer norm's backward, splitting its chain.
      Lazy l;
      l.op = op;
      lazy_[op->getResult(0)] = l;
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
    if (isFusedAttentionOp(name)) {
      lowerAttention(op, name == "scaled_dot_product_attention_backward", attrs);
      return;
    }
    if (name == "gather" || name == "index_select" || name == "embedding" || name == "dropout") {
      // Read at computed indices: the tensor and the indices must be stored.
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        if (!(name == "dropout" && i == 0))
          materialize(op->getOperand(i));
      Lazy l;
      l.op = op;
      lazy_[op->getResult(0)] = l;
      return;
    }
    if (name == "argmax" || name == "argmin") {
      Value x = op->getOperand(0);
      TensorSpec in = specOf(x);
      NestSpec spec;
      spec.space = in.shape;
      spec.reduced.assign(size_t(in.rank()), !hasAttr(attrs, "axis"));
      if (hasAttr(attrs, "axis")) {
        int64_t a = getInt(attrs, "axis");
        spec.reduced[size_t(a < 0 ? a + in.rank() : a)] = true;
      }
      spec.reduction = name;
      spec.keepdim = getBool(attrs, "keepdim");
      spec.valueDtype = in.dtype;
      int v = newProducedValue(specOf(op->getResult(0)));
      emitNestWith({x}, spec, v, [x](Point &p) { return p.emit(x); });
      lazy_[op->getResult(0)] = storedIdentity(v);
      return;
    }
    if (name == "concat") {
      lowerConcat(op, attrs);
      return;
    }
    if (name == "pad") {
      lowerPad(op, attrs);
      return;
    }
    if (name == "conv2d") {
      lowerConv2d(op, attrs);
      return;
    }
    if (name == "conv2d_backward_input" || name == "conv2d_backward_weight") {
      lowerConv2dGradient(op, name == "conv2d_backward_input", attrs);
      return;
    }
    if (name == "max_pool2d" || name == "avg_pool2d" || name == "max_pool2d_taps") {
      lowerPool(op, name, attrs);
      return;
    }
    if (name == "max_pool2d_backward") {
      lowerMaxPoolBackward(op, attrs);
      return;
    }
    if (schema->category == "collective") {
      lowerCollective(op, name, attrs);
      return;
    }
    if (name == "embedding_backward") {
      lowerScatterAdd(op, attrs);
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
    lazy_[op->getResult(0)] = storedIdentity(newConstant(s, bytes));
  }

  // A value whose bytes are in the artifact's data section.
  int newConstant(const TensorSpec &s, const std::string &bytes) {
    // 64-byte alignment for every constant.
    art_.data.resize((art_.data.size() + 63) / 64 * 64, '\0');
    art_.constants.push_back({art_.data.size(), bytes.size()});
    art_.data += bytes;
    return newValue(s, {Storage::Kind::Constant, int(art_.constants.size()) - 1});
  }

  // A dropout's stream (its Philox counter's third word) as an i32 constant
  // the kernel reads, one per stream, not a literal in its code: the same
  // layer's dropouts differ only in their streams, and with the literal
  // every layer's kernels had different text, so NVRTC compiled each layer's
  // copy (a 4-layer BERT training step: forward source 0.97 -> 0.43 MB,
  // backward 1.74 -> 0.84 MB). One uniform load per thread.
  int dropoutStreamValue(Operation *dropout) {
    AttrMap attrs = completeAttrs(*tc::schemaOf(dropout), tc::coreAttrs(dropout, *tc::schemaOf(dropout)));
    int32_t stream = int32_t(uint32_t(getInt(attrs, "stream")));
    auto [it, fresh] = dropoutStreams_.try_emplace(stream, -1);
    if (fresh)
      it->second = newConstant({DType::I32, {}}, std::string(reinterpret_cast<const char *>(&stream), 4));
    return it->second;
  }

  // Views re-index their operand's storage.
  void lowerView(Operation *op, const std::string &name, const AttrMap &attrs) {
    Value x = op->getOperand(0);
    if (!lazy_.at(x).stored)
      materialize(x);
    const Lazy in = lazy_.at(x); // a copy: inserting results may move the map
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
      Dim len = specOf(res).shape[size_t(axis)]; // a copy: specOf returns a temporary
      check(len.isStatic(), "cpu codegen: split along a symbolic dim");
      start += len.value();
    }
  }

  // A reduction over leading dims and a trailing block of dims with kept
  // dims between them (batch norm's statistics of [N, C, H, W] over N, H and
  // W) in two stages: the trailing block first, rows of contiguous elements
  // (N * C of them), then the leading dims of those partials (accumulated in
  // the compute type). In one stage a block per kept index (64 for C = 64)
  // reduced 100K strided elements each: a ResNet block's statistics kernels
  // took 60-110 us each on an H200 for 12.8 MB (3 us of bandwidth). Only the
  // regroupable reductions; the trailing block static and at least 256
  // elements. Returns the result's value, or -1 when this does not apply.
  int lowerTrailingThenLeading(Value x, const std::string &name, const std::vector<bool> &reduced,
                               bool keepdim, const TensorSpec &out) {
    static const std::set<std::string> regroupable = {"sum", "mean", "max", "min", "prod"};
    if (!options_.splitColumnReductions || !regroupable.count(name))
      return -1;
    TensorSpec in = specOf(x);
    size_t r = reduced.size(), t = r;
    while (t > 0 && reduced[t - 1])
      --t; // [t, r): the trailing reduced block
    size_t k = t;
    while (k > 0 && !reduced[k - 1])
      --k; // [k, t): kept dims before it
    if (t == r || k == t || k == 0)
      return -1; // no trailing block, no kept dims between, or nothing reduced before them
    int64_t trailing = 1;
    for (size_t d = t; d < r; ++d) {
      if (!in.shape[d].isStatic())
        return -1;
      trailing *= in.shape[d].value();
    }
    if (trailing < 256)
      return -1;
    DType acc = in.dtype == DType::F16 || in.dtype == DType::BF16 ? DType::F32 : in.dtype;
    Shape partialShape(in.shape.begin(), in.shape.begin() + long(t));
    int partial = newProducedValue({acc, partialShape});
    std::vector<bool> firstStage(r, false);
    std::fill(firstStage.begin() + long(t), firstStage.end(), true);
    emitNest(x, in.shape, firstStage, name, false, partial);
    NestSpec spec;
    spec.space = partialShape;
    spec.reduced.assign(reduced.begin(), reduced.begin() + long(t));
    spec.reduction = name;
    spec.keepdim = keepdim;
    spec.valueDtype = acc;
    Shape targetShape;
    for (size_t d = 0; d < t; ++d)
      if (!spec.reduced[d] || keepdim)
        targetShape.push_back(spec.reduced[d] ? Dim::of(1) : in.shape[d]);
    // keepdim: the result [1, C] viewed as the op's [1, C, 1, 1].
    int target = newProducedValue(keepdim ? TensorSpec{out.dtype, targetShape} : out);
    emitNestWith({}, spec, target,
                 [partial](Point &p) { return p.load(partial, SmallVector<Value>(p.n.ivs.begin(), p.n.ivs.end())); },
                 {}, {partial});
    return keepdim ? newValue(out, {Storage::Kind::Alias, target}) : target;
  }

  // A reduction over every dim in two stages, so that the first runs in
  // parallel: partial results per index of the leading dims (accumulated in
  // the compute type: f32 for f16/bf16), then their reduction. sum/max/min/
  // prod of partials are exact regroupings; mean of equal-sized means is the
  // mean. The leading dims: the fewest whose sizes multiply to at least
  // 1024 partials (a symbolic one counts as enough), short of the last dim:
  // partials per index of dim 0 alone left a [8, 12, 1024, 64] sum with 8
  // blocks (0.19 ms on an H100, 40x the bandwidth floor).
  int lowerFullReduction(Value x, const std::string &name, bool keepdim, const TensorSpec &out) {
    TensorSpec in = specOf(x);
    DType acc = in.dtype == DType::F16 || in.dtype == DType::BF16 ? DType::F32 : in.dtype;
    size_t lead = fullReductionKeptDims(in.shape);
    Shape partialShape(in.shape.begin(), in.shape.begin() + long(lead));
    int partial = newProducedValue({acc, partialShape});
    std::vector<bool> firstStage(size_t(in.rank()), true);
    std::fill(firstStage.begin(), firstStage.begin() + long(lead), false);
    emitNest(x, in.shape, firstStage, name, false, partial);
    NestSpec spec;
    spec.space = partialShape;
    spec.reduced.assign(lead, true);
    spec.reduction = name;
    spec.keepdim = keepdim;
    spec.valueDtype = acc;
    // keepdim: the result [1, ...] (one per leading dim) viewed as the op's [1, 1, ...].
    int target = newProducedValue(keepdim ? TensorSpec{out.dtype, Shape(lead, Dim::of(1))} : out);
    emitNestWith({}, spec, target,
                 [partial](Point &p) { return p.load(partial, SmallVector<Value>(p.n.ivs.begin(), p.n.ivs.end())); },
                 {}, {partial});
    return keepdim ? newValue(out, {Storage::Kind::Alias, target}) : target;
  }

  // A reduction over the leading dims [0, p) of x (static, R elements, a
  // multiple of 8 and at least 4096), keeping the rest (K per row), in two
  // stages (ProgramOptions::splitColumnReductions): partial[c, k] reduces
  // rows C c .. C c + C-1 (one thread per (c, k): a warp reads adjacent k),
  // then the R/C partials per k. sum/max/min/prod regroup exactly; mean of
  // equal-sized means is the mean. Returns the result's value, or -1 when
  // this does not apply. Measured on an H100 (GPT-2 block, 8192 x 768
  // bf16): the one-stage nest took ~0.2 ms per layer-norm parameter
  // gradient, one strided column per block; two stages with C = 8 took
  // 17-20 us, half of it the second stage's 1024 strided partials per
  // column. C = 32 there (196K first-stage threads, under one wave of an
  // H100's) took 5 + 6 us; but on 8192 x 3072 bf16 C = 64 (393K threads,
  // one and a half waves of threads each looping over 64 rows) took 56 + 6
  // us where C = 8 took 29 + 29, while layernorm_f32_fb's weight gradient
  // (16384 x 4096, 1M threads at C = 64) ran 0.025 ms faster at 64 than at
  // 8. So: C = 64 where that leaves at least 2^19 first-stage threads (two
  // waves and more), else 32 or 16 where that leaves one wave (2^17 to 2^18
  // threads), else 8.
  int lowerColumnReduction(Value x, const std::string &name, const std::vector<bool> &reduced,
                           bool keepdim, const TensorSpec &out) {
    static const std::set<std::string> regroupable = {"sum", "mean", "max", "min", "prod"};
    TensorSpec in = specOf(x);
    size_t p = 0;
    while (p < reduced.size() && reduced[p])
      ++p;
    if (!options_.splitColumnReductions || !regroupable.count(name) || p == 0 || p == reduced.size())
      return -1;
    for (size_t d = p; d < reduced.size(); ++d)
      if (reduced[d])
        return -1;
    int64_t rows = 1;
    for (size_t d = 0; d < p; ++d) {
      if (!in.shape[d].isStatic())
        return -1;
      rows *= in.shape[d].value();
    }
    if (rows < 4096 || rows % 8)
      return -1;
    int64_t keptElements = 1;
    for (size_t d = p; d < in.shape.size(); ++d)
      keptElements *= in.shape[d].isStatic() ? in.shape[d].value() : 1024; // symbolic: assume wide
    int64_t chunk = 8;
    if (rows % 64 == 0 && rows / 64 * keptElements >= (int64_t(1) << 19))
      chunk = 64;
    else
      for (int64_t c : {32, 16}) {
        const int64_t threads = rows / c * keptElements;
        if (rows % c == 0 && threads >= (int64_t(1) << 17) && threads <= (int64_t(1) << 18)) {
          chunk = c;
          break;
        }
      }
    // x is computed in the first stage's point function (its index: the
    // row unflattened, then the kept dims) where it is not in memory
    // (fusion recomputes a layer norm's x_hat * dy for its weight gradient),
    // as long as x's rank fits the stage's space (right-aligned indices):
    // at most two leading dims. Else it is materialized first.
    const int64_t stageRank = 2 + int64_t(in.shape.size() - p);
    const bool inlined = stageRank >= in.rank();
    std::vector<int64_t> leading;
    for (size_t d = 0; d < p; ++d)
      leading.push_back(in.shape[d].value());
    Shape kept(in.shape.begin() + long(p), in.shape.end());
    DType acc = in.dtype == DType::F16 || in.dtype == DType::BF16 ? DType::F32 : in.dtype;
    Shape partialShape = {Dim::of(rows / chunk)};
    partialShape.insert(partialShape.end(), kept.begin(), kept.end());
    int partial = newProducedValue({acc, partialShape});
    NestSpec first;
    first.space = {Dim::of(rows / chunk), Dim::of(chunk)};
    first.space.insert(first.space.end(), kept.begin(), kept.end());
    first.reduced.assign(first.space.size(), false);
    first.reduced[1] = true;
    first.reduction = name;
    first.valueDtype = in.dtype;
    int xs = inlined ? -1 : materialize(x);
    const int64_t rank = in.rank();
    emitNestWith(inlined ? std::vector<Value>{x} : std::vector<Value>{}, first, partial,
                 [x, xs, leading, p, stageRank, rank, chunk](Point &pt) {
      OpBuilder &b = pt.n.b;
      Location loc = pt.n.loc;
      auto constant = [&](int64_t c) { return b.create<arith::ConstantIndexOp>(loc, c).getResult(); };
      // row = C c + m, unflattened into the leading dims.
      Value row = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, pt.n.ivs[0], constant(chunk)),
                                          pt.n.ivs[1]);
      SmallVector<Value> index(p);
      for (size_t d = p; d-- > 0;) {
        if (d == 0) {
          index[0] = row;
          break;
        }
        index[d] = b.create<arith::RemSIOp>(loc, row, constant(leading[d]));
        row = b.create<arith::DivSIOp>(loc, row, constant(leading[d]));
      }
      index.append(pt.n.ivs.begin() + 2, pt.n.ivs.end());
      if (xs >= 0)
        return pt.load(xs, index);
      // emit reads x's dims right-aligned against the stage's indices.
      SmallVector<Value> at(size_t(stageRank - rank), constant(0));
      at.append(index.begin(), index.end());
      ArrayRef<Value> stage = pt.n.ivs;
      pt.n.ivs = at;
      Value v = pt.emit(x);
      pt.n.ivs = stage;
      return v;
    }, {}, xs >= 0 ? std::vector<int>{xs} : std::vector<int>{});
    NestSpec second;
    second.space = partialShape;
    second.reduced.assign(second.space.size(), false);
    second.reduced[0] = true;
    second.reduction = name;
    second.valueDtype = acc;
    // keepdim: the result without the reduced dims, viewed as the op's shape.
    int target = newProducedValue(keepdim ? TensorSpec{out.dtype, kept} : out);
    emitNestWith({}, second, target,
                 [partial](Point &pt) { return pt.load(partial, SmallVector<Value>(pt.n.ivs.begin(), pt.n.ivs.end())); },
                 {}, {partial});
    return keepdim ? newValue(out, {Storage::Kind::Alias, target}) : target;
  }

  // Each operand is written into its slice of the result.
  void lowerConcat(Operation *op, const AttrMap &attrs) {
    TensorSpec out = specOf(op->getResult(0));
    int64_t axis = getInt(attrs, "axis");
    if (axis < 0)
      axis += out.rank();
    int v = newProducedValue(out);
    Dim offset = Dim::of(0);
    // Along the leading dims (all before the axis of size 1) each piece is
    // one contiguous run of the result: a piece already stored as it is (an
    // input, a computed value) is a copy step there, not a kernel (a
    // 20k-input concatenation was 20k kernels: minutes of LLVM).
    bool contiguousPieces = true;
    for (int64_t d = 0; d < axis; ++d)
      contiguousPieces = contiguousPieces && out.shape[size_t(d)] == Dim::of(1);
    Dim row = Dim::of(1); // elements per index of the axis
    for (size_t d = size_t(axis) + 1; d < size_t(out.rank()); ++d)
      row = row * out.shape[d];
    for (Value x : op->getOperands()) {
      TensorSpec s = specOf(x);
      auto stored = lazy_.find(x);
      if (contiguousPieces && stored != lazy_.end() && isIdentity(stored->second, s) && s.dtype == out.dtype) {
        Step c;
        c.kind = Step::Kind::Copy;
        c.label = label_;
        c.operands = {v, stored->second.value};
        c.copyOffset = offset * row;
        art_.steps.push_back(c);
        chain_ = Chain{};
      } else {
      NestSpec spec;
      spec.space = s.shape;
      spec.reduced.assign(size_t(s.rank()), false);
      spec.valueDtype = s.dtype;
      spec.outputOffset.assign(size_t(out.rank()), Dim::of(0));
      spec.outputOffset[size_t(axis)] = offset;
      emitNestWith({x}, spec, v, [x](Point &p) { return p.emit(x); });
      }
      // The next piece's offset: this one's plus its length, like terms
      // (the result's dim is their sum: 4, or T + 3*T).
      const Dim &len = s.shape[size_t(axis)];
      if (offset == Dim::of(0)) {
        offset = len;
      } else {
        check(offset.symbols() == len.symbols(),
              "codegen: concat of a piece of " + len.str() + " after " + offset.str());
        Dim next = Dim::of(offset.coefficient() + len.coefficient());
        for (const std::string &symbol : len.symbols())
          next = next * Dim::symbol(symbol);
        offset = next;
      }
    }
    lazy_[op->getResult(0)] = storedIdentity(v);
  }

  // out[i] = x[i - before] inside x, else the pad value.
  void lowerPad(Operation *op, const AttrMap &attrs) {
    Value x = op->getOperand(0);
    materialize(x);
    TensorSpec xs = specOf(x), out = specOf(op->getResult(0));
    const std::vector<int64_t> &pads = getInts(attrs, "pads");
    std::vector<int64_t> before(size_t(xs.rank()), 0);
    for (size_t i = 0; i < pads.size() / 2; ++i)
      before[size_t(xs.rank()) - 1 - i] = pads[2 * i];
    double value = getFloat(attrs, "value");
    NestSpec spec;
    spec.space = out.shape;
    spec.reduced.assign(size_t(out.rank()), false);
    spec.valueDtype = out.dtype;
    int v = newProducedValue(out);
    emitNestWith({x}, spec, v, [=](Point &p) {
      OpBuilder &b = p.n.b;
      Location loc = p.n.loc;
      Value inside = scalarConstant(b, loc, 1, DType::I1);
      SmallVector<Value> at;
      for (int64_t d = 0; d < xs.rank(); ++d) {
        Value i = b.create<arith::SubIOp>(loc, p.n.ivs[size_t(d)],
                                          b.create<arith::ConstantIndexOp>(loc, before[size_t(d)]));
        inside = b.create<arith::AndIOp>(loc, inside, inBounds(p.n, i, xs.shape[size_t(d)]));
        at.push_back(clampIndex(p.n, i, xs.shape[size_t(d)]));
      }
      return b.create<arith::SelectOp>(loc, inside, p.readAt(x, at),
                                       scalarConstant(b, loc, value, out.dtype))
          .getResult();
    });
    lazy_[op->getResult(0)] = storedIdentity(v);
  }

  static Value inBounds(NestContext &n, Value i, const Dim &size) {
    Value zero = n.b.create<arith::ConstantIndexOp>(n.loc, 0);
    Value ge = n.b.create<arith::CmpIOp>(n.loc, arith::CmpIPredicate::sge, i, zero);
    Value lt = n.b.create<arith::CmpIOp>(n.loc, arith::CmpIPredicate::slt, i, n.size(size));
    return n.b.create<arith::AndIOp>(n.loc, ge, lt);
  }
  static Value clampIndex(NestContext &n, Value i, const Dim &size) {
    Value zero = n.b.create<arith::ConstantIndexOp>(n.loc, 0);
    Value last = n.b.create<arith::SubIOp>(n.loc, n.size(size), n.b.create<arith::ConstantIndexOp>(n.loc, 1));
    return n.b.create<arith::MinSIOp>(n.loc, n.b.create<arith::MaxSIOp>(n.loc, i, zero), last);
  }

  // Channels-last convolutions (conv2d's channels_last): their operands'
  // NCHW views, and indices between the two orders.
  static bool channelsLast(const AttrMap &attrs) {
    return attrs.count("channels_last") && getBool(attrs, "channels_last");
  }
  static TensorSpec channelsFirst(TensorSpec t, bool last) {
    if (last)
      t.shape = {t.shape[0], t.shape[3], t.shape[1], t.shape[2]};
    return t;
  }
  // A nest's ivs over a stored output (N, H, W, C) as NCHW (N, C, H, W),
  // the reduction ivs after them as they are.
  static SmallVector<Value> nchwIvs(ArrayRef<Value> ivs, bool last) {
    SmallVector<Value> iv(ivs.begin(), ivs.end());
    if (last)
      std::tie(iv[1], iv[2], iv[3]) = std::make_tuple(ivs[3], ivs[1], ivs[2]);
    return iv;
  }
  // NCHW indices (n, c, h, w) as the stored tensor's.
  static SmallVector<Value> stored(SmallVector<Value> at, bool last) {
    if (last)
      return {at[0], at[2], at[3], at[1]};
    return at;
  }

  // Direct convolution as a reduction nest over (ci, kh, kw):
  // out[n, co, oh, ow] = sum x[n, g*Cig + ci, oh*s - p + kh*d, ...] * w[co, ci, kh, kw] (+ bias[co]).
  void lowerConv2d(Operation *op, const AttrMap &attrs) {
    Value x = op->getOperand(0), w = op->getOperand(1);
    std::optional<Value> bias;
    if (op->getNumOperands() > 2)
      bias = op->getOperand(2);
    materialize(x);
    materialize(w);
    if (bias)
      materialize(*bias);
    // Channels-last operands (x [N, H, W, C], w [O, kH, kW, Cg], y [N, Ho, Wo, O]):
    // xs, ws and out are their NCHW views (sizes), the nest runs over the
    // output as stored.
    const bool last = channelsLast(attrs);
    TensorSpec xs = channelsFirst(specOf(x), last), ws = channelsFirst(specOf(w), last),
               out = channelsFirst(specOf(op->getResult(0)), last);
    std::vector<int64_t> stride = getInts(attrs, "stride"), pad = getInts(attrs, "padding"),
                         dil = getInts(attrs, "dilation");
    int64_t groups = getInt(attrs, "groups");
    const bool library = options_.convolutionLibrary && !bias;
    if (library)
      chain_ = Chain{}; // a convolution step chains with nothing
    if (!library && !last && options_.convAsGemm && groups == 1 && out.shape[1].isStatic() && out.shape[2].isStatic() &&
        out.shape[3].isStatic() && ws.shape[1].isStatic() && ws.shape[2].isStatic() &&
        ws.shape[3].isStatic() && (!bias || specOf(*bias).dtype == out.dtype)) {
      lowerConv2dAsGemm(op, stride, pad, dil);
      return;
    }
    check(out.shape[1].isStatic(), "cpu codegen: conv2d with symbolic channels");
    int64_t coPerGroup = out.shape[1].value() / groups;
    int64_t cig = ws.shape[1].value();
    NestSpec spec;
    spec.space = last ? std::vector<Dim>{out.shape[0], out.shape[2], out.shape[3], out.shape[1], ws.shape[1],
                                         ws.shape[2], ws.shape[3]}
                      : std::vector<Dim>{out.shape[0], out.shape[1], out.shape[2], out.shape[3], ws.shape[1],
                                         ws.shape[2], ws.shape[3]};
    spec.reduced = {false, false, false, false, true, true, true};
    spec.reduction = "sum";
    spec.valueDtype = out.dtype;
    int v = newProducedValue(specOf(op->getResult(0)));
    std::vector<Value> uses = {x, w};
    if (bias)
      uses.push_back(*bias);
    emitNestWith(
        uses, spec, v,
        [=](Point &p) {
          OpBuilder &b = p.n.b;
          Location loc = p.n.loc;
          auto c = [&](int64_t k) { return b.create<arith::ConstantIndexOp>(loc, k).getResult(); };
          SmallVector<Value> iv = nchwIvs(p.n.ivs, last);
          Value g = b.create<arith::DivUIOp>(loc, iv[1], c(coPerGroup));
          Value cin = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, g, c(cig)), iv[4]);
          auto at = [&](Value o, Value k, int dim) {
            Value i = b.create<arith::AddIOp>(
                loc, b.create<arith::SubIOp>(loc, b.create<arith::MulIOp>(loc, o, c(stride[dim])), c(pad[dim])),
                b.create<arith::MulIOp>(loc, k, c(dil[dim])));
            return i;
          };
          Value ih = at(iv[2], iv[5], 0), iw = at(iv[3], iv[6], 1);
          Value inside = b.create<arith::AndIOp>(loc, inBounds(p.n, ih, xs.shape[2]), inBounds(p.n, iw, xs.shape[3]));
          Value xv =
              p.readAt(x, stored({iv[0], cin, clampIndex(p.n, ih, xs.shape[2]), clampIndex(p.n, iw, xs.shape[3])},
                                 last));
          xv = b.create<arith::SelectOp>(loc, inside, xv, scalarConstant(b, loc, 0, xs.dtype));
          Value wv = p.readAt(w, stored({iv[1], iv[4], iv[5], iv[6]}, last));
          return emitScalarOp(b, loc, "mul", {}, {xv, wv}, {xs.dtype, ws.dtype}, out.dtype);
        },
        bias ? std::function<Value(Point &, Value)>([=](Point &p, Value acc) {
          Value bv = p.readAt(*bias, {p.n.ivs[last ? 3 : 1]});
          return emitScalarOp(p.n.b, p.n.loc, "add", {}, {acc, bv}, {out.dtype, specOf(*bias).dtype},
                              out.dtype);
        })
             : std::function<Value(Point &, Value)>());
    lazy_[op->getResult(0)] = storedIdentity(v);
    if (library)
      toConvolutionStep(artifact::ConvolutionStep::Direction::Forward, attrs);
  }

  // The loop step just emitted (a direct convolution nest) becomes a
  // convolution step: cuDNN at run time, the nest's kernel its fallback.
  // Operands read twice (conv2d(x, x)) and f64 stay a loop step.
  void toConvolutionStep(artifact::ConvolutionStep::Direction direction, const AttrMap &attrs) {
    Step &st = art_.steps.back();
    chain_ = Chain{};
    if (st.kind != Step::Kind::Loop || st.operands.size() != 3)
      return;
    const DType dtype = art_.values[size_t(st.operands[0])].dtype;
    if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
      return; // cuDNN has no f64 engines worth a step: the nest it is
    for (int o : st.operands)
      if (art_.values[size_t(o)].dtype != dtype)
        return;
    st.kind = Step::Kind::Convolution;
    st.chainNext = false;
    st.convolution.direction = direction;
    st.convolution.stride = getInts(attrs, "stride");
    st.convolution.padding = getInts(attrs, "padding");
    st.convolution.dilation = getInts(attrs, "dilation");
    st.convolution.groups = getInt(attrs, "groups");
    st.convolution.channelsLast = channelsLast(attrs);
  }

  // conv2d's input and weight gradients as direct reduction nests (a
  // convolution step's fallback with a convolution library):
  //   dx[n, c, h, w] = sum over (o, kh, kw) of dy[n, g*Og + o, i, j] * w[g*Og + o, c % Cg, kh, kw]
  //     where h = i*s - p + kh*d (i integral and in range), g = c / Cg;
  //   dw[o, c, kh, kw] = sum over (n, i, j) of dy[n, o, i, j] * x[n, (o / Og)*Cg + c, i*s - p + kh*d, ...].
  void lowerConv2dGradient(Operation *op, bool input, const AttrMap &attrs) {
    Value dy = op->getOperand(0), other = op->getOperand(1);
    materialize(dy);
    materialize(other);
    const bool last = channelsLast(attrs); // NCHW views of channels-last operands, as in lowerConv2d
    TensorSpec gs = channelsFirst(specOf(dy), last), os = channelsFirst(specOf(other), last),
               out = channelsFirst(specOf(op->getResult(0)), last);
    std::vector<int64_t> stride = getInts(attrs, "stride"), pad = getInts(attrs, "padding"),
                         dil = getInts(attrs, "dilation");
    int64_t groups = getInt(attrs, "groups");
    // Weight [O, Cg, KH, KW] and input [N, C, H, W] whichever is the result.
    const TensorSpec &ws = input ? os : out, &xs = input ? out : os;
    int64_t O = ws.shape[0].value(), Cg = ws.shape[1].value(), Og = O / groups;
    NestSpec spec;
    const TensorSpec stored0 = specOf(op->getResult(0));
    spec.space = {stored0.shape[0], stored0.shape[1], stored0.shape[2], stored0.shape[3]};
    if (input)
      spec.space.insert(spec.space.end(), {Dim::of(Og), ws.shape[2], ws.shape[3]});
    else
      spec.space.insert(spec.space.end(), {gs.shape[0], gs.shape[2], gs.shape[3]});
    spec.reduced = {false, false, false, false, true, true, true};
    spec.reduction = "sum";
    spec.valueDtype = out.dtype;
    if (options_.convolutionLibrary)
      chain_ = Chain{};
    int v = newProducedValue(stored0);
    emitNestWith({dy, other}, spec, v, [=](Point &p) {
      OpBuilder &b = p.n.b;
      Location loc = p.n.loc;
      auto c = [&](int64_t k) { return b.create<arith::ConstantIndexOp>(loc, k).getResult(); };
      SmallVector<Value> iv = nchwIvs(p.n.ivs, last);
      Value zero = scalarConstant(b, loc, 0, out.dtype);
      if (input) {
        Value group = b.create<arith::DivUIOp>(loc, iv[1], c(Cg));
        Value o = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, group, c(Og)), iv[4]);
        Value ci = b.create<arith::RemSIOp>(loc, iv[1], c(Cg));
        // The output index i with i*s = h + p - kh*d, if any.
        Value inside = b.create<arith::ConstantIntOp>(loc, 1, 1);
        SmallVector<Value> at;
        for (int dim = 0; dim < 2; ++dim) {
          Value t = b.create<arith::SubIOp>(loc, b.create<arith::AddIOp>(loc, iv[size_t(2 + dim)], c(pad[dim])),
                                            b.create<arith::MulIOp>(loc, iv[size_t(5 + dim)], c(dil[dim])));
          Value nonNegative = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, t, c(0));
          Value tc = b.create<arith::MaxSIOp>(loc, t, c(0));
          Value divides = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                  b.create<arith::RemSIOp>(loc, tc, c(stride[dim])), c(0));
          Value i = b.create<arith::DivUIOp>(loc, tc, c(stride[dim]));
          inside = b.create<arith::AndIOp>(loc, inside, b.create<arith::AndIOp>(loc, nonNegative, divides));
          inside = b.create<arith::AndIOp>(loc, inside, inBounds(p.n, i, gs.shape[size_t(2 + dim)]));
          at.push_back(clampIndex(p.n, i, gs.shape[size_t(2 + dim)]));
        }
        Value gv = p.readAt(dy, stored({iv[0], o, at[0], at[1]}, last));
        Value wv = p.readAt(other, stored({o, ci, iv[5], iv[6]}, last));
        Value prod = emitScalarOp(b, loc, "mul", {}, {gv, wv}, {gs.dtype, ws.dtype}, out.dtype);
        return b.create<arith::SelectOp>(loc, inside, prod, zero).getResult();
      }
      Value group = b.create<arith::DivUIOp>(loc, iv[0], c(Og));
      Value cin = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, group, c(Cg)), iv[1]);
      auto at = [&](Value o, Value k, int dim) {
        return b.create<arith::AddIOp>(
                    loc, b.create<arith::SubIOp>(loc, b.create<arith::MulIOp>(loc, o, c(stride[dim])), c(pad[dim])),
                    b.create<arith::MulIOp>(loc, k, c(dil[dim])))
            .getResult();
      };
      Value ih = at(iv[5], iv[2], 0), iw = at(iv[6], iv[3], 1);
      Value inside = b.create<arith::AndIOp>(loc, inBounds(p.n, ih, xs.shape[2]), inBounds(p.n, iw, xs.shape[3]));
      Value xv = p.readAt(
          other, stored({iv[4], cin, clampIndex(p.n, ih, xs.shape[2]), clampIndex(p.n, iw, xs.shape[3])}, last));
      Value gv = p.readAt(dy, stored({iv[4], iv[0], iv[5], iv[6]}, last));
      Value prod = emitScalarOp(b, loc, "mul", {}, {gv, xv}, {gs.dtype, xs.dtype}, out.dtype);
      return b.create<arith::SelectOp>(loc, inside, prod, zero).getResult();
    });
    lazy_[op->getResult(0)] = storedIdentity(v);
    if (options_.convolutionLibrary)
      toConvolutionStep(input ? artifact::ConvolutionStep::Direction::BackwardInput
                              : artifact::ConvolutionStep::Direction::BackwardWeight,
                        attrs);
  }

  // max_pool2d's input gradient in the gather form, a reduction nest over
  // the window's taps (kh, kw):
  //   dx[n, c, h, w] = sum of dy[n, c, i, j] where h = i*s - p + kh*d (i
  //   integral, in range; w alike) and tap[n, c, i, j] = kh * KW + kw.
  void lowerMaxPoolBackward(Operation *op, const AttrMap &attrs) {
    Value dy = op->getOperand(0), tap = op->getOperand(1);
    materialize(dy);
    materialize(tap);
    TensorSpec gs = specOf(dy), out = specOf(op->getResult(0));
    std::vector<int64_t> k = getInts(attrs, "kernel_size"), stride = poolStride(attrs),
                         pad = getInts(attrs, "padding"), dil = getInts(attrs, "dilation");
    NestSpec spec;
    spec.space = {out.shape[0], out.shape[1], out.shape[2], out.shape[3], Dim::of(k[0]), Dim::of(k[1])};
    spec.reduced = {false, false, false, false, true, true};
    spec.reduction = "sum";
    spec.valueDtype = out.dtype;
    int v = newProducedValue(out);
    emitNestWith({dy, tap}, spec, v, [=](Point &p) {
      OpBuilder &b = p.n.b;
      Location loc = p.n.loc;
      auto c = [&](int64_t i) { return b.create<arith::ConstantIndexOp>(loc, i).getResult(); };
      ArrayRef<Value> iv = p.n.ivs;
      Value inside = b.create<arith::ConstantIntOp>(loc, 1, 1);
      SmallVector<Value> at;
      for (int dim = 0; dim < 2; ++dim) {
        Value t = b.create<arith::SubIOp>(loc, b.create<arith::AddIOp>(loc, iv[size_t(2 + dim)], c(pad[dim])),
                                          b.create<arith::MulIOp>(loc, iv[size_t(4 + dim)], c(dil[dim])));
        Value nonNegative = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, t, c(0));
        Value tc = b.create<arith::MaxSIOp>(loc, t, c(0));
        Value divides = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                                b.create<arith::RemSIOp>(loc, tc, c(stride[dim])), c(0));
        Value i = b.create<arith::DivUIOp>(loc, tc, c(stride[dim]));
        inside = b.create<arith::AndIOp>(loc, inside, b.create<arith::AndIOp>(loc, nonNegative, divides));
        inside = b.create<arith::AndIOp>(loc, inside, inBounds(p.n, i, gs.shape[size_t(2 + dim)]));
        at.push_back(clampIndex(p.n, i, gs.shape[size_t(2 + dim)]));
      }
      Value won = p.readAt(tap, {iv[0], iv[1], at[0], at[1]});
      Value mine = b.create<arith::IndexCastOp>(
          loc, won.getType(), b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, iv[4], c(k[1])), iv[5]));
      inside = b.create<arith::AndIOp>(loc, inside,
                                       b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, won, mine));
      Value gv = p.readAt(dy, {iv[0], iv[1], at[0], at[1]});
      Value value = emitScalarOp(b, loc, "cast", {}, {gv}, {gs.dtype}, out.dtype);
      return b.create<arith::SelectOp>(loc, inside, value, scalarConstant(b, loc, 0, out.dtype)).getResult();
    });
    lazy_[op->getResult(0)] = storedIdentity(v);
  }

  // conv2d as im2col + GEMM (backends with a GEMM library that takes
  // epilogues): cols[n, oh, ow, (c, kh, kw)] gathers the receptive fields
  // (zeros in the padding), the GEMM cols @ w^T gives [n*oh*ow, oc] with the
  // bias added in its epilogue, and the result is that product read as
  // NCHW through a permuted view (no copy unless a consumer needs one).
  void lowerConv2dAsGemm(Operation *op, const std::vector<int64_t> &stride, const std::vector<int64_t> &pad,
                         const std::vector<int64_t> &dil) {
    Value x = op->getOperand(0), w = op->getOperand(1);
    std::optional<Value> bias;
    if (op->getNumOperands() > 2)
      bias = op->getOperand(2);
    TensorSpec xs = specOf(x), ws = specOf(w), out = specOf(op->getResult(0));
    const Dim &N = out.shape[0], &OC = out.shape[1], &OH = out.shape[2], &OW = out.shape[3];
    const Dim &C = ws.shape[1], &KH = ws.shape[2], &KW = ws.shape[3];
    int colsValue = newProducedValue({xs.dtype, {N, OH, OW, C, KH, KW}});
    NestSpec spec;
    spec.space = {N, OH, OW, C, KH, KW};
    spec.reduced.assign(6, false);
    spec.valueDtype = xs.dtype;
    emitNestWith({x}, spec, colsValue, [=](Point &p) {
      OpBuilder &b = p.n.b;
      Location loc = p.n.loc;
      auto c = [&](int64_t k) { return b.create<arith::ConstantIndexOp>(loc, k).getResult(); };
      ArrayRef<Value> iv = p.n.ivs;
      auto at = [&](Value o, Value k, int dim) {
        return b.create<arith::AddIOp>(
            loc, b.create<arith::SubIOp>(loc, b.create<arith::MulIOp>(loc, o, c(stride[dim])), c(pad[dim])),
            b.create<arith::MulIOp>(loc, k, c(dil[dim]))).getResult();
      };
      Value ih = at(iv[1], iv[4], 0), iw = at(iv[2], iv[5], 1);
      Value inside = b.create<arith::AndIOp>(loc, inBounds(p.n, ih, xs.shape[2]), inBounds(p.n, iw, xs.shape[3]));
      Value xv = p.readAt(x, {iv[0], iv[3], clampIndex(p.n, ih, xs.shape[2]), clampIndex(p.n, iw, xs.shape[3])});
      return b.create<arith::SelectOp>(loc, inside, xv, scalarConstant(b, loc, 0, xs.dtype)).getResult();
    });
    Dim rows = N * OH * OW, depth = C * KH * KW;
    int cols = newValue({xs.dtype, {rows, depth}}, {Storage::Kind::Alias, colsValue});
    int weights = newValue({ws.dtype, {OC, depth}}, {Storage::Kind::Alias, materialize(w)});
    int product = newProducedValue({out.dtype, {rows, OC}});
    Step s;
    s.kind = Step::Kind::Matmul;
    s.label = label_;
    s.operands = {product, cols, weights};
    s.transposeB = true; // the stored [oc, depth] is the GEMM's [depth, oc] transposed
    if (bias) {
      s.operands.push_back(materialize(*bias));
      s.epilogue.bias = true;
    }
    art_.steps.push_back(s);
    chain_ = Chain{};
    int nhwc = newValue({out.dtype, {N, OH, OW, OC}}, {Storage::Kind::Alias, product});
    Lazy l;
    l.stored = true;
    l.value = nhwc;
    l.terms = {{0, 1, 0}, {2, 1, 0}, {3, 1, 0}, {1, 1, 0}};
    lazy_[op->getResult(0)] = l;
  }

  // Pooling as a reduction nest over the window; padding never counts for
  // max, and for avg only in PyTorch's divisor (count_include_pad).
  void lowerPool(Operation *op, const std::string &name, const AttrMap &attrs) {
    Value x = op->getOperand(0);
    materialize(x);
    TensorSpec xs = specOf(x), out = specOf(op->getResult(0));
    // max_pool2d_taps: the window's argmax (its tap, row-major over the window).
    bool taps = name == "max_pool2d_taps", isMax = name == "max_pool2d" || taps;
    std::vector<int64_t> k = getInts(attrs, "kernel_size"), stride = poolStride(attrs),
                         pad = getInts(attrs, "padding");
    std::vector<int64_t> dil = isMax ? getInts(attrs, "dilation") : std::vector<int64_t>{1, 1};
    bool includePad = !isMax && getBool(attrs, "count_include_pad");
    check(xs.shape[2].isStatic() && xs.shape[3].isStatic(), "cpu codegen: pooling over symbolic sizes");
    int64_t H = xs.shape[2].value(), W = xs.shape[3].value();
    NestSpec spec;
    spec.space = {out.shape[0], out.shape[1], out.shape[2], out.shape[3], Dim::of(k[0]), Dim::of(k[1])};
    spec.reduced = {false, false, false, false, true, true};
    spec.reduction = taps ? "argmax" : isMax ? "max" : "sum";
    spec.valueDtype = xs.dtype;
    int v = newProducedValue(out);
    auto origin = [=](NestContext &n, int dim) {
      OpBuilder &b = n.b;
      return b.create<arith::SubIOp>(
                  n.loc, b.create<arith::MulIOp>(n.loc, n.ivs[size_t(2 + dim)],
                                                 b.create<arith::ConstantIndexOp>(n.loc, stride[dim])),
                  b.create<arith::ConstantIndexOp>(n.loc, pad[dim]))
          .getResult();
    };
    emitNestWith(
        {x}, spec, v,
        [=](Point &p) {
          OpBuilder &b = p.n.b;
          Location loc = p.n.loc;
          auto c = [&](int64_t i) { return b.create<arith::ConstantIndexOp>(loc, i).getResult(); };
          Value ih = b.create<arith::AddIOp>(loc, origin(p.n, 0), b.create<arith::MulIOp>(loc, p.n.ivs[4], c(dil[0])));
          Value iw = b.create<arith::AddIOp>(loc, origin(p.n, 1), b.create<arith::MulIOp>(loc, p.n.ivs[5], c(dil[1])));
          Value inside = b.create<arith::AndIOp>(loc, inBounds(p.n, ih, xs.shape[2]), inBounds(p.n, iw, xs.shape[3]));
          Value xv = p.readAt(x, {p.n.ivs[0], p.n.ivs[1], clampIndex(p.n, ih, xs.shape[2]),
                                  clampIndex(p.n, iw, xs.shape[3])});
          Value skip = scalarConstant(b, loc, isMax ? -INFINITY : 0.0, xs.dtype);
          return b.create<arith::SelectOp>(loc, inside, xv, skip).getResult();
        },
        isMax ? std::function<Value(Point &, Value)>()
              : std::function<Value(Point &, Value)>([=](Point &p, Value acc) {
                  OpBuilder &b = p.n.b;
                  Location loc = p.n.loc;
                  auto c = [&](int64_t i) { return b.create<arith::ConstantIndexOp>(loc, i).getResult(); };
                  Value count = c(1);
                  for (int dim = 0; dim < 2; ++dim) {
                    Value o = origin(p.n, dim);
                    int64_t size = dim == 0 ? H : W;
                    Value end = b.create<arith::MinSIOp>(loc, b.create<arith::AddIOp>(loc, o, c(k[dim])),
                                                         c(includePad ? size + pad[dim] : size));
                    Value start = includePad ? o : b.create<arith::MaxSIOp>(loc, o, c(0)).getResult();
                    Value len = b.create<arith::MaxSIOp>(loc, b.create<arith::SubIOp>(loc, end, start), c(0));
                    count = b.create<arith::MulIOp>(loc, count, len);
                  }
                  Value n = b.create<arith::IndexCastOp>(loc, b.getI64Type(), count);
                  Value nf = b.create<arith::SIToFPOp>(loc, acc.getType(), n);
                  return b.create<arith::DivFOp>(loc, acc, nf).getResult();
                }));
    lazy_[op->getResult(0)] = storedIdentity(v);
  }

  // A collective in its flat form (compiler/transforms/Decompose.cpp): one
  // step on contiguous operands that the runtime's communicator runs.
  void lowerCollective(Operation *op, const std::string &name, const AttrMap &attrs) {
    using artifact::CollectiveStep;
    using Op = CollectiveStep::Op;
    for (const char *key : {"axis", "split_axis", "concat_axis"})
      check(!hasAttr(attrs, key) || getInt(attrs, key) == 0,
            "codegen: collective '" + name + "' along an axis other than 0 (the pipeline lowers them)");
    auto module = op->getParentOfType<ModuleOp>();
    std::optional<tc::MeshOp> meshOp;
    for (tc::MeshOp m : module.getOps<tc::MeshOp>())
      if (m.getSymName() == getEnum(attrs, "mesh"))
        meshOp = m;
    check(meshOp.has_value(), "codegen: collective '" + name + "' names an undeclared mesh");
    Step s;
    s.kind = Step::Kind::Collective;
    s.label = label_;
    CollectiveStep &c = s.collective;
    c.op = name == "all_reduce"       ? Op::AllReduce
           : name == "all_gather"     ? Op::AllGather
           : name == "reduce_scatter" ? Op::ReduceScatter
           : name == "all_to_all"     ? Op::AllToAll
           : name == "all_slice"      ? Op::AllSlice
           : name == "axis_index"     ? Op::AxisIndex
                                      : Op::Broadcast;
    if (hasAttr(attrs, "reduction")) {
      const std::string &r = getEnum(attrs, "reduction");
      using R = CollectiveStep::Reduction;
      c.reduction = r == "sum" ? R::Sum : r == "mean" ? R::Mean : r == "max" ? R::Max : R::Min;
    }
    c.mesh = getEnum(attrs, "mesh");
    for (StringRef axis : meshOp->getAxes().getAsValueRange<StringAttr>())
      c.meshAxes.push_back(axis.str());
    c.meshSizes.assign(meshOp->getSizes().begin(), meshOp->getSizes().end());
    c.axes = getStrings(attrs, "axes");
    if (hasAttr(attrs, "root"))
      c.root = getInt(attrs, "root");
    std::vector<int> inputs;
    if (op->getNumOperands() > 0)
      inputs.push_back(materialize(op->getOperand(0)));
    int out = newProducedValue(specOf(op->getResult(0)));
    s.operands = {out};
    s.operands.insert(s.operands.end(), inputs.begin(), inputs.end());
    art_.steps.push_back(s);
    chain_ = Chain{};
    lazy_[op->getResult(0)] = storedIdentity(out);
  }

  // embedding_backward: a scatter-add step the runtime runs (a loop nest
  // cannot write at computed indices) on contiguous grad and indices.
  void lowerScatterAdd(Operation *op, const AttrMap &attrs) {
    Step s;
    s.kind = Step::Kind::ScatterAdd;
    s.label = label_;
    if (hasAttr(attrs, "padding_idx"))
      s.skipIndex = getInt(attrs, "padding_idx");
    int grad = materialize(op->getOperand(0)), indices = materialize(op->getOperand(1));
    int out = newProducedValue(specOf(op->getResult(0)));
    s.operands = {out, grad, indices};
    art_.steps.push_back(s);
    chain_ = Chain{};
    lazy_[op->getResult(0)] = storedIdentity(out);
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
    if (options_.integerMatmulAsNest && !isFloat(specOf(op->getResult(0)).dtype)) {
      lowerMatmulAsNest(op);
      return;
    }
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
    chain_ = Chain{};
    lazy_[op->getResult(0)] = storedIdentity(out);
    if (options_.matmulEpilogues)
      matmulProducts_[out] = {art_.steps.size() - 1, op->getResult(0)};
  }

  // Attention the pipeline kept whole (ir/core/FusedAttention.h): one
  // attention step on contiguous operands; the backward's lse and delta
  // are f32 scratch buffers of q's shape without its last dim.
  void lowerAttention(Operation *op, bool backward, const AttrMap &attrs) {
    // Operands by schema position (absent optional ones nullopt): the
    // forward's q, k, v, mask, seed; the backward's grad, q, k, v, mask,
    // out, lse, seed.
    std::vector<std::optional<Value>> operand = tc::schemaOperands(
        op, *findOpSchema(opName(op)));
    std::vector<std::optional<TensorSpec>> args;
    for (const std::optional<Value> &v : operand)
      args.push_back(v ? std::optional<TensorSpec>(specOf(*v)) : std::nullopt);
    std::string refusal = fusedAttentionRefusal(args, backward);
    check(refusal.empty(), "codegen: attention here must be decomposed (" + refusal + ")");
    check(bool(emitAttention_), "codegen: this backend has no fused attention; decompose it");
    size_t first = backward ? 1 : 0;
    const TensorSpec &q = *args[first];
    int64_t headDim = q.shape.back().value();
    artifact::AttentionStep at;
    at.backward = backward;
    at.causal = getBool(attrs, "is_causal");
    at.scale = hasAttr(attrs, "scale") ? getFloat(attrs, "scale") : 1.0 / std::sqrt(double(headDim));
    at.paddedHeadDim = int(fusedAttentionPaddedHeadDim(headDim));
    std::vector<int> in;
    for (unsigned i = 0; i < first + 3; ++i)
      in.push_back(materialize(op->getOperand(i)));
    // A user mask: the step's last operand.
    std::optional<int> mask;
    if (operand[first + 3]) {
      mask = materialize(*operand[first + 3]);
      at.mask = args[first + 3]->dtype == DType::I1 ? artifact::AttentionStep::Mask::Bool
                                                     : artifact::AttentionStep::Mask::Additive;
    }
    // Dropout on the probabilities: its seed, the step's last operand.
    const size_t seedAt = backward ? 7 : 4;
    std::optional<int> seed;
    if (operand.size() > seedAt && operand[seedAt]) {
      seed = materialize(*operand[seedAt]);
      at.dropoutP = getFloat(attrs, "dropout_p");
      at.dropoutStream = uint32_t(getInt(attrs, "dropout_stream"));
    }
    Step s;
    s.kind = Step::Kind::Attention;
    s.label = label_;
    s.attention = at;
    s.symbol = emitAttention_(q.dtype, specOf(op->getResult(0)).dtype, at.paddedHeadDim, at.causal, at.mask,
                              at.dropout());
    std::vector<int> results;
    for (Value r : op->getResults()) {
      int v = newProducedValue(specOf(r));
      results.push_back(v);
      lazy_[r] = storedIdentity(v);
    }
    // scaled_dot_product_attention_with_lse: the output, then the
    // log-sum-exp the step writes (saveLse's operand layout).
    s.operands = results;
    if (!backward && results.size() == 2)
      s.attention.saveLse = true;
    TensorSpec rows{DType::F32, Shape(q.shape.begin(), q.shape.end() - 1)};
    // A backward given the forward's output and log-sum-exp (operands 5
    // and 6: saved by an earlier program) reads them: no recomputation.
    if (backward && operand.size() >= 7 && operand[5] && operand[6]) {
      int lse = materialize(*operand[6]), out = materialize(*operand[5]);
      s.operands.push_back(lse);
      s.operands.push_back(newProducedValue(rows)); // delta
      s.operands.insert(s.operands.end(), in.begin(), in.end());
      s.attention.savedForward = true;
      s.operands.push_back(out);
      if (mask)
        s.operands.push_back(*mask);
      if (seed)
        s.operands.push_back(*seed);
      art_.steps.push_back(s);
      chain_ = Chain{};
      return;
    }
    if (backward) {
      // The forward of the same q, k, v in this program keeps its output
      // and writes its log-sum-exp for us: no recomputation (FlashAttention-2's
      // saved O and LSE).
      // (The same symbol: the same dtype, head dim, causality, mask kind
      // and dropout; with dropout, the same probability, stream and seed.)
      // Not for f32 gradients of 16-bit operands: that backward recomputes
      // the forward (the saved output would be f32).
      const bool wide = specOf(op->getResult(0)).dtype != q.dtype;
      std::vector<int> read(in.begin() + 1, in.end()); // q, k, v[, mask][, seed]
      if (mask)
        read.push_back(*mask);
      if (seed)
        read.push_back(*seed);
      Step *forward = nullptr;
      for (Step &f : art_.steps)
        if (!wide && f.kind == Step::Kind::Attention && !f.attention.backward && f.attention.scale == at.scale &&
            f.attention.dropoutP == at.dropoutP && f.attention.dropoutStream == at.dropoutStream &&
            f.symbol == s.symbol && f.operands.size() >= read.size() &&
            std::equal(read.begin(), read.end(), f.operands.end() - std::ptrdiff_t(read.size())))
          forward = &f;
      if (forward && !forward->attention.saveLse) {
        forward->attention.saveLse = true;
        forward->operands.insert(forward->operands.begin() + 1, newProducedValue(rows));
      }
      s.operands.push_back(forward ? forward->operands[1] : newProducedValue(rows)); // lse
      s.operands.push_back(newProducedValue(rows));                                  // delta
      s.operands.insert(s.operands.end(), in.begin(), in.end());
      if (forward) {
        s.attention.savedForward = true;
        s.operands.push_back(forward->operands[0]); // its output
      }
    } else {
      s.operands.insert(s.operands.end(), in.begin(), in.end());
    }
    if (mask)
      s.operands.push_back(*mask);
    if (seed)
      s.operands.push_back(*seed);
    art_.steps.push_back(s);
    chain_ = Chain{};
  }

  // Integer matmul as a reduction nest over k (the GEMM library has no
  // integer GEMM): space = the output's dims + k, torch.matmul's shapes
  // (1-D operands, broadcast batch dims), wrapping at the dtype's width.
  void lowerMatmulAsNest(Operation *op) {
    Value x = op->getOperand(0), y = op->getOperand(1);
    TensorSpec as = specOf(x), bs = specOf(y), out = specOf(op->getResult(0));
    materialize(x);
    materialize(y);
    Dim K = as.shape.back();
    NestSpec spec;
    spec.space = out.shape;
    spec.space.push_back(K);
    spec.reduced.assign(spec.space.size(), false);
    spec.reduced.back() = true;
    spec.reduction = "sum";
    spec.valueDtype = out.dtype;
    int v = newProducedValue(out);
    int64_t R = int64_t(out.shape.size());
    bool aVector = as.rank() == 1, bVector = bs.rank() == 1;
    // Output dims: batch..., m (unless a is 1-D), n (unless b is 1-D).
    int64_t batch = R - (aVector ? 0 : 1) - (bVector ? 0 : 1);
    emitNestWith({x, y}, spec, v, [=](Point &p) {
      OpBuilder &b = p.n.b;
      Location loc = p.n.loc;
      ArrayRef<Value> iv = p.n.ivs;
      Value k = iv[size_t(R)];
      Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
      // Batch dims right-aligned with the output's; size 1 broadcasts.
      auto batchIndices = [&](const TensorSpec &s, SmallVector<Value> &idx) {
        int64_t own = s.rank() - 2;
        for (int64_t j = 0; j < own; ++j) {
          int64_t d = batch - own + j;
          idx.push_back(s.shape[size_t(j)] == Dim::of(1) && out.shape[size_t(d)] != Dim::of(1) ? zero
                                                                                               : iv[size_t(d)]);
        }
      };
      SmallVector<Value> ai, bi;
      if (aVector) {
        ai.push_back(k);
      } else {
        batchIndices(as, ai);
        ai.push_back(iv[size_t(batch)]);
        ai.push_back(k);
      }
      if (bVector) {
        bi.push_back(k);
      } else {
        batchIndices(bs, bi);
        bi.push_back(k);
        bi.push_back(iv[size_t(R - 1)]);
      }
      Value av = p.readAt(x, ai), bv = p.readAt(y, bi);
      return emitScalarOp(b, loc, "mul", {}, {av, bv}, {as.dtype, bs.dtype}, out.dtype);
    });
    lazy_[op->getResult(0)] = storedIdentity(v);
  }

  // The column sums of dy [..., N] (a linear layer's bias gradient: the
  // sum over every axis but the last) as the epilogue of an earlier GEMM
  // that reads dy, or its flattening [M, N], over the same M as its right
  // operand (the weight gradient x^T @ dy) or transposed as its left one
  // (dy^T @ x, PyTorch's [out, in] weight layout): cuBLASLt reduces that
  // operand over the GEMM's k while it multiplies (the bias-gradient
  // epilogue, operand 3 written). Returns the value holding the sums, or -1.
  int biasGradientEpilogue(Value dy, const TensorSpec &out) {
    if (!options_.matmulEpilogues || !options_.biasGradientEpilogues)
      return -1;
    const Lazy &l = lazy_.at(dy);
    TensorSpec ds = specOf(dy);
    if (!isIdentity(l, ds) || !isFloat(ds.dtype) || out.dtype != ds.dtype || ds.rank() < 2)
      return -1;
    Dim rows = ds.shape[0];
    for (int64_t d = 1; d + 1 < ds.rank(); ++d)
      rows = rows * ds.shape[size_t(d)];
    const int dyStorage = artifact::storageValue(art_, l.value);
    for (size_t si = art_.steps.size(); si-- > 0;) {
      Step &st = art_.steps[si];
      // Both ways the GEMM is a^T @ b with a and b stored [M, ...].
      if (st.kind != Step::Kind::Matmul || st.operands.size() != 3 || !st.epilogue.empty() || st.transposeB ||
          !st.transposeA)
        continue;
      bool ofB = artifact::storageValue(art_, st.operands[2]) == dyStorage;
      if (!ofB && artifact::storageValue(art_, st.operands[1]) != dyStorage)
        continue;
      const artifact::ValueDecl &summed = art_.values[size_t(st.operands[ofB ? 2 : 1])];
      const artifact::ValueDecl &other = art_.values[size_t(st.operands[ofB ? 1 : 2])];
      if (other.shape.size() != 2 || other.shape[0] != rows || other.dtype != ds.dtype ||
          summed.shape.size() != 2 || summed.shape[0] != rows || summed.shape[1] != ds.shape.back())
        continue;
      int v = newProducedValue(out);
      st.epilogue.biasGradient = true;
      st.epilogue.biasGradientOfA = !ofB;
      st.operands.push_back(v);
      return v;
    }
    return -1;
  }

  // Whether `v`'s only reader is `user` (looking through fused kernels'
  // block arguments).
  static bool onlyUsedBy(Value v, Operation *user) {
    for (OpOperand &use : v.getUses()) {
      Operation *o = use.getOwner();
      if (o == user)
        continue;
      auto fused = dyn_cast<tc::FusedOp>(o);
      if (!fused)
        return false;
      unsigned k = use.getOperandNumber();
      if (k >= fused.getBody().front().getNumArguments() ||
          !onlyUsedBy(fused.getBody().front().getArgument(k), user))
        return false;
    }
    return true;
  }

  // Makes `v` the product of an earlier matmul step with an epilogue, when
  // v = act(mm + bias) / act(mm) / mm + bias (act: relu or gelu(tanh); bias
  // a vector along the last dim) and nothing else reads mm. Returns the
  // stored value, or -1.
  int matmulEpilogue(Value v) {
    if (!options_.matmulEpilogues)
      return -1;
    const Lazy &lv = lazy_.at(v);
    if (lv.stored || !lv.op)
      return -1;
    Operation *op = lv.op;
    TensorSpec vs = specOf(v);
    using Activation = artifact::MatmulEpilogue::Activation;
    Activation act = Activation::None;
    Operation *add = op;
    std::string n = opName(op);
    if (n == "relu" || n == "gelu") {
      if (n == "gelu") {
        const OpSchema *schema = tc::schemaOf(op);
        AttrMap attrs = completeAttrs(*schema, tc::coreAttrs(op, *schema));
        if (getEnum(attrs, "approximate") != "tanh")
          return -1;
        act = Activation::GeluTanh;
      } else {
        act = Activation::Relu;
      }
      add = nullptr;
      Value x = op->getOperand(0);
      const Lazy &lx = lazy_.at(x);
      if (!lx.stored && lx.op && opName(lx.op) == "add" && onlyUsedBy(x, op))
        add = lx.op;
      else if (!lx.stored || !isIdentity(lx, specOf(x)))
        return -1;
      if (!add) { // act(mm)
        auto it = matmulProducts_.find(lx.value);
        if (it == matmulProducts_.end() || !onlyUsedBy(it->second.second, op) || specOf(x).shape != vs.shape ||
            specOf(x).dtype != vs.dtype)
          return -1;
        return retargetMatmul(it, v, {act, false, false}, -1);
      }
    } else if (n != "add") {
      return -1;
    }
    for (unsigned k = 0; k < 2; ++k) {
      Value mm = add->getOperand(k), bias = add->getOperand(1 - k);
      const Lazy &lm = lazy_.at(mm);
      if (!lm.stored || !isIdentity(lm, specOf(mm)))
        continue;
      auto it = matmulProducts_.find(lm.value);
      if (it == matmulProducts_.end() || !onlyUsedBy(it->second.second, add))
        continue;
      TensorSpec ms = specOf(mm), bs = specOf(bias);
      if (ms.shape != vs.shape || ms.dtype != vs.dtype || bs.dtype != vs.dtype || bs.rank() != 1 ||
          ms.rank() < 2 || bs.shape[0] != ms.shape.back())
        continue;
      // The bias may need computing (autocast's cast of an f32 bias to
      // bf16): that nest is emitted now, after the matmul step, which then
      // moves after it: the library call reads the bias it computes.
      size_t before = art_.steps.size();
      int stored = materialize(bias);
      if (art_.steps.size() > before)
        it->second.first = moveStepToEnd(it->second.first);
      return retargetMatmul(it, v, {act, true, false}, stored);
    }
    return -1;
  }

  // Moves step `si` after every other step (what it reads is computed
  // before it and nothing after it reads what it writes: the caller's
  // word); the per-step bookkeeping follows. Returns its new index. The
  // arena is planned from the final order (finalize).
  size_t moveStepToEnd(size_t si) {
    size_t last = art_.steps.size() - 1;
    if (si == last)
      return si;
    check(!art_.steps[si].chainNext && (si == 0 || !art_.steps[si - 1].chainNext),
          "codegen: a chained step cannot move");
    auto shifted = [&](size_t k) { return k == si ? last : k > si ? k - 1 : k; };
    std::rotate(art_.steps.begin() + std::ptrdiff_t(si), art_.steps.begin() + std::ptrdiff_t(si) + 1,
                art_.steps.end());
    if (notes_.readAtRowOnly.size() > si) {
      notes_.readAtRowOnly.resize(std::max(notes_.readAtRowOnly.size(), last + 1));
      std::rotate(notes_.readAtRowOnly.begin() + std::ptrdiff_t(si),
                  notes_.readAtRowOnly.begin() + std::ptrdiff_t(si) + 1, notes_.readAtRowOnly.begin() +
                  std::ptrdiff_t(last) + 1);
    }
    std::map<size_t, std::vector<int>> candidates;
    for (auto &[k, vs] : inPlaceCandidates_)
      candidates[shifted(k)] = std::move(vs);
    inPlaceCandidates_ = std::move(candidates);
    for (auto &[value, product] : matmulProducts_)
      product.first = shifted(product.first);
    return last;
  }

  int retargetMatmul(std::map<int, std::pair<size_t, Value>>::iterator product, Value v,
                     const artifact::MatmulEpilogue &epilogue, int bias) {
    int old = product->first;
    Step &st = art_.steps[product->second.first];
    // Nothing may have read the product since (it has no other reader).
    for (size_t si = product->second.first + 1; si < art_.steps.size(); ++si)
      for (int o : art_.steps[si].operands)
        check(o != old, "codegen: matmul product read before its epilogue");
    // The step now stores v (same shape and dtype) where the product was.
    if (bias >= 0)
      st.operands.push_back(bias);
    st.epilogue = epilogue;
    matmulProducts_.erase(product);
    lazy_[v] = storedIdentity(old);
    return old;
  }

  // Makes `v` a contiguous stored value (a loop nest if it is not one yet).
  int materialize(Value v) {
    // A kernel's input is materialized as the value outside, once: the
    // forward and backward attention reading the same head-split q get one
    // copy (and the backward can reuse the forward's saved results).
    if (auto it = outerOf_.find(v); it != outerOf_.end()) {
      int out = materialize(it->second);
      lazy_[v] = lazy_.at(it->second);
      return out;
    }
    const Lazy &l = lazy_.at(v);
    TensorSpec s = specOf(v);
    if (isIdentity(l, s))
      return l.value;
    if (int fused = matmulEpilogue(v); fused >= 0)
      return fused;
    int out = newProducedValue(s);
    emitNest(v, s.shape, std::vector<bool>(size_t(s.rank()), false), "", false, out);
    lazy_[v] = storedIdentity(out);
    return out;
  }

  // ------------------------------------------------------------- nests

  // How many leading dims of a nest's space run as one row dim: its
  // leading parallel dims (all but the last of an elementwise nest), when
  // there are at least two, all but the first static, and the output's
  // leading dims are those dims (not a concat's slice); 1 otherwise.
  static size_t collapsibleRowDims(const NestSpec &s) {
    if (!s.outputOffset.empty() || s.space.size() < 3 || s.operands.empty())
      return 1;
    size_t k = 0;
    while (k < s.space.size() && !s.reduced[k])
      ++k;
    if (k == s.space.size())
      --k;
    if (k < 2)
      return 1;
    const Shape &out = s.operands[0].shape;
    if (out.size() < k)
      return 1;
    for (size_t j = 0; j < k; ++j)
      if ((j > 0 && !s.space[j].isStatic()) || out[j] != s.space[j])
        return 1;
    return k;
  }

  static void collapseRowDims(NestSpec &s, size_t k) {
    auto collapse = [k](const Shape &shape) {
      Dim rows = shape[0];
      for (size_t j = 1; j < k; ++j)
        rows = rows * shape[j];
      Shape r = {rows};
      r.insert(r.end(), shape.begin() + long(k), shape.end());
      return r;
    };
    s.space = collapse(s.space);
    s.reduced.erase(s.reduced.begin() + 1, s.reduced.begin() + long(k));
    s.operands[0].shape = collapse(s.operands[0].shape);
  }

  // The original indices of a nest whose leading `k` dims run as one
  // (collapseRowDims): the row index unflattened, then the rest. Kept
  // alive with the program builder (the nest context refers to them).
  ArrayRef<Value> collapsedIndices(NestContext &n, const Shape &space, size_t k) {
    OpBuilder &b = n.b;
    SmallVector<Value> &ivs = *collapsedIvs_.emplace_back(std::make_unique<SmallVector<Value>>(k));
    Value row = n.ivs[0];
    for (size_t j = k; j-- > 1;) {
      Value extent = b.create<arith::ConstantIndexOp>(n.loc, space[j].value());
      ivs[j] = b.create<arith::RemSIOp>(n.loc, row, extent);
      row = b.create<arith::DivSIOp>(n.loc, row, extent);
    }
    ivs[0] = row;
    ivs.append(n.ivs.begin() + 1, n.ivs.end());
    return ivs;
  }

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
    if (opName(l.op) == "dropout") {
      int stream = dropoutStreamValue(l.op);
      if (std::find(leaves.begin(), leaves.end(), stream) == leaves.end())
        leaves.push_back(stream);
    }
  }

  // What a nest's point function can use besides the loop indices.
  struct Point {
    NestContext &n;
    std::function<Value(Value)> emit;                    // a tc value here (right-aligned)
    std::function<Value(Value, ArrayRef<Value>)> readAt; // a stored tc value at view indices
    std::function<Value(int, ArrayRef<Value>)> load;      // an artifact value (an extra operand)
  };
  using PointBody = std::function<Value(Point &)>;

  // The nest computing `point` (a tc value) over `space`.
  void emitNest(Value point, const Shape &space, const std::vector<bool> &reduced,
                const std::string &reduction, bool keepdim, int out) {
    NestSpec spec;
    spec.space = space;
    spec.reduced = reduced;
    spec.reduction = reduction;
    spec.keepdim = keepdim;
    spec.valueDtype = specOf(point).dtype;
    emitNestWith({point}, spec, out, [point](Point &p) { return p.emit(point); });
  }

  // A nest whose point function is `body`; `uses` are the tc values it
  // reads (through emit or readAt).
  void emitNestWith(const std::vector<Value> &uses, NestSpec spec, int out, const PointBody &body,
                    std::function<Value(Point &, Value)> epilogue = {},
                    const std::vector<int> &extraValues = {}) {
    std::vector<int> leaves;
    llvm::DenseSet<Value> seen;
    for (Value u : uses)
      collectLeaves(u, leaves, seen);
    for (int v : extraValues)
      if (std::find(leaves.begin(), leaves.end(), v) == leaves.end())
        leaves.push_back(v);
    spec.symbol = prefix_ + std::to_string(art_.steps.size());
    spec.symbols = symbolNames_;
    std::vector<int> operands = {out};
    operands.insert(operands.end(), leaves.begin(), leaves.end());
    for (int o : operands)
      spec.operands.push_back({art_.values[o].dtype, art_.values[o].shape});
    const Shape space = spec.space;
    int64_t R = int64_t(space.size());
    // Leading parallel dims run as one: the rows of a [batch, sequence,
    // features] layer norm are batch * sequence rows, as for a 2-D one, so
    // its passes chain (one row per block) instead of running as kernels
    // over `batch` rows each. The point function gets the original indices
    // back (collapsedIndices).
    size_t rowDims = collapsibleRowDims(spec);
    if (rowDims > 1)
      collapseRowDims(spec, rowDims);
    // Everything captured by value or through pointers to the caller's
    // context, memo and emit: the closures outlive this lambda's frame.
    std::set<int> scattered; // values read somewhere other than at the outer loop's row
    std::set<int> elsewhere; // values read somewhere other than at the point's own indices
    std::set<int> *sp = &scattered, *ep = &elsewhere;
    auto makePoint = [this, operands, space, R, sp, ep, rowDims](NestContext &n,
                                                                  llvm::DenseMap<Value, Value> &memo,
                                                                  std::function<Value(Value)> &emit) {
      NestContext *np = &n;
      if (rowDims > 1)
        n.ivs = collapsedIndices(n, space, rowDims);
      // A read "at the row" indexes the row's leading dims with the row's own indices.
      // Returns whether the read is at the point itself; a load that is not
      // carries the `elsewhere` attribute, so that the CUDA printer reads it
      // through the operand's second pointer (kElsewhereLoad).
      auto noteRow = [np, sp, ep, rowDims](int value, ArrayRef<Value> idx) {
        bool atRow = idx.size() >= rowDims && np->ivs.size() >= rowDims;
        for (size_t j = 0; atRow && j < rowDims; ++j)
          atRow = idx[j] == np->ivs[j];
        if (!atRow)
          sp->insert(value);
        bool atPoint = idx.size() == np->ivs.size() && std::equal(idx.begin(), idx.end(), np->ivs.begin());
        if (!atPoint)
          ep->insert(value);
        return atPoint;
      };
      auto markElsewhere = [np](memref::LoadOp load, bool atPoint) {
        if (!atPoint)
          load->setAttr(cpu::kElsewhereLoad, UnitAttr::get(np->b.getContext()));
      };
      llvm::DenseMap<Value, Value> *mp = &memo;
      std::function<Value(Value)> *emitp = &emit;
      // The index of dim j of a rank-r value at this point (numpy
      // broadcasting: right-aligned, size-1 dims read index 0).
      auto viewIndices = [np, space, R](const TensorSpec &s) {
        SmallVector<Value> view;
        for (int64_t j = 0; j < s.rank(); ++j) {
          int64_t d = R - s.rank() + j;
          if (s.shape[size_t(j)] == Dim::of(1) && space[size_t(d)] != Dim::of(1))
            view.push_back(np->b.create<arith::ConstantIndexOp>(np->loc, 0));
          else
            view.push_back(np->ivs[size_t(d)]);
        }
        return view;
      };
      std::function<Value(Value, ArrayRef<Value>)> readAt = [this, np, operands, noteRow,
                                                             markElsewhere](Value v, ArrayRef<Value> view) -> Value {
        OpBuilder &b = np->b;
        Location loc = np->loc;
        const Lazy &l = lazy_.at(v);
        check(l.stored, "cpu codegen: reading a value that is not stored");
        SmallVector<Value> idx;
        for (const Term &t : l.terms) {
          Value i = b.create<arith::ConstantIndexOp>(loc, t.offset);
          if (t.dim >= 0 && t.scale != 0) {
            Value vi = view[size_t(t.dim)];
            if (t.scale != 1)
              vi = b.create<arith::MulIOp>(loc, vi, b.create<arith::ConstantIndexOp>(loc, t.scale));
            i = t.offset == 0 ? vi : b.create<arith::AddIOp>(loc, i, vi).getResult();
          }
          idx.push_back(i);
        }
        size_t which =
            size_t(std::find(operands.begin() + 1, operands.end(), l.value) - operands.begin());
        check(which < operands.size(), "cpu codegen: a read value is not an operand of the nest");
        bool atPoint = noteRow(l.value, idx);
        auto loaded = b.create<memref::LoadOp>(loc, np->memrefs[which], idx);
        markElsewhere(loaded, atPoint);
        return fromStorage(b, loc, loaded, art_.values[l.value].dtype);
      };
      std::function<Value(int, ArrayRef<Value>)> load = [this, np, operands, noteRow,
                                                         markElsewhere](int v, ArrayRef<Value> idx) {
        size_t which = size_t(std::find(operands.begin() + 1, operands.end(), v) - operands.begin());
        check(which < operands.size(), "cpu codegen: a loaded value is not an operand of the nest");
        bool atPoint = noteRow(v, idx);
        auto loaded = np->b.create<memref::LoadOp>(np->loc, np->memrefs[which], idx);
        markElsewhere(loaded, atPoint);
        return fromStorage(np->b, np->loc, loaded, art_.values[v].dtype);
      };
      emit = [this, np, mp, emitp, readAt, load, viewIndices](Value v) -> Value {
        if (Value m = mp->lookup(v))
          return m;
        const Lazy &l = lazy_.at(v);
        TensorSpec s = specOf(v);
        Value result = l.stored ? readAt(v, viewIndices(s))
                                : emitScalar(*np, l.op, s, *emitp, readAt, load, viewIndices(s));
        (*mp)[v] = result;
        return result;
      };
      return Point{n, emit, readAt, load};
    };
    if (epilogue)
      spec.epilogue = [&, makePoint](NestContext &n, Value acc) {
        llvm::DenseMap<Value, Value> memo;
        std::function<Value(Value)> emit;
        Point p = makePoint(n, memo, emit);
        return epilogue(p, acc);
      };
    std::vector<artifact::KernelVariant> variants = emitNest_(spec, [&, makePoint](NestContext &n) {
      llvm::DenseMap<Value, Value> memo;
      std::function<Value(Value)> emit;
      Point p = makePoint(n, memo, emit);
      return body(p);
    });
    Step st;
    st.kind = Step::Kind::Loop;
    st.label = label_;
    st.symbol = spec.symbol;
    st.operands = operands;
    st.parallel = nestIsParallel(spec);
    st.extent = nestExtent(spec);
    st.work = nestWork(spec);
    st.threads = Dim::of(1);
    st.reduced = Dim::of(1);
    for (size_t d = 0; d < spec.space.size(); ++d)
      (spec.reduced[d] ? st.reduced : st.threads) = (spec.reduced[d] ? st.reduced : st.threads) * spec.space[d];
    st.variants = std::move(variants);
    bool rowParallel = !spec.space.empty() && !spec.reduced[0] &&
                       (spec.outputOffset.empty() || spec.outputOffset[0] == Dim::of(0));
    chainLoop(st, rowParallel, std::set<int>(leaves.begin(), leaves.end()), scattered, out);
    // An elementwise nest writing its whole output at the point's own
    // indices may write it over an operand of the same shape and element
    // size that it reads only there (each element read, then written, by
    // the same thread or iteration): finalize shares their buffer when
    // nothing reads the operand afterwards.
    bool elementwise = std::none_of(spec.reduced.begin(), spec.reduced.end(), [](bool r) { return r; }) &&
                       spec.outputOffset.empty() && art_.values[out].shape == space;
    if (elementwise)
      for (int v : leaves)
        if (!elsewhere.count(v) && v != out && produced_[v] &&
            art_.values[v].storage.kind == Storage::Kind::Buffer && art_.values[v].shape == space &&
            dtypeSize(art_.values[v].dtype) == dtypeSize(art_.values[out].dtype))
          inPlaceCandidates_[art_.steps.size()].push_back(v);
    notes_.readAtRowOnly.resize(art_.steps.size() + 1);
    if (rowParallel)
      for (int v : leaves)
        if (!scattered.count(v))
          notes_.readAtRowOnly.back().push_back(v);
    art_.steps.push_back(st);
  }

  // Chains this loop to the previous one when both split the same rows and
  // every value the chain wrote that this loop reads is read at the row
  // being computed: then the runtime can run them block of rows by block of
  // rows (softmax's passes over one row block while it is in cache), also
  // across kernel boundaries.
  void chainLoop(const Step &st, bool rowParallel, const std::set<int> &reads,
                 const std::set<int> &scattered, int out) {
    bool joins = rowParallel && chain_.open && chain_.extent == st.extent && chain_.loops < kMaxChainedLoops &&
                 !art_.steps.empty() && art_.steps.back().kind == Step::Kind::Loop;
    bool readsChain = false;
    for (int v : reads) {
      // Through an alias (a reshape), rows match only if dim 0 is kept.
      int b = artifact::storageValue(art_, v);
      bool sameRows = !art_.values[v].shape.empty() && !art_.values[b].shape.empty() &&
                      art_.values[v].shape[0] == art_.values[b].shape[0];
      if (chain_.written.count(b) && (scattered.count(v) || !sameRows))
        joins = false;
      readsChain = readsChain || chain_.written.count(b) > 0;
    }
    if (chain_.siblings && !readsChain && chain_.loops >= kMaxSiblingLoops)
      joins = false;
    if (joins) {
      art_.steps.back().chainNext = true;
    } else {
      chain_ = Chain{};
      chain_.open = rowParallel;
      chain_.extent = st.extent;
    }
    chain_.siblings = chain_.siblings && !readsChain;
    ++chain_.loops;
    chain_.written.insert(out);
  }

  ProgramNotes notes_;

  struct Chain {
    bool open = false;
    Dim extent;
    std::set<int> written;
    int loops = 0;         // loops chained so far
    bool siblings = true;  // none reads what another wrote
  } chain_;

  Value emitScalar(NestContext &n, Operation *op, const TensorSpec &s,
                   const std::function<Value(Value)> &emit,
                   const std::function<Value(Value, ArrayRef<Value>)> &readAt,
                   const std::function<Value(int, ArrayRef<Value>)> &load,
                   SmallVector<Value> view) {
    OpBuilder &b = n.b;
    Location loc = n.loc;
    std::string name = opName(op);
    AttrMap attrs = completeAttrs(*tc::schemaOf(op), tc::coreAttrs(op, *tc::schemaOf(op)));
    if (reshapeOps().count(name) || name == "broadcast_to") // leading unit dims added, or a broadcast (lower)
      return emit(op->getOperand(0));
    if (name == "full" || name == "zeros" || name == "ones")
      return scalarConstant(b, loc, name == "zeros" ? 0 : name == "ones" ? 1 : getFloat(attrs, "value"),
                            s.dtype);
    if (name == "constant") {
      auto dense = llvm::cast<DenseElementsAttr>(op->getAttr("value"));
      double v;
      if (isFloat(s.dtype)) {
        APFloat f = *dense.getValues<APFloat>().begin();
        bool lost;
        f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        v = f.convertToDouble();
      } else {
        APInt i = *dense.getValues<APInt>().begin();
        v = s.dtype == DType::I1 ? double(i.getZExtValue()) : double(i.getSExtValue());
      }
      return scalarConstant(b, loc, v, s.dtype);
    }
    if (name == "iota") {
      check(s.rank() == 1, "cpu codegen: iota of rank " + std::to_string(s.rank()));
      Value i64 = b.create<arith::IndexCastOp>(loc, b.getI64Type(), view[0]);
      Value v = b.create<arith::AddIOp>(
          loc, scalarConstant(b, loc, double(getInt(attrs, "start")), DType::I64),
          b.create<arith::MulIOp>(loc, i64, scalarConstant(b, loc, double(getInt(attrs, "step")), DType::I64)));
      return convert(b, loc, v, DType::I64, s.dtype);
    }
    if (name == "gather" || name == "index_select" || name == "embedding")
      return emitIndexedRead(n, op, name, attrs, readAt, view);
    if (name == "dropout")
      return emitDropout(n, op, s, attrs, emit, readAt, load, view);
    SmallVector<Value> operands;
    SmallVector<DType> dtypes;
    for (Value o : op->getOperands()) {
      operands.push_back(emit(o));
      dtypes.push_back(specOf(o).dtype);
    }
    return emitScalarOp(b, loc, name, attrs, operands, dtypes, s.dtype);
  }

  // An index read from a stored integer tensor, clamped into [0, size):
  // compiled code does not check indices (the interpreter does), but never
  // reads outside the tensor.
  Value clampedIndex(NestContext &n, Value raw, DType dtype, const Dim &size) {
    OpBuilder &b = n.b;
    Value i = raw;
    if (dtype != DType::I64)
      i = convert(b, n.loc, i, dtype, DType::I64);
    Value idx = b.create<arith::IndexCastOp>(n.loc, b.getIndexType(), i);
    Value zero = b.create<arith::ConstantIndexOp>(n.loc, 0);
    Value last = b.create<arith::SubIOp>(n.loc, n.size(size), b.create<arith::ConstantIndexOp>(n.loc, 1));
    idx = b.create<arith::MaxSIOp>(n.loc, idx, zero);
    return b.create<arith::MinSIOp>(n.loc, idx, last);
  }

  Value emitIndexedRead(NestContext &n, Operation *op, const std::string &name,
                        const AttrMap &attrs,
                        const std::function<Value(Value, ArrayRef<Value>)> &readAt,
                        const SmallVector<Value> &view) {
    if (name == "embedding") {
      // out[..., d] = weight[index[...], d]
      Value index = op->getOperand(0), weight = op->getOperand(1);
      ArrayRef<Value> lead(view.begin(), view.end() - 1);
      Value row = clampedIndex(n, readAt(index, lead), specOf(index).dtype, specOf(weight).shape[0]);
      return readAt(weight, {row, view.back()});
    }
    Value x = op->getOperand(0), index = op->getOperand(1);
    TensorSpec xs = specOf(x);
    int64_t axis = getInt(attrs, "axis");
    if (axis < 0)
      axis += xs.rank();
    // gather: index has the output's shape; index_select: a 1-D index along axis.
    Value raw = name == "gather" ? readAt(index, view) : readAt(index, {view[size_t(axis)]});
    SmallVector<Value> at = view;
    at[size_t(axis)] = clampedIndex(n, raw, specOf(index).dtype, xs.shape[size_t(axis)]);
    return readAt(x, at);
  }

  // Philox4x32-10 keyed by the seed, counter (element, stream): the
  // interpreter's dropout bit for bit. The stream is read from its constant
  // (dropoutStreamValue).
  Value emitDropout(NestContext &n, Operation *op, const TensorSpec &s, const AttrMap &attrs,
                    const std::function<Value(Value)> &emit,
                    const std::function<Value(Value, ArrayRef<Value>)> &readAt,
                    const std::function<Value(int, ArrayRef<Value>)> &load,
                    const SmallVector<Value> &view) {
    OpBuilder &b = n.b;
    Location loc = n.loc;
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    auto c32 = [&](uint32_t v) {
      return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(i32, int64_t(int32_t(v)))).getResult();
    };
    auto c64 = [&](int64_t v) { return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(i64, v)).getResult(); };
    // The element's row-major position in the result.
    Value linear = b.create<arith::ConstantIndexOp>(loc, 0);
    for (int64_t j = 0; j < s.rank(); ++j)
      linear = b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, linear, n.size(s.shape[size_t(j)])), view[size_t(j)]);
    Value i = b.create<arith::IndexCastOp>(loc, i64, linear);
    Value seedTensor = op->getOperand(1);
    Value seed = convert(b, loc, readAt(seedTensor, SmallVector<Value>(size_t(specOf(seedTensor).rank()),
                                                                      b.create<arith::ConstantIndexOp>(loc, 0))),
                         specOf(seedTensor).dtype, DType::I64);
    auto lo = [&](Value v) { return b.create<arith::TruncIOp>(loc, i32, v).getResult(); };
    auto hi = [&](Value v) { return lo(b.create<arith::ShRUIOp>(loc, v, c64(32))); };
    Value c[4] = {lo(i), hi(i), load(dropoutStreamValue(op), {}), c32(0)};
    Value k[2] = {lo(seed), hi(seed)};
    auto mulhilo = [&](uint32_t m, Value x) {
      Value p = b.create<arith::MulIOp>(loc, c64(int64_t(m)), b.create<arith::ExtUIOp>(loc, i64, x));
      return std::pair{hi(p), lo(p)};
    };
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k[0] = b.create<arith::AddIOp>(loc, k[0], c32(0x9E3779B9));
        k[1] = b.create<arith::AddIOp>(loc, k[1], c32(0xBB67AE85));
      }
      auto [hi0, lo0] = mulhilo(0xD2511F53, c[0]);
      auto [hi1, lo1] = mulhilo(0xCD9E8D57, c[2]);
      Value n0 = b.create<arith::XOrIOp>(loc, b.create<arith::XOrIOp>(loc, hi1, c[1]), k[0]);
      Value n2 = b.create<arith::XOrIOp>(loc, b.create<arith::XOrIOp>(loc, hi0, c[3]), k[1]);
      c[0] = n0;
      c[1] = lo1;
      c[2] = n2;
      c[3] = lo0;
    }
    // u = (r0 >> 8) / 2^24, keep when u >= p, scaled by 1 / (1 - p).
    double p = getFloat(attrs, "p");
    Value bits = b.create<arith::ShRUIOp>(loc, c[0], c32(8));
    Value u = b.create<arith::MulFOp>(loc, b.create<arith::UIToFPOp>(loc, b.getF64Type(), bits),
                                      b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(1.0 / 16777216.0)));
    Value keep = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, u,
                                         b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(p)));
    Value x = emit(op->getOperand(0));
    if (p >= 1)
      return scalarConstant(b, loc, 0, s.dtype);
    Value scaled = b.create<arith::DivFOp>(loc, x, scalarConstant(b, loc, 1 - p, s.dtype));
    return b.create<arith::SelectOp>(loc, keep, scaled, scalarConstant(b, loc, 0, s.dtype));
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
      chain_ = Chain{};
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

  // A run-time check (compiler/transforms/RunChecks.h): an i32 scalar the
  // runtime reads after the run, in an arena buffer live to the last step.
  void addCheck(Value v, const std::string &message) {
    check(specOf(v) == TensorSpec{DType::I32, {}}, "codegen: a check result is not an i32 scalar");
    if (!lazy_.at(v).stored)
      materialize(v);
    const Lazy &l = lazy_.at(v);
    int value;
    if (isIdentity(l, specOf(v)) && produced_[l.value]) {
      value = l.value;
    } else {
      // A constant (the check folded) or an output: copied, so the check
      // owns its buffer.
      value = newProducedValue(specOf(v));
      Step c;
      c.kind = Step::Kind::Copy;
      c.label = "check";
      c.operands = {value, l.value};
      art_.steps.push_back(c);
      chain_ = Chain{};
    }
    art_.checks.push_back({value, message});
  }

  // Arena buffers for produced values, live from the step that writes them
  // to the last step that reads them (or an alias of them).
  void finalize() {
    int n = int(art_.values.size());
    std::vector<int> first(size_t(n), -1), last(size_t(n), -1);
    auto base = [&](int v) { return artifact::storageValue(art_, v); };
    // A chain of loops runs interleaved block by block, so whatever any of
    // its steps uses is live from the chain's first step to its last.
    size_t nsteps = art_.steps.size();
    std::vector<int> chainFirst(nsteps), chainLast(nsteps);
    for (size_t si = 0; si < nsteps; ++si)
      chainFirst[si] = si > 0 && art_.steps[si - 1].chainNext ? chainFirst[si - 1] : int(si);
    for (size_t si = nsteps; si-- > 0;)
      chainLast[si] = art_.steps[si].chainNext ? chainLast[si + 1] : int(si);
    for (size_t si = 0; si < nsteps; ++si) {
      const Step &s = art_.steps[si];
      for (size_t k = 0; k < s.operands.size(); ++k) {
        int v = base(s.operands[k]);
        bool written = artifact::writesOperand(s, k);
        if (written && first[v] < 0)
          first[v] = chainFirst[si];
        first[v] = first[v] < 0 ? -1 : std::min(first[v], chainFirst[si]);
        last[v] = std::max(last[v], chainLast[si]);
      }
    }
    // Every step reads what an earlier step wrote (or an input, weight or
    // constant): a library call ordered before the nest computing its
    // operand read stale memory (an autocast bias, session 39).
    {
      std::vector<bool> done(size_t(n), false);
      for (size_t si = 0; si < nsteps; ++si) {
        const Step &s = art_.steps[si];
        for (size_t k = 0; k < s.operands.size(); ++k) {
          int v = base(s.operands[k]);
          Storage::Kind kind = art_.values[size_t(v)].storage.kind;
          check(artifact::writesOperand(s, k) || done[size_t(v)] ||
                    (kind != Storage::Kind::Buffer && kind != Storage::Kind::Output),
                "codegen: step " + std::to_string(si) + " (" + s.label + ") reads value " + std::to_string(v) +
                    " before any step writes it");
        }
        for (size_t k = 0; k < s.operands.size(); ++k)
          if (artifact::writesOperand(s, k))
            done[size_t(base(s.operands[k]))] = true;
      }
    }
    auto isCheck = [&](int v) {
      return std::any_of(art_.checks.begin(), art_.checks.end(),
                         [&](const artifact::RunCheck &c) { return c.value == v; });
    };
    // In place: a step's output takes the buffer of an operand that no
    // later step reads (readers by storage: through aliases too). `owner`
    // is the value whose buffer a value shares (transitively).
    std::vector<int> lastRead(size_t(n), -1);
    std::vector<int> owner(static_cast<size_t>(n));
    for (int v = 0; v < n; ++v)
      owner[size_t(v)] = v;
    for (size_t si = 0; si < nsteps; ++si)
      for (size_t k = 0; k < art_.steps[si].operands.size(); ++k)
        if (!artifact::writesOperand(art_.steps[si], k))
          lastRead[size_t(base(art_.steps[si].operands[k]))] = int(si);
    std::function<int(int)> root = [&](int v) { return owner[size_t(v)] == v ? v : root(owner[size_t(v)]); };
    // A step of a chain with one output per row (a row's scalar) writes
    // over no operand: a CUDA chain kernel splitting rows across a cluster
    // computes such steps in every block (each storing the same value), so
    // one block would overwrite what another has still to read; otherwise
    // the chain kernel would have to wait for every thread of the earlier
    // steps (a cluster barrier, which waits for the stores in flight). It
    // saves a few bytes per row.
    auto inChain = [&](size_t si) { return chainFirst[si] != chainLast[si]; };
    for (auto &[si, candidates] : inPlaceCandidates_) {
      int out = art_.steps[si].operands[0];
      if (!produced_[size_t(out)] || isCheck(out) || base(out) != out)
        continue;
      bool rowScalar = art_.steps[si].oneOutputPerRow();
      for (int v : candidates)
        if (base(v) == v && lastRead[size_t(v)] == int(si) && !isCheck(v) && root(v) != root(out) &&
            !(rowScalar && inChain(si))) {
          owner[size_t(out)] = root(v);
          break;
        }
    }
    // A collective's operand: the CUDA runtime runs collectives on a
    // communication stream beside the steps after them, and a step writing
    // over the operand's bytes would have to wait for the collective (no
    // overlap); it keeps them to the end (tensorc-plan-memory does the same).
    std::vector<bool> readByCollective(size_t(n), false);
    for (size_t si = 0; si < nsteps; ++si)
      if (art_.steps[si].kind == Step::Kind::Collective)
        for (size_t k = 1; k < art_.steps[si].operands.size(); ++k)
          readByCollective[size_t(root(base(art_.steps[si].operands[k])))] = true;
    std::map<int, size_t> bufferOf; // by owner
    for (int v = 0; v < n; ++v) {
      if (!produced_[v])
        continue;
      const artifact::ValueDecl &d = art_.values[v];
      Dim bytes = numElements(d.shape) * Dim::of(int64_t(dtypeSize(d.dtype)));
      int f = std::max(first[v], 0);
      // A check is read after the last step: nothing may reuse its bytes.
      int l = isCheck(v) || readByCollective[size_t(root(v))] ? std::max(int(nsteps) - 1, f)
                                                               : std::max(last[v], f);
      auto [it, fresh] = bufferOf.emplace(root(v), art_.buffers.size());
      if (fresh) {
        art_.buffers.push_back({bytes, f, l});
      } else {
        artifact::BufferDecl &b = art_.buffers[it->second];
        b.first = std::min(b.first, f);
        b.last = std::max(b.last, l);
      }
      art_.values[v].storage = {Storage::Kind::Buffer, int(it->second)};
    }
  }

  // Copies first: inserting into the map may move every entry.
  void setLazy(Value v, Lazy l) { lazy_[v] = std::move(l); }

  NestEmitter emitNest_;
  std::string prefix_;
  ProgramOptions options_;
  AttentionEmitter emitAttention_;
  // A dropout stream -> the i32 constant holding it (dropoutStreamValue).
  std::map<int32_t, int> dropoutStreams_;
  // Matmul steps whose product may still take an epilogue: the product's
  // artifact value -> (step index, the tc value of the product).
  std::map<int, std::pair<size_t, Value>> matmulProducts_;
  // Loop step -> operands it may write its output over (see emitNestWith).
  std::map<size_t, std::vector<int>> inPlaceCandidates_;
  artifact::Artifact art_;
  std::vector<bool> produced_;
  std::vector<std::string> symbolNames_;
  llvm::DenseMap<Value, Lazy> lazy_;
  llvm::DenseMap<Value, Value> outerOf_; // a fused kernel's block argument -> its input outside
  std::vector<std::unique_ptr<SmallVector<Value>>> collapsedIvs_; // see collapsedIndices
  std::string label_;
};

} // namespace

bool supportsOp(const std::string &op) {
  // Composites the backend pipelines decompose into supported primitives.
  static const std::set<std::string> decomposed = {
      "softmax",    "log_softmax", "layer_norm", "rms_norm", "cross_entropy", "var",
      "batch_norm", "scaled_dot_product_attention", "scaled_dot_product_attention_with_lse",
      "scaled_dot_product_attention_backward"};
  static const std::set<std::string> special = {
      "matmul", "constant", "gather",  "index_select", "embedding",  "dropout",
      "argmax", "argmin",   "concat",  "pad",          "conv2d",     "max_pool2d", "avg_pool2d",
      "conv2d_backward_input", "conv2d_backward_weight", "embedding_backward", "max_pool2d_backward", "max_pool2d_taps"};
  // Collectives: steps the runtime runs through MPI (CPU) or NCCL (CUDA).
  const OpSchema *schema = findOpSchema(op);
  bool collective = schema && schema->category == "collective";
  return isScalarOp(op) || reductionOps().count(op) || reshapeOps().count(op) ||
         viewOps().count(op) || generatorOps().count(op) || special.count(op) ||
         decomposed.count(op) || collective;
}

artifact::Artifact buildProgram(func::FuncOp fn, const std::string &prefix, const NestEmitter &emit,
                                const ProgramOptions &options, const AttentionEmitter &emitAttention,
                                ProgramNotes *notes) {
  ProgramBuilder builder(emit, prefix, options, emitAttention);
  artifact::Artifact a = builder.build(fn);
  if (notes) {
    *notes = builder.notes();
    notes->readAtRowOnly.resize(a.steps.size());
  }
  return a;
}

func::FuncOp singleFunction(ModuleOp module) {
  func::FuncOp fn;
  for (auto f : module.getOps<func::FuncOp>()) {
    check(!fn, "codegen: the module must hold one function");
    fn = f;
  }
  check(bool(fn), "codegen: the module has no function");
  return fn;
}

} // namespace tensorc::codegen
