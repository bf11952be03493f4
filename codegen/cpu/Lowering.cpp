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

NativeCode compileToSharedLibrary(ModuleOp module, const std::string &cpu) {
  lowerToLLVMDialect(module);
  ObjectCode object = emitObject(module, cpu);
  return {linkSharedLibrary({object.object}), object.triple, object.cpu, object.features};
}

} // namespace tensorc::codegen::cpu
