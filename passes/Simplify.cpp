// tensorc-simplify: algebraic identities that are exact in floating point,
// view canonicalization and op chains, applied greedily together with the tc
// folders (canonicalization) and dead-code removal.
//
// Exactness: x * 1, x / 1, x - 0, x + (-0.0) and neg(neg(x)) are exact for
// every float including nan, inf and -0 (one rewrite rounds differently, and
// better: a sum of a broadcast, ReduceOfBroadcast). x + 0.0 is NOT folded for floats:
// (-0.0) + 0.0 is +0.0. Widening casts followed by the narrowing cast back
// are exact; the reverse order rounds and is kept. One rewrite is exact up
// to a documented bound: a causal attention mask with a finite fill (the
// dtype's lowest, as Hugging Face writes it) becomes is_causal
// (AttentionCausalMask).
#include "passes/Passes.h"

#include "ir/core/OpSchema.h"
#include "ir/dialect/Conversion.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <numeric>
#include <set>

namespace tensorc {

#define GEN_PASS_DEF_SIMPLIFYPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;
using namespace tensorc::tc;

// The value of `v` when it is a splat constant.
std::optional<double> splatValue(Value v) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(attr);
  if (!dense || !dense.isSplat())
    return std::nullopt;
  if (llvm::isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (dense.getElementType().isInteger(1))
    return dense.getSplatValue<bool>() ? 1.0 : 0.0;
  return double(dense.getSplatValue<APInt>().getSExtValue());
}

bool isNegativeZero(Value v) {
  ElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return false;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(attr);
  return dense && dense.isSplat() && llvm::isa<FloatType>(dense.getElementType()) &&
         dense.getSplatValue<APFloat>().isNegZero();
}

bool isFloatTensor(Value v) {
  return llvm::isa<FloatType>(llvm::cast<TcTensorType>(v.getType()).getElementType());
}

// binary(x, c) -> x when c is the identity and the result has x's type.
template <typename OpTy> struct RightIdentity : OpRewritePattern<OpTy> {
  RightIdentity(MLIRContext *ctx, double identity, bool commutative)
      : OpRewritePattern<OpTy>(ctx), identity(identity), commutative(commutative) {}
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rewriter) const override {
    for (int side = 0; side < (commutative ? 2 : 1); ++side) {
      Value x = op->getOperand(side), c = op->getOperand(1 - side);
      std::optional<double> v = splatValue(c);
      if (!v || *v != identity || x.getType() != op.getType())
        continue;
      if (identity == 0.0 && std::is_same_v<OpTy, AddOp> && isFloatTensor(x) && !isNegativeZero(c))
        continue; // x + 0.0 turns -0.0 into +0.0
      rewriter.replaceOp(op, x);
      return success();
    }
    return failure();
  }
  double identity;
  bool commutative;
};

struct DoubleNegation : OpRewritePattern<NegOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NegOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getX().getDefiningOp<NegOp>();
    if (!inner)
      return failure();
    rewriter.replaceOp(op, inner.getX());
    return success();
  }
};

int rank(DType d) {
  switch (d) {
  case DType::F16:
  case DType::BF16:
    return 1;
  case DType::F32:
    return 2;
  case DType::F64:
    return 3;
  case DType::I32:
    return 1;
  case DType::I64:
    return 2;
  default:
    return 0;
  }
}

// cast(cast(x, wide), narrow) -> x when the first cast widened exactly.
struct WidenThenNarrow : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getX().getDefiningOp<CastOp>();
    if (!inner || inner.getX().getType() != op.getType())
      return failure();
    std::optional<DType> from =
        toDType(llvm::cast<TcTensorType>(inner.getX().getType()).getElementType());
    std::optional<DType> mid = toDType(llvm::cast<TcTensorType>(inner.getType()).getElementType());
    if (!from || !mid || isFloat(*from) != isFloat(*mid) || isBool(*from) ||
        rank(*mid) <= rank(*from))
      return failure();
    if (*from == DType::F16 && *mid == DType::F16)
      return failure();
    rewriter.replaceOp(op, inner.getX());
    return success();
  }
};

