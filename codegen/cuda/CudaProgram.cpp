#include "codegen/cuda/CudaProgram.h"

#include "codegen/Program.h"
#include "codegen/cpu/Lowering.h"
#include "codegen/cuda/CudaKernel.h"

#include <set>

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
                   ProgramOptions{/*matmulEpilogues=*/true, /*convAsGemm=*/options.conv == "gemm",
                                  /*integerMatmulAsNest=*/true, /*splitColumnReductions=*/true},
                   [&](DType dtype, int paddedHeadDim, bool causal) {
                     return source.addAttention("tc_" + fn.getName().str(), dtype, paddedHeadDim, causal);
                   });
  for (const artifact::Step &st : art.steps)
    if (st.kind == artifact::Step::Kind::Attention) {
      if (!st.attention.backward) {
        source.requireAttentionKernel(st.symbol, "FWD");
        continue;
      }
      source.requireAttentionKernel(st.symbol, st.attention.savedForward ? "BWD_Q_SAVED" : "BWD_Q");
      source.requireAttentionKernel(st.symbol, "BWD_KV");
    }
  // Chains of loop steps over the same rows also get one fused kernel
  // (the runtime chooses between it and the steps' own kernels).
  std::vector<std::string> symbols;
  for (const artifact::SymbolDecl &d : art.symbols)
    symbols.push_back(d.name);
  for (size_t first = 0; first < art.steps.size();) {
    size_t last = first;
    while (art.steps[last].chainNext && last + 1 < art.steps.size())
      ++last;
    if (last > first) {
      std::vector<ChainedNest> nests;
      for (size_t i = first; i <= last; ++i) {
        ChainedNest n{art.steps[i].symbol, {}};
        for (int o : art.steps[i].operands)
          n.operands.push_back(art.values[size_t(o)].dtype);
        nests.push_back(n);
      }
      artifact::Step &head = art.steps[first];
      head.chainKernel = head.symbol + "_chain";
      head.chainVariants = source.addChain(head.chainKernel, nests, symbols, head.extent);
    }
    first = last + 1;
  }
  std::set<DType> columnSums;
  for (const artifact::Step &st : art.steps)
    if (st.epilogue.biasGradient)
      columnSums.insert(art.values[size_t(st.operands[2])].dtype);
  for (DType d : columnSums)
    source.addColumnSums("tc_" + art.function, d); // per program: TUs may be combined
  art.code = source.source();
  art.target.kind = "cuda";
  art.target.triple = "nvptx64-nvidia-cuda";
  art.target.cpu = options.arch;
  art.options = options.record;
  art.options["conv"] = options.conv;
  return art;
}

} // namespace tensorc::codegen::cuda
