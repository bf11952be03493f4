#include "passes/Pipelines.h"

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace tensorc {

void buildSimplifyPipeline(mlir::OpPassManager &pm, const PipelineOptions &) {
  pm.addPass(createSimplifyPass());
  pm.addPass(mlir::createCSEPass());
}

void buildKernelPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  buildSimplifyPipeline(pm, options);
  FusionPassOptions fusion;
  fusion.report = options.report;
  pm.addPass(createFusionPass(fusion));
  pm.addPass(createSchedulePass());
  MemoryPlanPassOptions memory;
  memory.report = options.report;
  pm.addPass(createMemoryPlanPass(memory));
}

void registerTensorcPipelines() {

  static mlir::PassPipelineRegistration<> kernel(
      "tensorc-kernel-pipeline", "simplify, CSE and fusion into kernels",
      [](mlir::OpPassManager &pm) { buildKernelPipeline(pm); });
  static mlir::PassPipelineRegistration<> simplify(
      "tensorc-simplify-pipeline", "tensorc's target-independent cleanup",
      [](mlir::OpPassManager &pm) { buildSimplifyPipeline(pm); });
}

} // namespace tensorc