// permute(permute(x, p), q) -> permute(x, p o q); permute(x, identity) -> x.
struct PermuteChain : OpRewritePattern<PermuteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PermuteOp op, PatternRewriter &rewriter) const override {
    int64_t r = int64_t(op.getDims().size());
    auto norm = [r](int64_t a) { return a < 0 ? a + r : a; };
    std::vector<int64_t> perm;
    for (int64_t d : op.getDims())
      perm.push_back(norm(d));
    std::vector<int64_t> identity(r);
    std::iota(identity.begin(), identity.end(), 0);
    if (perm == identity) {
      rewriter.replaceOp(op, op.getX());
      return success();
    }
    auto inner = op.getX().getDefiningOp<PermuteOp>();
    if (!inner)
      return failure();
    std::vector<int64_t> composed(r);
    for (int64_t i = 0; i < r; ++i)
      composed[i] = norm(inner.getDims()[perm[i]]);
    rewriter.modifyOpInPlace(op, [&] {
      op.getXMutable().assign(inner.getX());
      op.setDimsAttr(rewriter.getDenseI64ArrayAttr(composed));
    });
    return success();
  }
};

// transpose(matmul(a, b)) over the last two dims -> matmul(b^T, a^T): the
// GEMM writes the transposed product itself, its operands' transposes are
// GEMM flags rather than copies. A weight gradient in PyTorch's [out, in]
// layout was a GEMM and then a kernel transposing its product (every
// nn.Linear of a model through the PyTorch bridge).
struct TransposedProduct : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op, PatternRewriter &rewriter) const override {
    auto mm = op.getX().getDefiningOp<MatmulOp>();
    if (!mm || !mm->hasOneUse())
      return failure();
    std::optional<TensorSpec> out = toTensorSpec(op.getType());
    std::optional<TensorSpec> a = toTensorSpec(mm->getOperand(0).getType());
    std::optional<TensorSpec> b = toTensorSpec(mm->getOperand(1).getType());
    if (!out || !a || !b || a->rank() < 2 || b->rank() < 2)
      return failure(); // a vector operand: no transpose to trade
    // Batch dims equal on both sides: a weight shared across the batch
    // ([B, M, K] @ [K, N]) is one GEMM over the flattened rows, which the
    // swapped form ([N, K] @ [B, K, M]) would lose.
    if (a->rank() != b->rank() ||
        !std::equal(a->shape.begin(), a->shape.end() - 2, b->shape.begin(), b->shape.end() - 2))
      return failure();
    int64_t r = out->rank();
    auto norm = [r](int64_t d) { return d < 0 ? d + r : d; };
    std::set<int64_t> dims{norm(op.getDim0()), norm(op.getDim1())};
    if (dims != std::set<int64_t>{r - 2, r - 1})
      return failure();
    auto transposed = [&](Value v, TensorSpec spec) {
      std::swap(spec.shape[spec.rank() - 2], spec.shape[spec.rank() - 1]);
      return rewriter
          .create<TransposeOp>(op.getLoc(), toMlirType(op.getContext(), spec), v, rewriter.getI64IntegerAttr(-2),
                               rewriter.getI64IntegerAttr(-1))
          .getResult();
    };
    Value bt = transposed(mm->getOperand(1), *b), at = transposed(mm->getOperand(0), *a);
    auto product = rewriter.create<MatmulOp>(op.getLoc(), op.getType(), bt, at);
    for (NamedAttribute attr : mm->getAttrs()) // dialect attributes such as tc.sharding
      if (attr.getName().getValue().contains('.'))
        product->setAttr(attr.getName(), attr.getValue());
    rewriter.replaceOp(op, product.getResult());
    return success();
  }
};

// squeeze, unsqueeze and flatten are reshapes; one view op lets reshape
// chains collapse (the reshape folder) and later fusion see one kind.
template <typename OpTy> struct ViewAsReshape : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rewriter) const override {
    std::optional<TensorSpec> spec = toTensorSpec(op.getType());
    if (!spec)
      return failure();
    Attr dims(spec->shape);
    auto reshape =
        rewriter.create<ReshapeOp>(op.getLoc(), op.getType(), op->getOperand(0),
                                   llvm::cast<ArrayAttr>(toMlirAttr(op.getContext(), dims)));
    for (NamedAttribute a : op->getAttrs()) // dialect attributes such as tc.sharding
      if (a.getName().getValue().contains('.'))
        reshape->setAttr(a.getName(), a.getValue());
    rewriter.replaceOp(op, reshape.getResult());
    return success();
  }
};

