#include "codegen/cpu/CpuProgram.h"

#include "codegen/Program.h"
#include "codegen/cpu/Lowering.h"
#include "ir/core/Error.h"

#include <map>

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
  // Each loop kernel's signature beside it: the loader checks the
  // manifest's steps against them (artifact::loopSignature).
  std::map<std::string, std::string> signatures;
  for (const artifact::Step &s : art.steps) {
    if (s.kind != artifact::Step::Kind::Loop)
      continue;
    std::string signature = artifact::loopSignature(art, s);
    auto [at, added] = signatures.emplace(artifact::loopSignatureSymbol(s.symbol), signature);
    check(added || at->second == signature, "cpu codegen: kernel " + s.symbol + " serves steps of two signatures (" +
                                                at->second + " and " + signature + ")");
  }
  NativeCode code = compileToSharedLibrary(*kernels, options.cpu, signatures);
  art.code = std::move(code.library);
  art.target.kind = "cpu";
  art.target.triple = code.triple;
  art.target.cpu = code.cpu;
  art.target.features = code.features;
  art.options = options.record;
  return art;
}

} // namespace tensorc::codegen::cpu
