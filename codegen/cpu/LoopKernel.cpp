#include "codegen/cpu/LoopKernel.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"
#include "ir/dialect/Conversion.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace mlir;

namespace tensorc::codegen::cpu {

void loadCpuDialects(MLIRContext &ctx) {
  ctx.loadDialect<func::FuncDialect, linalg::LinalgDialect, arith::ArithDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect, cf::ControlFlowDialect,
                  LLVM::LLVMDialect>();
}

namespace {

const std::set<std::string> &supported() {
  static const std::set<std::string> ops = {
      "neg",  "abs",  "exp",  "log", "sqrt", "rsqrt",   "reciprocal", "tanh",  "sigmoid",
      "relu", "gelu", "silu", "sin", "cos",  "erf",     "floor",      "ceil",  "sign",
      "add",  "sub",  "mul",  "div", "pow",  "maximum", "minimum",    "where", "eq",
      "ne",   "lt",   "le",   "gt",  "ge",   "clamp"};
  return ops;
}

// The type values are stored in memory; integer storage types come with
// integer kernels, which codegen does not emit yet.
Type elementType(MLIRContext *ctx, DType d) {
  check(isFloat(d) || d == DType::I1,
        "cpu codegen: dtype " + std::string(dtypeName(d)) + " is not supported yet");
  return tc::toMlirElementType(ctx, d);
}

// The type values are computed in: f16 and bf16 widen to f32 inside the
// kernel and round once when stored.
Type computeType(MLIRContext *ctx, DType d) {
  return d == DType::F16 || d == DType::BF16 ? Builder(ctx).getF32Type() : elementType(ctx, d);
}

MemRefType memrefOf(MLIRContext *ctx, const TensorSpec &spec) {
  SmallVector<int64_t> shape;
  // A symbolic dim is a dynamic memref dim: its size comes in the descriptor,
  // so one kernel serves every size.
  for (const Dim &d : spec.shape)
    shape.push_back(d.isStatic() ? d.value() : ShapedType::kDynamic);
  return MemRefType::get(shape, elementType(ctx, spec.dtype));
}

// The scalar computation of one elementwise op.
Value scalarOp(OpBuilder &b, Location loc, const TypedNode &n, ArrayRef<Value> a) {
  const std::string &op = n.node->op;
  Type t = a.empty() ? Type() : a[0].getType();
  auto c = [&](double v, Type type) {
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(type, v)).getResult();
  };
  auto sigmoid = [&](Value x) {
    Value e = b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, x));
    return b.create<arith::DivFOp>(loc, c(1, t), b.create<arith::AddFOp>(loc, c(1, t), e))
        .getResult();
  };
  if (op == "neg")
    return b.create<arith::NegFOp>(loc, a[0]);
  if (op == "abs")
    return b.create<math::AbsFOp>(loc, a[0]);
  if (op == "exp")
    return b.create<math::ExpOp>(loc, a[0]);
  if (op == "log")
    return b.create<math::LogOp>(loc, a[0]);
  if (op == "sqrt")
    return b.create<math::SqrtOp>(loc, a[0]);
  if (op == "rsqrt")
    return b.create<arith::DivFOp>(loc, c(1, t), b.create<math::SqrtOp>(loc, a[0]));
  if (op == "reciprocal")
    return b.create<arith::DivFOp>(loc, c(1, t), a[0]);
  if (op == "tanh")
    return b.create<math::TanhOp>(loc, a[0]);
  if (op == "sigmoid")
    return sigmoid(a[0]);
  if (op == "relu") {
    // relu(nan) = nan; relu(-0) = 0.
    Value positive = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UGT, a[0], c(0, t));
    return b.create<arith::SelectOp>(loc, positive, a[0], c(0, t));
  }
  if (op == "silu")
    return b.create<arith::MulFOp>(loc, a[0], sigmoid(a[0]));
  if (op == "gelu") {
    Value x = a[0];
    if (getEnum(n.attrs, "approximate") == "tanh") {
      Value x3 = b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, x), x);
      Value inner = b.create<arith::MulFOp>(
          loc, b.create<arith::AddFOp>(loc, x, b.create<arith::MulFOp>(loc, x3, c(0.044715, t))),
          c(std::sqrt(2.0 / M_PI), t));
      Value th = b.create<math::TanhOp>(loc, inner);
      return b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, c(0.5, t)),
                                     b.create<arith::AddFOp>(loc, c(1, t), th));
    }
    Value e = b.create<math::ErfOp>(loc, b.create<arith::MulFOp>(loc, x, c(1 / std::sqrt(2.0), t)));
    return b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, c(0.5, t)),
                                   b.create<arith::AddFOp>(loc, c(1, t), e));
  }
  if (op == "sin")
    return b.create<math::SinOp>(loc, a[0]);
  if (op == "cos")
    return b.create<math::CosOp>(loc, a[0]);
  if (op == "erf")
    return b.create<math::ErfOp>(loc, a[0]);
  if (op == "floor")
    return b.create<math::FloorOp>(loc, a[0]);
  if (op == "ceil")
    return b.create<math::CeilOp>(loc, a[0]);
  if (op == "sign") {
    Value pos = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, a[0], c(0, t));
    Value neg = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, a[0], c(0, t));
    Value zeroOrNan = b.create<arith::MulFOp>(loc, a[0], c(0, t)); // 0 for zeros, nan for nan
    return b.create<arith::SelectOp>(loc, pos, c(1, t),
                                     b.create<arith::SelectOp>(loc, neg, c(-1, t), zeroOrNan));
  }
  if (op == "add")
    return b.create<arith::AddFOp>(loc, a[0], a[1]);
  if (op == "sub")
    return b.create<arith::SubFOp>(loc, a[0], a[1]);
  if (op == "mul")
    return b.create<arith::MulFOp>(loc, a[0], a[1]);
  if (op == "div")
    return b.create<arith::DivFOp>(loc, a[0], a[1]);
  if (op == "pow")
    return b.create<math::PowFOp>(loc, a[0], a[1]);
  if (op == "maximum")
    return b.create<arith::MaximumFOp>(loc, a[0], a[1]);
  if (op == "minimum")
    return b.create<arith::MinimumFOp>(loc, a[0], a[1]);
  if (op == "where")
    return b.create<arith::SelectOp>(loc, a[0], a[1], a[2]);
  static const std::map<std::string, arith::CmpFPredicate> compares = {
      {"eq", arith::CmpFPredicate::OEQ}, {"ne", arith::CmpFPredicate::UNE},
      {"lt", arith::CmpFPredicate::OLT}, {"le", arith::CmpFPredicate::OLE},
      {"gt", arith::CmpFPredicate::OGT}, {"ge", arith::CmpFPredicate::OGE}};
  if (compares.count(op))
    return b.create<arith::CmpFOp>(loc, compares.at(op), a[0], a[1]);
  if (op == "clamp") {
    Value v = a[0];
    // min(max(x, lo), hi) with nan kept: compare-and-select.
    if (hasAttr(n.attrs, "min")) {
      Value lo = c(getFloat(n.attrs, "min"), t);
      v = b.create<arith::SelectOp>(
          loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, v, lo), lo, v);
    }
    if (hasAttr(n.attrs, "max")) {
      Value hi = c(getFloat(n.attrs, "max"), t);
      v = b.create<arith::SelectOp>(
          loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, v, hi), hi, v);
    }
    return v;
  }
  fail("cpu codegen: op '" + op + "' is not supported yet");
}

} // namespace