// A one-operand elementwise op (unary ops, cast, clamp): its result has
// its operand's shape.
bool isUnaryElementwise(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (!name.starts_with("tc.") || op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  const OpSchema *schema = findOpSchema(name.drop_front(3));
  return schema && (schema->category == "unary" || schema->category == "elementwise");
}

// Whether `v` is in memory whatever fusion decides (a graph input or a
// library call's result: a reshape of it is a view), or a chain of
// one-use unary elementwise ops of such a value.
bool inMemoryOrUnaryOfIt(Value v, int depth = 0) {
  Operation *d = v.getDefiningOp();
  if (!d)
    return true;
  StringRef name = d->getName().getStringRef();
  if (name == "tc.matmul" || name == "tc.conv2d" || name == "tc.conv2d_backward_input" ||
      name == "tc.conv2d_backward_weight")
    return true;
  return depth < 16 && isUnaryElementwise(d) && d->getResult(0).hasOneUse() &&
         inMemoryOrUnaryOfIt(d->getOperand(0), depth + 1);
}

// `op` (one-operand elementwise) rebuilt on `operand`, its result in the
// operand's shape.
Value unaryOn(PatternRewriter &rewriter, Operation *op, Value operand) {
  std::optional<TensorSpec> in = toTensorSpec(operand.getType());
  std::optional<TensorSpec> out = toTensorSpec(op->getResult(0).getType());
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(operand);
  // The op's own attributes; dialect ones (a tc.sharding, per dim of the
  // result) only where the shape stays.
  for (NamedAttribute a : op->getAttrs())
    if (!a.getName().getValue().contains('.') || in->shape == out->shape)
      state.addAttribute(a.getName(), a.getValue());
  state.addTypes(toMlirType(op->getContext(), TensorSpec{out->dtype, in->shape}));
  return rewriter.create(state)->getResult(0);
}

// `view` (its operand 0: u's result) rebuilt on u's operand, then u applied
// to it; null (nothing created) where a type is not a tc tensor.
Value viewBeforeUnary(PatternRewriter &rewriter, Operation *view, Operation *u) {
  std::optional<TensorSpec> in = toTensorSpec(u->getOperand(0).getType());
  std::optional<TensorSpec> out = toTensorSpec(view->getResult(0).getType());
  if (!in || !out)
    return nullptr;
  Operation *moved = rewriter.clone(*view);
  moved->setOperand(0, u->getOperand(0));
  moved->getResult(0).setType(toMlirType(view->getContext(), TensorSpec{in->dtype, out->shape}));
  return unaryOn(rewriter, u, moved->getResult(0));
}

// Reshapes move out of the way of fusion: a reshape between elementwise
// ops inside a kernel is not an affine re-indexing of a value computed on
// the fly (merging [8, 512] into [4096] divides), so code generation
// materialized the value before it (an LM head's logits, cast to f32 and
// reshaped for the cross-entropy: 524 MB written and read back, twice in
// the backward). Moved to a value in memory, a reshape is a view; moved
// after the elementwise chain, to the kernel's output, also a view.
// Up: reshape(u(x)) -> u(reshape(x)) where x is in memory (a graph input,
// a GEMM's product, or one-use unary ops of one).
struct ReshapeUpToMemory : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op, PatternRewriter &rewriter) const override {
    Operation *u = op.getOperand().getDefiningOp();
    if (!u || !isUnaryElementwise(u) || !u->getResult(0).hasOneUse() ||
        !inMemoryOrUnaryOfIt(u->getOperand(0)))
      return failure();
    Value moved = viewBeforeUnary(rewriter, op, u);
    if (!moved)
      return failure();
    rewriter.replaceOp(op, moved);
    // u is dead now: erased at once, or x would read as used twice (by u
    // and the moved reshape) and ReshapeDownFromComputed would move the
    // reshape back down: the rewrites cycled (exp(exp(x)) then unsqueeze).
    if (u->use_empty())
      rewriter.eraseOp(u);
    return success();
  }
};
// Down: u(reshape(x)) -> reshape(u(x)) where x is computed (not in memory):
// the reshape sinks to where the chain leaves the kernel.
struct ReshapeDownFromComputed : RewritePattern {
  explicit ReshapeDownFromComputed(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isUnaryElementwise(op))
      return failure();
    auto reshape = op->getOperand(0).getDefiningOp<ReshapeOp>();
    if (!reshape || !reshape->getResult(0).hasOneUse() || inMemoryOrUnaryOfIt(reshape.getOperand()))
      return failure();
    if (!toTensorSpec(reshape.getOperand().getType()) || !toTensorSpec(op->getResult(0).getType()))
      return failure();
    Value computed = unaryOn(rewriter, op, reshape.getOperand());
    Operation *moved = rewriter.clone(*reshape);
    moved->setOperand(0, computed);
    moved->getResult(0).setType(op->getResult(0).getType());
    rewriter.replaceOp(op, moved->getResult(0));
    if (reshape->use_empty()) // as above: no transient second use of x
      rewriter.eraseOp(reshape);
    return success();
  }
};

