// tensorc-channels-last: 16-bit convolutions on channels-last (NHWC) storage.
//
// cuDNN's tensor-core convolution engines compute in NHWC; given NCHW
// tensors they transpose every input and output around the convolution
// (nchwToNhwcKernel / nhwcToNchwKernel: 1.2 of 5.3 ms of timm inception_v3's
// bf16 inference on an H200, 0.57 of 2.6 ms of ResNet-50's), and 1x1
// convolutions over NCHW run as GEMMs on unaligned [C, H*W] slices. This
// rewrites each f16/bf16 conv2d (and its gradients) into its channels_last
// form between explicit permutes,
//
//   conv2d(x, w) -> permute(conv2d(permute(x, nhwc), permute(w, nhwc)) {channels_last}, nchw)
//
// and moves the NHWC -> NCHW permutes down through what follows:
// elementwise ops (per-channel operands such as a batch norm's scale become
// reshapes of them), reductions (a batch norm's statistics, a global
// average pool) and concatenations, until they meet the next convolution's
// NCHW -> NHWC permute and cancel. What stops them (a pooling op, a
// graph output) reads one transposed copy. The arithmetic is the same:
// only where values are stored changes. Only the permutes this pass makes
// (dims [0, 3, 1, 2]) move; a transformer's head permutes are left alone.
// Inference programs only for now (see ChannelsLastPass).
#include "passes/Passes.h"

#include "ir/core/OpSchema.h"
#include "ir/dialect/Conversion.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <array>
#include <numeric>

namespace tensorc {

#define GEN_PASS_DEF_CHANNELSLASTPASS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;
using namespace tensorc::tc;

// NHWC -> NCHW (out.dim(i) = in.dim(kToFirst[i])) and its inverse.
constexpr std::array<int64_t, 4> kToFirst = {0, 3, 1, 2};
constexpr std::array<int64_t, 4> kToLast = {0, 2, 3, 1};

bool isConvolution(StringRef name) {
  return name == "tc.conv2d" || name == "tc.conv2d_backward_input" || name == "tc.conv2d_backward_weight";
}

bool isSixteenBit(Value v) {
  std::optional<TensorSpec> t = toTensorSpec(v.getType());
  return t && (t->dtype == DType::BF16 || t->dtype == DType::F16) && t->rank() == 4;
}

Value build(PatternRewriter &rewriter, Location loc, StringRef opName, ValueRange operands, const TensorSpec &type,
            std::vector<std::pair<std::string, Attr>> attrs = {}) {
  OperationState state(loc, opName);
  state.addOperands(operands);
  for (const auto &[n, a] : attrs)
    state.addAttribute(n, toMlirAttr(rewriter.getContext(), a));
  state.addTypes(toMlirType(rewriter.getContext(), type));
  return rewriter.create(state)->getResult(0);
}

Shape permuted(const Shape &s, ArrayRef<int64_t> perm) {
  Shape out;
  for (int64_t d : perm)
    out.push_back(s[size_t(d)]);
  return out;
}

Value permute(PatternRewriter &rewriter, Location loc, Value x, ArrayRef<int64_t> perm) {
  TensorSpec t = *toTensorSpec(x.getType());
  t.shape = permuted(t.shape, perm);
  return build(rewriter, loc, "tc.permute", x, t, {{"dims", Attr(std::vector<int64_t>(perm.begin(), perm.end()))}});
}

// The permute's dims when it is one of this pass's NHWC -> NCHW permutes.
bool isToFirst(PermuteOp p) {
  ArrayRef<int64_t> dims = p.getDims();
  return dims.size() == 4 && std::equal(dims.begin(), dims.end(), kToFirst.begin());
}

// conv2d / conv2d_backward_input / conv2d_backward_weight on 16-bit NCHW
// operands -> the channels_last op between permutes (its bias, a vector,
// as it is).
struct ToChannelsLast : RewritePattern {
  explicit ToChannelsLast(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isConvolution(op->getName().getStringRef()) || op->getNumResults() != 1)
      return failure();
    if (auto last = op->getAttrOfType<BoolAttr>("channels_last"); last && last.getValue())
      return failure();
    if (!isSixteenBit(op->getOperand(0)) || !isSixteenBit(op->getOperand(1)) || !isSixteenBit(op->getResult(0)))
      return failure();
    Location loc = op->getLoc();
    SmallVector<Value> operands;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      operands.push_back(i < 2 ? permute(rewriter, loc, op->getOperand(i), kToLast) : op->getOperand(i));
    TensorSpec out = *toTensorSpec(op->getResult(0).getType());
    out.shape = permuted(out.shape, kToLast);
    OperationState state(loc, op->getName());
    state.addOperands(operands);
    for (NamedAttribute a : op->getAttrs())
      if (a.getName().getValue() != "channels_last" && !a.getName().getValue().contains('.'))
        state.addAttribute(a.getName(), a.getValue());
    state.addAttribute("channels_last", rewriter.getBoolAttr(true));
    state.addTypes(toMlirType(rewriter.getContext(), out));
    Value stored = rewriter.create(state)->getResult(0);
    rewriter.replaceOp(op, permute(rewriter, loc, stored, kToFirst));
    return success();
  }
};

