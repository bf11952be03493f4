// tensorc-opt: MlirOptMain with the tc dialect and tensorc's passes, for lit
// tests and for running single passes by hand.
#include "compiler/transforms/BackendPipelines.h"
#include "ir/dialect/TCDialect.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  tensorc::registerTensorcPasses();
  tensorc::registerTensorcPipelines();
  tensorc::registerBackendPipelines();
  mlir::DialectRegistry registry;
  registry.insert<tensorc::tc::TCDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tensorc optimizer driver\n", registry));
}