// gather(u(x), index) -> u(gather(x, index)) and slice(u(x)) -> u(slice(x))
// for one-operand elementwise u: picking elements commutes with computing
// them, and the picked ones are few. Code generation reads gathers and
// views (slices, transposes, broadcasts) from memory only, so a gather or
// slice of a value computed on the fly materialized all of it first (the
// target logits of an LM head's cross-entropy gradient and each row's
// first logit, its shift, picked from the f32 cast of the bf16 logits:
// [4096, 32000] f32 written to pick 4096 of them).
template <typename OpTy> struct PickBeforeUnary : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rewriter) const override {
    Operation *u = op->getOperand(0).getDefiningOp();
    if (!u || !isUnaryElementwise(u))
      return failure();
    Value picked = viewBeforeUnary(rewriter, op, u);
    if (!picked)
      return failure();
    rewriter.replaceOp(op, picked);
    return success();
  }
};

struct SameBranches : OpRewritePattern<WhereOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WhereOp op, PatternRewriter &rewriter) const override {
    if (op.getX() != op.getY() || op.getX().getType() != op.getType())
      return failure();
    rewriter.replaceOp(op, op.getX());
    return success();
  }
};

// The one value of every element of `v`: a splat constant seen through
// broadcasts, reshapes and casts (converting the value as the cast does:
// to i1 nonzero, to an integer truncated). Hugging Face's attention masks
// under tracing are such values: `arange >= 0` broadcast, then 0 or -inf.
std::optional<double> uniformValue(Value v) {
  for (int depth = 0; depth < 8; ++depth) {
    if (std::optional<double> splat = splatValue(v))
      return splat;
    Operation *op = v.getDefiningOp();
    if (!op || op->getNumOperands() != 1 ||
        !(llvm::isa<BroadcastToOp>(op) || llvm::isa<ReshapeOp>(op) || llvm::isa<CastOp>(op)))
      return std::nullopt;
    if (auto cast = llvm::dyn_cast<CastOp>(op)) {
      std::optional<double> inner = uniformValue(cast.getX());
      if (!inner)
        return std::nullopt;
      Type to = llvm::cast<TcTensorType>(cast.getType()).getElementType();
      if (to.isInteger(1))
        return *inner != 0 ? 1.0 : 0.0;
      if (llvm::isa<IntegerType>(to))
        return std::isfinite(*inner) ? std::optional<double>(std::trunc(*inner)) : std::nullopt;
      return inner; // float to float: 0, 1 and the infinities stay
    }
    v = op->getOperand(0);
  }
  return std::nullopt;
}