// permute(permute(x, p), q) -> permute(x, p o q); identity -> x.
struct ComposePermutes : OpRewritePattern<PermuteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PermuteOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getX().getDefiningOp<PermuteOp>();
    if (!inner || op.getDims().size() != 4 || inner.getDims().size() != 4)
      return failure();
    SmallVector<int64_t> composed;
    for (int64_t d : op.getDims())
      composed.push_back(inner.getDims()[size_t(d < 0 ? d + 4 : d)]);
    for (int64_t &d : composed)
      d = d < 0 ? d + 4 : d;
    SmallVector<int64_t> identity(4);
    std::iota(identity.begin(), identity.end(), 0);
    if (composed == identity)
      rewriter.replaceOp(op, inner.getX());
    else
      rewriter.replaceOp(op, permute(rewriter, op.getLoc(), inner.getX(), composed));
    return success();
  }
};

// How an operand of an elementwise op with a 4-D NCHW result takes the
// op's channels-last form: a permute's operand; a rank-0 value as it is; a
// value with at most one dim other than 1 (a per-channel scale, after
// broadcasting) reshaped; another 4-D value (a residual from an NCHW graph
// input or pooling) permuted to NHWC -- one transposed copy, shared with a
// convolution's where it reads the same value; none (a lower-rank value
// varying along several dims).
enum class Form { Permuted, Scalar, Reshaped, Transposed, None };
Form formOf(Value v) {
  if (auto p = v.getDefiningOp<PermuteOp>(); p && isToFirst(p))
    return Form::Permuted;
  std::optional<TensorSpec> t = toTensorSpec(v.getType());
  if (!t || t->rank() > 4)
    return Form::None;
  if (t->rank() == 0)
    return Form::Scalar;
  int notOne = 0;
  for (const Dim &d : t->shape)
    notOne += d != Dim::of(1);
  if (notOne <= 1)
    return Form::Reshaped;
  return t->rank() == 4 ? Form::Transposed : Form::None;
}

Value inChannelsLastOrder(PatternRewriter &rewriter, Location loc, Value v) {
  switch (formOf(v)) {
  case Form::Permuted:
    return v.getDefiningOp<PermuteOp>().getX();
  case Form::Scalar:
    return v;
  case Form::Transposed:
    return permute(rewriter, loc, v, kToLast);
  case Form::Reshaped: {
    TensorSpec t = *toTensorSpec(v.getType());
    Shape extended(size_t(4 - t.rank()), Dim::of(1));
    extended.insert(extended.end(), t.shape.begin(), t.shape.end());
    t.shape = permuted(extended, kToLast);
    return build(rewriter, loc, "tc.reshape", v, t, {{"shape", Attr(t.shape)}});
  }
  case Form::None:
    break;
  }
  return nullptr;
}

