#include "compiler/transforms/BackendPipelines.h"

#include "compiler/transforms/Decompose.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace tensorc {

void buildCpuPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  if (options.runChecks)
    pm.addPass(createRunChecksPass());
  pm.addPass(createFoldConstantsPass());
  buildSimplifyPipeline(pm, options);
  // Everything but conv2d's bias (the direct nest adds it as it stores).
  auto list = [](bool directGradients) {
    std::vector<std::string> v;
    for (const std::string &op : transforms::decomposableOps())
      if (op != "conv2d" &&
          !(directGradients && (op == "conv2d_backward_input" || op == "conv2d_backward_weight")))
        v.push_back(op);
    return v;
  };
  static const std::vector<std::string> ops = list(false), opsWithDirectGradients = list(true);
  DecomposePassOptions decompose;
  decompose.ops = options.directConvolutionGradients ? opsWithDirectGradients : ops;
  pm.addPass(createDecomposePass(decompose));
  buildKernelPipeline(pm, options);
}

void buildCudaPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  if (options.runChecks)
    pm.addPass(createRunChecksPass());
  pm.addPass(createRecognizeAttentionPass());
  pm.addPass(createFoldConstantsPass());
  buildSimplifyPipeline(pm, options);
  // The options hold an ArrayRef: the list must outlive this statement (a
  // braced list here dangled; found by ASan).
  static const std::vector<std::string> ops = {"gelu", "silu", "var"};
  DecomposePassOptions decompose;
  decompose.ops = ops;
  pm.addPass(createDecomposePass(decompose));
  pm.addPass(createPadMatmulsPass());
  buildKernelPipeline(pm, options);
}

void buildCudaCodegenPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  if (options.runChecks)
    pm.addPass(createRunChecksPass());
  // Hand-written attention (PyTorch models' softmax(q k^T / sqrt(d)) v with
  // a tril mask, as the exporter writes it) runs as the fused attention:
  // `tensorc grad` and `compile --train` recognize it before
  // differentiating; an inference compile only here.
  pm.addPass(createRecognizeAttentionPass());
  pm.addPass(createFoldConstantsPass());
  buildSimplifyPipeline(pm, options);
  // gelu stays whole: GEMM epilogues absorb gelu(tanh); both forms are scalar ops.
  // logsumexp too: its nests keep the max and the rescaled sum in one pass
  // (online), and softmax, log_softmax and cross_entropy decompose into it.
  // With a convolution library, conv2d's gradients stay whole and its bias
  // splits off; without, the bias stays in the GEMM's epilogue.
  auto list = [](bool convolutionLibrary) {
    std::vector<std::string> v;
    for (const std::string &op : transforms::decomposableOps()) {
      bool gradient = op == "conv2d_backward_input" || op == "conv2d_backward_weight";
      if (op != "gelu" && op != "logsumexp" && (convolutionLibrary ? !gradient : op != "conv2d"))
        v.push_back(op);
    }
    return v;
  };
  static const std::vector<std::string> ops = list(false), opsWithConvolutionLibrary = list(true);
  DecomposePassOptions decompose;
  decompose.ops = options.convolutionLibrary ? opsWithConvolutionLibrary : ops;
  decompose.keepFusedAttention = true; // the fused attention kernels
  // Before decomposing as well: f32 attention with dropout is decomposed
  // (the f32 kernels draw no dropout), its narrowed form is not.
  pm.addPass(createNarrowAttentionPass());
  pm.addPass(createDecomposePass(decompose));
  // After Decompose: batch norms are elementwise ops and reductions the
  // permutes move through.
  if (options.convolutionLibrary && options.channelsLast)
    pm.addPass(createChannelsLastPass());
  // Attention on upcast 16-bit values (PyTorch's math SDPA) reads them.
  pm.addPass(createNarrowAttentionPass());
  // After autocast and autodiff (the dtypes and both halves' GEMMs final).
  pm.addPass(createPadMatmulsPass());
  buildKernelPipeline(pm, options);
}

void registerBackendPipelines() {
  static mlir::PassPipelineRegistration<> cpu(
      "tensorc-cpu-pipeline", "the CPU backend's default pipeline",
      [](mlir::OpPassManager &pm) { buildCpuPipeline(pm); });
  static mlir::PassPipelineRegistration<> cuda(
      "tensorc-cuda-pipeline", "the CUDA backend's default pipeline",
      [](mlir::OpPassManager &pm) { buildCudaPipeline(pm); });
  // What `tensorc compile --target cuda` runs (driver/Compile.cpp), so
  // tensorc-opt reproduces the shipped artifact's IR.
  static mlir::PassPipelineRegistration<> cudaCodegen(
      "tensorc-cuda-codegen-pipeline", "what --target cuda compiles with (cuDNN convolutions)",
      [](mlir::OpPassManager &pm) { buildCudaCodegenPipeline(pm); });
}

} // namespace tensorc