// where(c, x, y) with c the same everywhere: the branch it picks, broadcast
// to the result's shape.
struct UniformCondition : OpRewritePattern<WhereOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WhereOp op, PatternRewriter &rewriter) const override {
    std::optional<double> c = uniformValue(op.getCondition());
    if (!c)
      return failure();
    Value picked = *c != 0 ? op.getX() : op.getY();
    if (picked.getType() == op.getType()) {
      rewriter.replaceOp(op, picked);
      return success();
    }
    std::optional<TensorSpec> result = toTensorSpec(op.getType());
    if (!result)
      return failure();
    OperationState state(op.getLoc(), "tc.broadcast_to");
    state.addOperands(picked);
    state.addAttribute("shape", toMlirAttr(op->getContext(), Attr(result->shape)));
    state.addTypes(op.getType());
    rewriter.replaceOp(op, rewriter.create(state)->getResults());
    return success();
  }
};

// Where an attention op's user mask is among its schema operands (forward,
// with_lse: 3; backward, after the cotangent: 4); npos for other ops.
size_t attentionMaskIndex(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (name == "tc.scaled_dot_product_attention" || name == "tc.scaled_dot_product_attention_with_lse")
    return 3;
  return name == "tc.scaled_dot_product_attention_backward" ? 4 : std::string::npos;
}

// The user mask operand of an attention op, or null.
Value attentionMask(Operation *op) {
  size_t at = attentionMaskIndex(op);
  if (at == std::string::npos)
    return Value();
  std::vector<std::optional<Value>> operands = schemaOperands(op, *schemaOf(op));
  return at < operands.size() && operands[at] ? *operands[at] : Value();
}

// `op` (an attention op with a user mask) without its mask, causal if
// `causal`.
void replaceWithoutMask(Operation *op, PatternRewriter &rewriter, bool causal) {
  OperationState state(op->getLoc(), op->getName().getStringRef());
  std::vector<std::optional<Value>> operands = schemaOperands(op, *schemaOf(op));
  operands[attentionMaskIndex(op)] = std::nullopt;
  for (NamedAttribute a : op->getAttrs())
    if (a.getName() != "operandSegmentSizes" && !(causal && a.getName() == "is_causal"))
      state.addAttribute(a.getName(), a.getValue());
  if (causal)
    state.addAttribute("is_causal", rewriter.getBoolAttr(true));
  addSchemaOperands(state, operands);
  state.addTypes(op->getResultTypes());
  rewriter.replaceOp(op, rewriter.create(state)->getResults());
}

// Attention with a mask that hides nothing (every element true, or an
// additive 0): the same attention without it, so the kernels read no mask.
// Hugging Face models traced without an attention mask build such a mask.
struct AttentionWithoutNoOpMask : RewritePattern {
  explicit AttentionWithoutNoOpMask(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    Value mask = attentionMask(op);
    if (!mask)
      return failure();
    std::optional<double> v = uniformValue(mask);
    bool boolean = llvm::cast<TcTensorType>(mask.getType()).getElementType().isInteger(1);
    if (!v || (boolean ? *v == 0 : *v != 0))
      return failure();
    replaceWithoutMask(op, rewriter, false);
    return success();
  }
};

// Whether `v`'s elements are their index along its dim `axis` (of
// `rank`): iota(0, n) reshaped so that its one non-unit dim is `axis`.
bool isPositionAlong(Value v, int64_t axis, int64_t rank) {
  std::optional<TensorSpec> t = toTensorSpec(v.getType());
  if (!t || t->rank() != rank)
    return false;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && t->shape[size_t(d)] != Dim::of(1))
      return false;
  ElementsAttr attr; // folded: the integers 0, 1, ... in order
  if (matchPattern(v, m_Constant(&attr))) {
    auto dense = llvm::dyn_cast<DenseIntElementsAttr>(attr);
    if (!dense || dense.isSplat())
      return dense && dense.getNumElements() == 1 && dense.getSplatValue<APInt>().isZero();
    int64_t at = 0;
    for (const APInt &x : dense.getValues<APInt>())
      if (x.getSExtValue() != at++)
        return false;
    return true;
  }
  auto reshape = v.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return false;
  Operation *iota = reshape.getX().getDefiningOp();
  if (!iota || iota->getName().getStringRef() != "tc.iota")
    return false;
  auto start = iota->getAttrOfType<IntegerAttr>("start"), step = iota->getAttrOfType<IntegerAttr>("step");
  return (!start || start.getInt() == 0) && (!step || step.getInt() == 1);
}

