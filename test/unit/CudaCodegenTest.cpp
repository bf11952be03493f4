// The CUDA backend's source: every op of the op set (in several dtypes),
// every example graph and training steps become CUDA C++ that NVRTC
// compiles for sm_90 and sm_80 without a warning. (Running the kernels needs
// a GPU: scripts/gpu-test.sh, with the GPU runtime.) Skipped where NVRTC is
// absent.
#include "TestUtil.h"
#include "test/gpu/OpCatalog.h"

#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/CudaProgram.h"
#include "compiler/autodiff/TrainingStep.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/transforms/BackendPipelines.h"
#include "ir/core/Error.h"
#include "ir/core/OpSchema.h"

#include <set>
#include "passes/Pipelines.h"
#include "runtime/cuda/Nvrtc.h"

#include "mlir/Pass/PassManager.h"

#ifndef TENSORC_SOURCE_DIR
#error "TENSORC_SOURCE_DIR must be defined"
#endif

using namespace tensorc;
using namespace tensorc::testing;

namespace {


// The kernels of a graph, without the shared prelude.
std::string cudaKernels(Graph g, const std::string &name) {
  g.name = name; // unique kernel symbols across graphs
  mlir::MLIRContext ctx;
  loadTensorcDialects(ctx);
  GraphAnalysis a = analyzeGraph(g, name);
  mlir::OwningOpRef<mlir::ModuleOp> module = importGraph(ctx, g, a, name);
  mlir::PassManager pm(&ctx);
  buildCudaCodegenPipeline(pm, PipelineOptions{});
  check(mlir::succeeded(pm.run(*module)), name + ": pipeline failed");
  artifact::Artifact art = codegen::cuda::compileCudaArtifact(*module, {});
  EXPECT_EQ(art.target.kind, "cuda");
  std::string prelude = codegen::cuda::cudaPrelude();
  EXPECT_EQ(art.code.compare(0, prelude.size(), prelude), 0);
  return art.code.substr(prelude.size());
}

TEST(CudaCodegen, CatalogCoversEveryOp) {
  std::set<std::string> covered;
  for (const auto &[name, g] : gpu::opGraphs())
    for (const Node &n : g.nodes)
      covered.insert(n.op);
  for (const auto &[name, g] : gpu::largeGraphs())
    for (const Node &n : g.nodes)
      covered.insert(n.op);
  for (const OpSchema &op : allOpSchemas())
    EXPECT_TRUE(covered.count(op.name)) << op.name << " has no GPU parity case";
}

TEST(CudaCodegen, EveryOpAndModelCompilesWithNvrtc) {
  if (!cuda::Nvrtc::available())
    GTEST_SKIP() << "NVRTC is not installed";
  std::string source = codegen::cuda::cudaPrelude();
  int n = 0;
  for (const auto &[name, g] : gpu::opGraphs())
    source += cudaKernels(g, name + "_" + std::to_string(n++));
  for (const auto &[name, g] : gpu::backwardGraphs())
    source += cudaKernels(g, name + "_" + std::to_string(n++));
  for (const auto &[name, g] : gpu::largeGraphs())
    source += cudaKernels(g, name + "_" + std::to_string(n++));
  for (const auto &[name, g] : gpu::modelGraphs(TENSORC_SOURCE_DIR))
    source += cudaKernels(g, name + "_" + std::to_string(n++));
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  for (const char *arch : {"sm_90", "sm_80"}) {
    cuda::Nvrtc::Output out;
    try {
      out = nvrtc.compile(source, "all_kernels.cu", arch);
    } catch (const Error &e) {
      FAIL() << e.what();
    }
    EXPECT_GT(out.cubin.size(), 1000u) << arch;
    EXPECT_EQ(out.log, "") << arch << ": warnings";
  }
}

} // namespace