bool isElementwise(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (!name.starts_with("tc.") || op->getNumResults() != 1)
    return false;
  const OpSchema *schema = findOpSchema(name.drop_front(3));
  return schema && (schema->category == "unary" || schema->category == "binary" ||
                    schema->category == "elementwise");
}

// f(permute(a), ...) -> permute(f(a, ...)) for elementwise f of a 4-D result.
struct ElementwiseOfPermute : RewritePattern {
  explicit ElementwiseOfPermute(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isElementwise(op))
      return failure();
    std::optional<TensorSpec> result = toTensorSpec(op->getResult(0).getType());
    if (!result || result->rank() != 4)
      return failure();
    bool any = false;
    for (Value v : op->getOperands()) {
      auto p = v.getDefiningOp<PermuteOp>();
      any = any || (p && isToFirst(p));
    }
    if (!any)
      return failure();
    // Every operand must have a channels-last form before anything is built.
    for (Value v : op->getOperands())
      if (formOf(v) == Form::None)
        return failure();
    Location loc = op->getLoc();
    SmallVector<Value> operands;
    for (Value v : op->getOperands())
      operands.push_back(inChannelsLastOrder(rewriter, loc, v));
    OperationState state(loc, op->getName());
    state.addOperands(operands);
    for (NamedAttribute a : op->getAttrs())
      if (!a.getName().getValue().contains('.'))
        state.addAttribute(a.getName(), a.getValue());
    TensorSpec stored = *result;
    stored.shape = permuted(result->shape, kToLast);
    state.addTypes(toMlirType(rewriter.getContext(), stored));
    Value v = rewriter.create(state)->getResult(0);
    rewriter.replaceOp(op, permute(rewriter, loc, v, kToFirst));
    return success();
  }
};

// reduce(permute(a), axes) -> reduce(a, permuted axes), permuted back where
// dims remain out of order (sum, mean, max, min).
struct ReductionOfPermute : RewritePattern {
  explicit ReductionOfPermute(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    StringRef name = op->getName().getStringRef();
    if (name != "tc.sum" && name != "tc.mean" && name != "tc.max" && name != "tc.min")
      return failure();
    auto p = op->getOperand(0).getDefiningOp<PermuteOp>();
    if (!p || !isToFirst(p))
      return failure();
    std::optional<TensorSpec> result = toTensorSpec(op->getResult(0).getType());
    if (!result)
      return failure();
    std::array<bool, 4> reduced{true, true, true, true};
    if (auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes")) {
      reduced.fill(false);
      for (int64_t a : axes.asArrayRef())
        reduced[size_t(a < 0 ? a + 4 : a)] = true;
    }
    auto keepdimAttr = op->getAttrOfType<BoolAttr>("keepdim");
    const bool keepdim = keepdimAttr && keepdimAttr.getValue();
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < 4; ++d)
      if (reduced[size_t(kToLast[size_t(d)])])
        axes.push_back(d); // stored dim d is NCHW dim kToLast[d]
    // The kept NCHW dims in stored order, and the permute back to NCHW order.
    std::vector<int64_t> kept; // NCHW dims, in stored order
    for (int64_t d = 0; d < 4; ++d)
      if (!reduced[size_t(kToLast[size_t(d)])])
        kept.push_back(kToLast[size_t(d)]);
    Location loc = op->getLoc();
    TensorSpec stored = *result;
    std::optional<TensorSpec> input = toTensorSpec(p.getX().getType());
    if (!input)
      return failure();
    Shape storedShape = input->shape;
    if (keepdim) {
      for (int64_t d : axes)
        storedShape[size_t(d)] = Dim::of(1);
    } else {
      Shape s;
      for (int64_t d = 0; d < 4; ++d)
        if (std::find(axes.begin(), axes.end(), d) == axes.end())
          s.push_back(storedShape[size_t(d)]);
      storedShape = s;
    }
    stored.shape = storedShape;
    OperationState state(loc, op->getName());
    state.addOperands(p.getX());
    for (NamedAttribute a : op->getAttrs())
      if (a.getName().getValue() != "axes" && !a.getName().getValue().contains('.'))
        state.addAttribute(a.getName(), a.getValue());
    state.addAttribute("axes", rewriter.getDenseI64ArrayAttr(axes));
    state.addTypes(toMlirType(rewriter.getContext(), stored));
    Value v = rewriter.create(state)->getResult(0);
    if (keepdim) {
      v = permute(rewriter, loc, v, kToFirst);
    } else if (!std::is_sorted(kept.begin(), kept.end())) {
      // kept[k] is the NCHW dim at stored position k: the result wants them sorted.
      std::vector<int64_t> order(kept.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return kept[size_t(a)] < kept[size_t(b)]; });
      TensorSpec t = stored;
      Shape s;
      for (int64_t k : order)
        s.push_back(stored.shape[size_t(k)]);
      t.shape = s;
      v = build(rewriter, loc, "tc.permute", v, t, {{"dims", Attr(order)}});
    }
    if (v.getType() != op->getResult(0).getType())
      return failure();
    rewriter.replaceOp(op, v);
    return success();
  }
};