// Whether the i1 value `c` is, at (..., i, j) of its last two dims, j <= i:
// le(col, row) or ge(row, col) of positions (Hugging Face's causal mask,
// `kv_idx <= q_idx`), seen through broadcasts.
bool isCausalPredicate(Value c) {
  while (auto b = c.getDefiningOp<BroadcastToOp>())
    c = b.getX();
  // Folded (FoldConstants computes it from the iotas): a constant whose
  // leading dims are 1 holding the lower triangle.
  ElementsAttr attr;
  if (matchPattern(c, m_Constant(&attr))) {
    auto dense = llvm::dyn_cast<DenseElementsAttr>(attr);
    auto type = dense ? llvm::dyn_cast<RankedTensorType>(dense.getType()) : RankedTensorType();
    if (!type || type.getRank() < 2 || !type.getElementType().isInteger(1) || type.getNumElements() > (1 << 24))
      return false;
    int64_t rows = type.getDimSize(type.getRank() - 2), cols = type.getDimSize(type.getRank() - 1);
    if (rows * cols != type.getNumElements())
      return false;
    if (dense.isSplat())
      return rows == 1 && cols == 1 && dense.getSplatValue<bool>();
    int64_t at = 0;
    for (bool visible : dense.getValues<bool>()) {
      if (visible != (at % cols <= at / cols))
        return false;
      ++at;
    }
    return true;
  }
  Operation *op = c.getDefiningOp();
  std::optional<TensorSpec> t = toTensorSpec(c.getType());
  if (!op || !t || t->rank() < 2 || op->getNumOperands() != 2)
    return false;
  int64_t rank = t->rank();
  StringRef name = op->getName().getStringRef();
  Value col = name == "tc.le" ? op->getOperand(0) : name == "tc.ge" ? op->getOperand(1) : Value();
  Value row = name == "tc.le" ? op->getOperand(1) : name == "tc.ge" ? op->getOperand(0) : Value();
  return col && isPositionAlong(col, rank - 1, rank) && isPositionAlong(row, rank - 2, rank);
}

// Attention whose mask is the causal one (keys j <= query i visible; as i1,
// or 0 there and -inf or at most -65504 elsewhere, Hugging Face's
// finfo(dtype).min) over square scores: is_causal without the mask. With a
// finite fill the two agree exactly unless one row's scores span more than
// about 65400 (below that, exp of a hidden score underflows to 0 in f32
// either way).
struct AttentionCausalMask : RewritePattern {
  explicit AttentionCausalMask(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    Value mask = attentionMask(op);
    if (!mask)
      return failure();
    // q and k: operands 0 and 1 (the backward's 1 and 2).
    unsigned first = op->getName().getStringRef() == "tc.scaled_dot_product_attention_backward" ? 1 : 0;
    std::optional<TensorSpec> q = toTensorSpec(op->getOperand(first).getType()),
                              k = toTensorSpec(op->getOperand(first + 1).getType());
    if (!q || !k || q->rank() < 2 || q->shape[q->shape.size() - 2] != k->shape[k->shape.size() - 2] ||
        !q->shape[q->shape.size() - 2].isStatic())
      return failure();
    bool boolean = llvm::cast<TcTensorType>(mask.getType()).getElementType().isInteger(1);
    while (true) { // broadcasts and casts: the last two dims stay
      Operation *d = mask.getDefiningOp();
      if (!d || !(llvm::isa<BroadcastToOp>(d) || llvm::isa<CastOp>(d)))
        break;
      mask = d->getOperand(0);
    }
    bool causal = false;
    if (boolean) {
      causal = isCausalPredicate(mask);
    } else if (auto w = mask.getDefiningOp<WhereOp>()) {
      std::optional<double> shown = uniformValue(w.getX()), hidden = uniformValue(w.getY());
      causal = shown && *shown == 0 && hidden && *hidden <= -65504.0 && isCausalPredicate(w.getCondition());
    }
    if (!causal)
      return failure();
    replaceWithoutMask(op, rewriter, true);
    return success();
  }
};