bool isSupportedElementwiseOp(const std::string &op) { return supported().count(op) != 0; }

OwningOpRef<ModuleOp> buildLoopKernel(MLIRContext &ctx, const Graph &graph,
                                      const std::string &name) {
  loadCpuDialects(ctx);
  GraphAnalysis analysis = analyzeGraph(graph, "cpu codegen " + name);
  check(graph.outputs.size() == 1, "cpu codegen: a kernel has one output");
  const TensorSpec &outSpec = analysis.outputs[0];
  // A final reduction makes the loop nest iterate over its input's shape,
  // with the reduced dims as reduction iterators.
  const TypedNode *reduction = nullptr;
  static const std::set<std::string> reductions = {"sum", "mean", "max", "min", "prod"};
  if (!analysis.nodes.empty() && reductions.count(analysis.nodes.back().node->op) &&
      parseValueRef(graph.outputs[0]).producer == analysis.nodes.back().node->name)
    reduction = &analysis.nodes.back();
  const TensorSpec &space = reduction ? *reduction->argTypes[0] : outSpec;
  int64_t rank = space.rank();
  std::vector<int64_t> axes;
  if (reduction)
    axes = normalizeAxes(reduction->attrs, "axes", rank);
  auto isReduced = [&](int64_t d) { return std::find(axes.begin(), axes.end(), d) != axes.end(); };
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  SmallVector<Type> argTypes;
  for (const GraphInput &in : graph.inputs)
    argTypes.push_back(memrefOf(&ctx, in.spec));
  argTypes.push_back(memrefOf(&ctx, outSpec));
  auto fn = b.create<func::FuncOp>(loc, name, b.getFunctionType(argTypes, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  // Each input reads through a map that broadcasts it to the iteration space.
  SmallVector<AffineMap> maps;
  SmallVector<Value> inputs;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const Shape &s = graph.inputs[i].spec.shape;
    check(int64_t(s.size()) <= rank, "cpu codegen: input of higher rank than the loop nest");
    SmallVector<AffineExpr> exprs;
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t dim = rank - int64_t(s.size()) + int64_t(d);
      exprs.push_back(s[d] == Dim::of(1) && space.shape[dim] != Dim::of(1)
                          ? b.getAffineConstantExpr(0)
                          : b.getAffineDimExpr(dim));
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, &ctx));
    inputs.push_back(entry->getArgument(i));
  }
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iterators;
  bool keepdim = reduction && getBool(reduction->attrs, "keepdim");
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = reduction && isReduced(d);
    iterators.push_back(reduced ? utils::IteratorType::reduction : utils::IteratorType::parallel);
    if (!reduced)
      outExprs.push_back(b.getAffineDimExpr(d));
    else if (keepdim)
      outExprs.push_back(b.getAffineConstantExpr(0));
  }
  maps.push_back(AffineMap::get(rank, 0, outExprs, &ctx));
  Value out = entry->getArguments().back();
  Type outElement = elementType(&ctx, outSpec.dtype);
  std::string combine = reduction ? reduction->node->op : "";
  if (reduction) {
    check(isFloat(outSpec.dtype), "cpu codegen: reductions of integers are not supported yet");
    check(outSpec.dtype == DType::F32 || outSpec.dtype == DType::F64,
          "cpu codegen: f16/bf16 reductions (which need an f32 accumulator) are not supported yet");
    double identity = combine == "prod"  ? 1.0
                      : combine == "max" ? -INFINITY
                      : combine == "min" ? INFINITY
                                         : 0.0;
    Value init = b.create<arith::ConstantOp>(loc, b.getFloatAttr(outElement, identity));
    b.create<linalg::FillOp>(loc, ValueRange{init}, ValueRange{out});
  }
  b.create<linalg::GenericOp>(
      loc, TypeRange{}, inputs, ValueRange{out}, maps, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        std::map<std::string, Value> values;
        for (size_t i = 0; i < graph.inputs.size(); ++i)
          values[graph.inputs[i].name] =
              args[i].getType() == computeType(&ctx, graph.inputs[i].spec.dtype)
                  ? args[i]
                  : nb.create<arith::ExtFOp>(l, computeType(&ctx, graph.inputs[i].spec.dtype),
                                             args[i])
                        .getResult();
        for (const TypedNode &n : analysis.nodes) {
          if (&n == reduction)
            break;
          check(isSupportedElementwiseOp(n.node->op),
                "cpu codegen: op '" + n.node->op + "' is not supported yet");
          SmallVector<Value> operands;
          for (size_t k = 0; k < n.argTypes.size(); ++k) {
            const Arg &a = n.node->args[k];
            if (a.kind == Arg::Kind::Value) {
              operands.push_back(values.at(a.value));
            } else {
              Type t = computeType(&ctx, n.argTypes[k]->dtype);
              double v = a.literal.kind == Literal::Kind::Float ? a.literal.floatValue
                                                                : double(a.literal.intValue);
              operands.push_back(nb.create<arith::ConstantOp>(l, nb.getFloatAttr(t, v)));
            }
          }
          values[n.node->name] = scalarOp(nb, l, n, operands);
        }
        if (!reduction) {
          Value result = values.at(graph.outputs[0]);
          if (result.getType() != outElement)
            result = nb.create<arith::TruncFOp>(l, outElement, result);
          nb.create<linalg::YieldOp>(l, result);
          return;
        }
        Value x = values.at(reduction->node->args[0].value), acc = args.back();
        Value next = combine == "prod"  ? nb.create<arith::MulFOp>(l, acc, x).getResult()
                     : combine == "max" ? nb.create<arith::MaximumFOp>(l, acc, x).getResult()
                     : combine == "min" ? nb.create<arith::MinimumFOp>(l, acc, x).getResult()
                                        : nb.create<arith::AddFOp>(l, acc, x).getResult();
        nb.create<linalg::YieldOp>(l, next);
      });
  if (combine == "mean") {
    // Divide by the number of reduced elements.
    Dim count = Dim::of(1);
    for (int64_t a : axes)
      count = count * space.shape[a];
    check(count.isStatic(), "cpu codegen: mean over a symbolic dim is not supported yet");
    Value n = b.create<arith::ConstantOp>(loc, b.getFloatAttr(outElement, double(count.value())));
    AffineMap id = AffineMap::getMultiDimIdentityMap(outSpec.rank(), &ctx);
    b.create<linalg::GenericOp>(
        loc, TypeRange{}, ValueRange{}, ValueRange{out}, ArrayRef<AffineMap>{id},
        SmallVector<utils::IteratorType>(outSpec.rank(), utils::IteratorType::parallel),
        [&](OpBuilder &nb, Location l, ValueRange args) {
          nb.create<linalg::YieldOp>(l, nb.create<arith::DivFOp>(l, args[0], n).getResult());
        });
  }
  b.create<func::ReturnOp>(loc);
  return module;
}

void lowerToLLVMDialect(ModuleOp module) {
  // exp, tanh, erf, ... as polynomial approximations (a few ulps in f32)
  // instead of scalar libm calls, so loops stay call-free and vectorizable.
  {
    RewritePatternSet patterns(module.getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    check(succeeded(applyPatternsAndFoldGreedily(module, std::move(patterns))),
          "cpu codegen: math approximation failed");
  }
  PassManager pm(module.getContext());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  std::string message;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (message.empty())
      message = d.str();
    return success();
  });
  check(succeeded(pm.run(module)), "cpu codegen: lowering to LLVM failed: " + message);
}

} // namespace tensorc::codegen::cpu