// concat(permute(a), permute(b), ..., axis) -> permute(concat(a, b, ..., stored axis)).
struct ConcatOfPermutes : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op, PatternRewriter &rewriter) const override {
    SmallVector<Value> inputs;
    for (Value v : op->getOperands()) {
      auto p = v.getDefiningOp<PermuteOp>();
      if (!p || !isToFirst(p))
        return failure();
      inputs.push_back(p.getX());
    }
    std::optional<TensorSpec> result = toTensorSpec(op.getType());
    if (inputs.empty() || !result || result->rank() != 4)
      return failure();
    int64_t axis = op.getAxis();
    axis = axis < 0 ? axis + 4 : axis;
    TensorSpec stored = *result;
    stored.shape = permuted(result->shape, kToLast);
    int64_t storedAxis = kToFirst[size_t(axis)]; // NCHW dim `axis` is stored dim kToFirst[axis]
    Value v = build(rewriter, op.getLoc(), "tc.concat", inputs, stored, {{"axis", Attr(storedAxis)}});
    rewriter.replaceOp(op, permute(rewriter, op.getLoc(), v, kToFirst));
    return success();
  }
};

// How many of the function's results are NHWC values permuted back to NCHW
// (each a transposed copy written for the caller).
int64_t transposedResults(ModuleOp module) {
  int64_t n = 0;
  module.walk([&](func::ReturnOp ret) {
    for (Value v : ret.getOperands())
      if (auto p = v.getDefiningOp<PermuteOp>(); p && isToFirst(p))
        ++n;
  });
  return n;
}

struct ChannelsLastPass : impl::ChannelsLastPassBase<ChannelsLastPass> {
  using ChannelsLastPassBase::ChannelsLastPassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Not for training programs yet: a training step's saved activations
    // cross between its forward and backward programs as NCHW values, so
    // each would be transposed twice (written by the forward, read by the
    // backward): ResNet-50's AMP training step (H200) went from ~24 to 39
    // ms. A program with convolution gradients is left as it is, and so is
    // one that would return more than two transposed 4-D values (a
    // forward saving its activations).
    bool gradients = false;
    module.walk([&](Operation *op) {
      StringRef name = op->getName().getStringRef();
      gradients = gradients || name == "tc.conv2d_backward_input" || name == "tc.conv2d_backward_weight";
    });
    if (gradients)
      return;
    MLIRContext *ctx = &getContext();
    ModuleOp rewritten = module.clone();
    RewritePatternSet patterns(ctx);
    patterns.add<ToChannelsLast, ComposePermutes, ElementwiseOfPermute, ReductionOfPermute, ConcatOfPermutes>(
        ctx);
    if (failed(applyPatternsAndFoldGreedily(rewritten, std::move(patterns)))) {
      rewritten->erase();
      module->emitError() << "tensorc-channels-last: the rewrites did not converge";
      signalPassFailure();
      return;
    }
    if (transposedResults(rewritten) <= 2)
      module.getBodyRegion().takeBody(rewritten.getBodyRegion());
    rewritten->erase();
  }
};

} // namespace
} // namespace tensorc