// A model output that is a linear layer's product unflattened,
// reshape(matmul(reshape(x), w) [+ bias]) with x [d..., K] flattened to
// [prod d, K] and the product back to [d..., N] (PyTorch's view, addmm,
// view), becomes matmul(x, w) [+ bias]: the GEMM (its bias in the
// epilogue) writes the output, where the reshape of its product was a view
// the program copied into the output (a [16, 512, 30522] bf16 LM head's
// logits: 0.23 ms on an H200). Only for outputs: elsewhere the views cost
// nothing, and the 2-D product is what the fusions around GEMMs expect.
struct OutputLinearUnflatten : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op, PatternRewriter &rewriter) const override {
    if (op->use_empty() || !llvm::all_of(op->getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); }))
      return failure();
    Value v = op.getOperand();
    AddOp bias = v.getDefiningOp<AddOp>();
    Value product = bias ? bias.getLhs() : v;
    auto matmul = product.getDefiningOp<MatmulOp>();
    if (!matmul || !product.hasOneUse() || (bias && !v.hasOneUse()))
      return failure();
    auto flat = matmul.getLhs().getDefiningOp<ReshapeOp>();
    std::optional<TensorSpec> x = flat ? toTensorSpec(flat.getOperand().getType()) : std::nullopt,
                              l = toTensorSpec(matmul.getLhs().getType()), w = toTensorSpec(matmul.getRhs().getType()),
                              out = toTensorSpec(op.getType());
    if (!x || !l || !w || !out || l->rank() != 2 || w->rank() != 2 || x->rank() < 3 || out->rank() != x->rank() ||
        x->shape.back() != l->shape.back())
      return failure();
    Shape want(x->shape.begin(), x->shape.end() - 1);
    want.push_back(w->shape.back());
    if (out->shape != want)
      return failure();
    if (bias) { // a vector along N (or a scalar): it broadcasts the same over [d..., N]
      std::optional<TensorSpec> b = toTensorSpec(bias.getRhs().getType());
      if (!b || b->rank() > 1 || (b->rank() == 1 && b->shape[0] != w->shape.back()))
        return failure();
    }
    TensorSpec wide{l->dtype, want};
    if (bias ? toTensorSpec(bias.getType())->dtype != out->dtype : l->dtype != out->dtype)
      return failure();
    OperationState mm(matmul.getLoc(), matmul->getName().getStringRef());
    mm.addOperands({flat.getOperand(), matmul.getRhs()});
    mm.addAttributes(matmul->getAttrs());
    mm.addTypes(toMlirType(op->getContext(), wide));
    Value result = rewriter.create(mm)->getResult(0);
    if (bias) {
      OperationState add(bias.getLoc(), bias->getName().getStringRef());
      add.addOperands({result, bias.getRhs()});
      add.addAttributes(bias->getAttrs());
      add.addTypes(op.getType());
      result = rewriter.create(add)->getResult(0);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

// sum/mean/max/min along axes where the operand is a broadcast: N equal
// values reduce to the value (times N for sum), computed on the small
// operand. mean, max and min are exact; sum rounds once instead of N times
// (closer to the exact result, not bit-identical to a summation). The
// backward of a summed loss took a bias gradient as the column sums of a
// [rows, C] tensor of ones: materialized and summed, 0.3 ms of an H100's
// layer-norm training step. Reduced extents must be static and non-zero
// (an empty mean or max is not the value).
struct ReduceOfBroadcast : RewritePattern {
  explicit ReduceOfBroadcast(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    StringRef name = op->getName().getStringRef();
    if (name != "tc.sum" && name != "tc.mean" && name != "tc.max" && name != "tc.min")
      return failure();
    auto broadcast = op->getOperand(0).getDefiningOp<BroadcastToOp>();
    if (!broadcast)
      return failure();
    std::optional<TensorSpec> in = toTensorSpec(broadcast.getX().getType());
    std::optional<TensorSpec> full = toTensorSpec(broadcast.getType());
    std::optional<TensorSpec> result = toTensorSpec(op->getResult(0).getType());
    if (!in || !full || !result || in->dtype != result->dtype || in->rank() > full->rank())
      return failure();
    int64_t rank = full->rank(), lead = rank - in->rank();
    std::vector<bool> reduced(size_t(rank), true);
    if (auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes")) {
      std::fill(reduced.begin(), reduced.end(), false);
      for (int64_t a : axes.asArrayRef())
        reduced[size_t(a < 0 ? a + rank : a)] = true;
    }
    auto keepdimAttr = op->getAttrOfType<BoolAttr>("keepdim");
    bool keepdim = keepdimAttr && keepdimAttr.getValue();
    int64_t count = 1;
    Shape kept = full->shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[size_t(d)])
        continue;
      const Dim &extent = full->shape[size_t(d)];
      if (!extent.isStatic() || extent.value() == 0 ||
          (d >= lead && in->shape[size_t(d - lead)] != Dim::of(1)))
        return failure();
      count *= extent.value();
      kept[size_t(d)] = Dim::of(1);
    }
    Location loc = op->getLoc();
    auto build = [&](StringRef opName, ValueRange operands, const TensorSpec &type,
                     std::vector<std::pair<std::string, Attr>> attrs = {}) {
      OperationState state(loc, opName);
      state.addOperands(operands);
      for (const auto &[n, a] : attrs)
        state.addAttribute(n, toMlirAttr(op->getContext(), a));
      state.addTypes(toMlirType(op->getContext(), type));
      return rewriter.create(state)->getResult(0);
    };
    Value v = broadcast.getX();
    TensorSpec at = *in;
    if (lead > 0) {
      at.shape.insert(at.shape.begin(), size_t(lead), Dim::of(1));
      v = build("tc.reshape", v, at, {{"shape", Attr(at.shape)}});
    }
    if (at.shape != kept) {
      at.shape = kept;
      v = build("tc.broadcast_to", v, at, {{"shape", Attr(at.shape)}});
    }
    if (name == "tc.sum" && count != 1) {
      DenseValue n;
      n.dtype = at.dtype;
      isFloat(at.dtype) ? n.floats.push_back(double(count)) : n.ints.push_back(count);
      Value c = build("tc.constant", {}, TensorSpec{at.dtype, {}}, {{"value", Attr(n)}});
      v = build("tc.mul", {v, c}, at);
    }
    if (!keepdim && at.shape != result->shape) {
      at.shape = result->shape;
      v = build("tc.reshape", v, at, {{"shape", Attr(at.shape)}});
    }
    if (v.getType() != op->getResult(0).getType())
      return failure();
    rewriter.replaceOp(op, v);
    return success();
  }
};

