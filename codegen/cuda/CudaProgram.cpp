#include "codegen/cuda/CudaProgram.h"

#include "codegen/Program.h"
#include "codegen/cpu/Lowering.h"
#include "codegen/cuda/CudaKernel.h"

using namespace mlir;

namespace tensorc::codegen::cuda {

artifact::Artifact compileCudaArtifact(ModuleOp module, const CudaCompileOptions &options) {
  func::FuncOp fn = singleFunction(module);
  MLIRContext *ctx = module.getContext();
  cpu::loadCpuDialects(*ctx);
  CudaSourceBuilder source(*ctx);
  artifact::Artifact art =
      buildProgram(fn, "tc_" + fn.getName().str() + "_k",
                   [&](const cpu::NestSpec &spec, const cpu::PointFn &point) { return source.addNest(spec, point); },
                   ProgramOptions{/*matmulEpilogues=*/true, /*convAsGemm=*/options.conv == "gemm"});
  art.code = source.source();
  art.target.kind = "cuda";
  art.target.triple = "nvptx64-nvidia-cuda";
  art.target.cpu = options.arch;
  art.options = options.record;
  art.options["conv"] = options.conv;
  return art;
}

} // namespace tensorc::codegen::cuda
