#include "codegen/cpu/Lowering.h"

#include "codegen/cpu/SharedLibrary.h"
#include "ir/core/Error.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace tensorc::codegen::cpu {

void loadCpuDialects(MLIRContext &ctx) {
  ctx.loadDialect<func::FuncDialect, arith::ArithDialect, math::MathDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect>();
}

namespace {

// f32 sin/cos reduced to [-pi, pi] in f64 before the polynomial
// approximation: its own one-constant reduction is only good for small
// arguments (cos(1e5) was off by 1e-3, cos(1.5e35) gave 1). x is exact in
// f64; r = x - k*2pi with 2pi split in two (Cody-Waite, fma) is exact to
// f32 precision for |x| up to about 1e15.
template <typename OpTy> struct ReduceTrigArgument : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &b) const override {
    Value x = op.getOperand();
    if (!x.getType().isF32() || op->hasAttr("tc.reduced"))
      return failure();
    Location loc = op.getLoc();
    auto f64 = [&](double v) {
      return b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(v)).getResult();
    };
    Value wide = b.create<arith::ExtFOp>(loc, b.getF64Type(), x);
    Value k = b.create<math::RoundEvenOp>(
        loc, b.create<arith::MulFOp>(loc, wide, f64(0.15915494309189535)));
    Value negK = b.create<arith::NegFOp>(loc, k);
    Value r = b.create<math::FmaOp>(loc, negK, f64(6.283185307179586), wide);
    r = b.create<math::FmaOp>(loc, negK, f64(2.4492935982947064e-16), r);
    Value reduced = b.create<arith::TruncFOp>(loc, b.getF32Type(), r);
    auto result = b.create<OpTy>(loc, reduced);
    result->setAttr("tc.reduced", b.getUnitAttr());
    b.replaceOp(op, result.getResult());
    return success();
  }
};

} // namespace

void lowerToLLVMDialect(ModuleOp module) {
  std::string message;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (message.empty())
      message = d.str();
    return success();
  });
  {
    // exp, tanh, erf, ... as polynomial approximations (a few ulps in f32)
    // instead of scalar libm calls, so loops stay call-free and vectorize;
    // bf16 conversions as integer ops (no compiler-rt helpers needed).
    {
      RewritePatternSet trig(module.getContext());
      trig.add<ReduceTrigArgument<math::SinOp>, ReduceTrigArgument<math::CosOp>>(module.getContext());
      check(succeeded(applyPatternsAndFoldGreedily(module, std::move(trig))),
            "cpu codegen: trig argument reduction failed: " + message);
    }
    RewritePatternSet patterns(module.getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    arith::populateExpandBFloat16Patterns(patterns);
    check(succeeded(applyPatternsAndFoldGreedily(module, std::move(patterns))),
          "cpu codegen: math approximation failed: " + message);
  }
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
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
  check(succeeded(pm.run(module)), "cpu codegen: lowering to LLVM failed: " + message);
}

NativeCode compileToSharedLibrary(ModuleOp module, const std::string &cpu,
                                  const std::map<std::string, std::string> &constants) {
  lowerToLLVMDialect(module);
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  for (const auto &[name, text] : constants) {
    std::string bytes = text + '\0';
    auto type = LLVM::LLVMArrayType::get(IntegerType::get(module.getContext(), 8), unsigned(bytes.size()));
    b.create<LLVM::GlobalOp>(module.getLoc(), type, /*isConstant=*/true, LLVM::Linkage::External, name,
                             b.getStringAttr(bytes));
  }
  ObjectCode object = emitObject(module, cpu);
  return {linkSharedLibrary(object.objects), object.triple, object.cpu, object.features};
}

} // namespace tensorc::codegen::cpu