struct SimplifyPass : impl::SimplifyPassBase<SimplifyPass> {
  using SimplifyPassBase::SimplifyPassBase;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<RightIdentity<MulOp>>(ctx, 1.0, true);
    patterns.add<RightIdentity<DivOp>>(ctx, 1.0, false);
    patterns.add<RightIdentity<SubOp>>(ctx, 0.0, false);
    patterns.add<RightIdentity<AddOp>>(ctx, 0.0, true);
    patterns.add<DoubleNegation, WidenThenNarrow, PermuteChain, SameBranches, UniformCondition,
                 AttentionWithoutNoOpMask, AttentionCausalMask, OutputLinearUnflatten, ReduceOfBroadcast,
                 TransposedProduct, ReshapeUpToMemory, ReshapeDownFromComputed, PickBeforeUnary<GatherOp>,
                 PickBeforeUnary<SliceOp>>(ctx);
    patterns.add<ViewAsReshape<SqueezeOp>, ViewAsReshape<UnsqueezeOp>, ViewAsReshape<FlattenOp>>(
        ctx);
    for (RegisteredOperationName op : ctx->getRegisteredOperations())
      if (op.getDialectNamespace() == "tc")
        op.getCanonicalizationPatterns(patterns, ctx);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns)))) {
      getOperation()->emitError() << "tensorc-simplify: the rewrites did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tensorc
