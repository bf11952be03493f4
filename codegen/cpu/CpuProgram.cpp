#include "codegen/cpu/CpuProgram.h"

#include "codegen/Program.h"
#include "codegen/cpu/Lowering.h"

using namespace mlir;

namespace tensorc::codegen::cpu {

bool cpuSupportsOp(const std::string &op) { return supportsOp(op); }

artifact::Artifact compileCpuArtifact(ModuleOp module, const CpuCompileOptions &options) {
  func::FuncOp fn = singleFunction(module);
  MLIRContext *ctx = module.getContext();
  loadCpuDialects(*ctx);
  OwningOpRef<ModuleOp> kernels = ModuleOp::create(UnknownLoc::get(ctx));
  artifact::Artifact art = buildProgram(
      fn, "tc_" + fn.getName().str() + "_nest",
      [&](const NestSpec &spec, const PointFn &point) {
        emitLoopNest(*kernels, spec, point);
        return std::vector<artifact::KernelVariant>{};
      },
      options.program);
  NativeCode code = compileToSharedLibrary(*kernels, options.cpu);
  art.code = std::move(code.library);
  art.target.kind = "cpu";
  art.target.triple = code.triple;
  art.target.cpu = code.cpu;
  art.target.features = code.features;
  art.options = options.record;
  return art;
}

} // namespace tensorc::codegen::cpu
