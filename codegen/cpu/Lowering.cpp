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
// f32 precision for |x| up to about 1e15. Beyond, Payne-Hanek: x = M * 2^E
// (M the 24-bit significand), and x / 2pi mod 1 is M times the bits of
// 1/2pi after its first E, a 128-bit window of them (bits further on move
// the result by under 2^-100): the window's product with M, mod 2^128, is
// the fraction (sin(3e38) was inf; glibc's and PyTorch's are exact).
// Both reductions run branch-free and one is selected, so loops vectorize.
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
    r = b.create<arith::SelectOp>(loc, isLarge(b, loc, x), payneHanek(b, loc, x), r);
    Value reduced = b.create<arith::TruncFOp>(loc, b.getF32Type(), r);
    auto result = b.create<OpTy>(loc, reduced);
    result->setAttr("tc.reduced", b.getUnitAttr());
    b.replaceOp(op, result.getResult());
    return success();
  }

  // 2^50 <= |x| < inf: where Cody-Waite's two-part 2pi stops being exact.
  static Value isLarge(PatternRewriter &b, Location loc, Value x) {
    Value a = b.create<math::AbsFOp>(loc, x);
    auto f32 = [&](double v) { return b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(float(v))).getResult(); };
    return b.create<arith::AndIOp>(loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, a, f32(0x1p50)),
                                   b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, a, f32(INFINITY)));
  }

  // x reduced to [-pi, pi] (f64) through the bits of 1/2pi (finite f32 x,
  // |x| >= 2^24; the caller selects it only for |x| >= 2^50).
  static Value payneHanek(PatternRewriter &b, Location loc, Value x) {
    Type i64 = b.getI64Type(), f64 = b.getF64Type();
    auto c32 = [&](int64_t v) { return b.create<arith::ConstantOp>(loc, b.getI32IntegerAttr(int32_t(v))).getResult(); };
    auto c64 = [&](uint64_t v) { return b.create<arith::ConstantOp>(loc, b.getI64IntegerAttr(int64_t(v))).getResult(); };
    auto d = [&](double v) { return b.create<arith::ConstantOp>(loc, b.getF64FloatAttr(v)).getResult(); };
    // 1/2pi = 0x0.28be60db9391054a 7f09d5f47d4d3770 36d8a5664f10e410 7f9458eaf7aef158...
    static const uint64_t kInverse2Pi[4] = {0x28be60db9391054aULL, 0x7f09d5f47d4d3770ULL, 0x36d8a5664f10e410ULL,
                                            0x7f9458eaf7aef158ULL};
    Value bits = b.create<arith::BitcastOp>(loc, b.getI32Type(), x);
    Value biased = b.create<arith::AndIOp>(loc, b.create<arith::ShRUIOp>(loc, bits, c32(23)), c32(0xff));
    Value m = b.create<arith::ExtUIOp>(
        loc, i64, b.create<arith::OrIOp>(loc, b.create<arith::AndIOp>(loc, bits, c32(0x7fffff)), c32(0x800000)));
    // x = m * 2^e, e = biased - 150: skip the first e bits of 1/2pi (their
    // products with m are integers), within [0, 105] for finite x.
    Value e = b.create<arith::MinSIOp>(loc, b.create<arith::MaxSIOp>(loc, b.create<arith::SubIOp>(loc, biased, c32(150)), c32(0)),
                                       c32(105));
    Value skip = b.create<arith::ExtUIOp>(loc, i64, e);
    Value first = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, skip, c64(64));
    auto word = [&](int i) {
      return b.create<arith::SelectOp>(loc, first, c64(kInverse2Pi[i]), c64(kInverse2Pi[i + 1])).getResult();
    };
    Value w0 = word(0), w1 = word(1), w2 = word(2);
    Value shift = b.create<arith::RemUIOp>(loc, skip, c64(64)), back = b.create<arith::SubIOp>(loc, c64(63), shift);
    // (a << s) | (b >> (64 - s)), the right shift in two steps (a shift by 64 is poison).
    auto window = [&](Value a, Value c) {
      Value right = b.create<arith::ShRUIOp>(loc, b.create<arith::ShRUIOp>(loc, c, c64(1)), back);
      return b.create<arith::OrIOp>(loc, b.create<arith::ShLIOp>(loc, a, shift), right).getResult();
    };
    Value hi = window(w0, w1), lo = window(w1, w2);
    // The fraction's top 64 bits: (m * hi mod 2^64) + the high half of m * lo.
    auto low = b.create<arith::MulUIExtendedOp>(loc, m, lo);
    Value top = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, m, hi), low.getHigh());
    Value fraction = b.create<arith::MulFOp>(loc, b.create<arith::UIToFPOp>(loc, f64, top), d(0x1p-64));
    Value r = b.create<arith::MulFOp>(loc, fraction, d(6.283185307179586));
    r = b.create<arith::SelectOp>(loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, r, d(3.141592653589793)),
                                  b.create<arith::SubFOp>(loc, r, d(6.283185307179586)), r);
    Value negative = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, x,
                                             b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f)));
    return b.create<arith::SelectOp>(loc, negative, b.create<arith::NegFOp>(loc, r), r);
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
