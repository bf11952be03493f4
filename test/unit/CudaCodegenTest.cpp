// The CUDA backend's source: every op of the op set (in several dtypes),
// every example graph and training steps become CUDA C++ that NVRTC
// compiles for sm_90 and sm_80 without a warning. (Running the kernels needs
// a GPU: scripts/gpu-test.sh, with the GPU runtime.) Skipped where NVRTC is
// absent.
#include "TestUtil.h"

#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/CudaProgram.h"
#include "compiler/autodiff/TrainingStep.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/transforms/BackendPipelines.h"
#include "ir/core/Error.h"
#include "passes/Pipelines.h"
#include "runtime/cuda/Nvrtc.h"

#include "mlir/Pass/PassManager.h"

#ifndef TENSORC_SOURCE_DIR
#error "TENSORC_SOURCE_DIR must be defined"
#endif

using namespace tensorc;
using namespace tensorc::testing;

namespace {

using Shape_ = std::vector<std::variant<int64_t, std::string>>;

// The kernels of a graph, without the shared prelude.
std::string cudaKernels(Graph g, const std::string &name) {
  g.name = name; // unique kernel symbols across graphs
  mlir::MLIRContext ctx;
  loadTensorcDialects(ctx);
  GraphAnalysis a = analyzeGraph(g, name);
  mlir::OwningOpRef<mlir::ModuleOp> module = importGraph(ctx, g, a, name);
  mlir::PassManager pm(&ctx);
  buildCpuPipeline(pm, PipelineOptions{});
  check(mlir::succeeded(pm.run(*module)), name + ": pipeline failed");
  artifact::Artifact art = codegen::cuda::compileCudaArtifact(*module, {});
  EXPECT_EQ(art.target.kind, "cuda");
  std::string prelude = codegen::cuda::cudaPrelude();
  EXPECT_EQ(art.code.compare(0, prelude.size(), prelude), 0);
  return art.code.substr(prelude.size());
}

Graph opGraph(const std::string &op, const std::vector<std::pair<DType, Shape_>> &ins, AttrMap attrs = {}) {
  trace::Tracer t("op");
  std::vector<trace::Operand> operands;
  for (size_t i = 0; i < ins.size(); ++i)
    operands.push_back(t.input("in" + std::to_string(i), ins[i].first, ins[i].second));
  for (const trace::Tensor &r : t.call(op, operands, attrs))
    t.output(r);
  return t.graph();
}

std::vector<Graph> opGraphs() {
  std::vector<Graph> gs;
  const DType floats[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
  for (const char *op : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid",
                         "relu", "silu", "sin", "cos", "erf", "gelu", "floor", "ceil", "sign", "logical_not"})
    for (DType d : floats)
      gs.push_back(opGraph(op, {{d, {"B", 7}}}));
  for (const char *op : {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
                         "gt", "ge", "logical_and", "logical_or"})
    for (DType d : floats)
      gs.push_back(opGraph(op, {{d, {3, 1, 5}}, {d, {4, 5}}}));
  for (DType d : {DType::I32, DType::I64})
    for (const char *op : {"neg", "abs", "sign", "add", "mul", "maximum", "lt"})
      gs.push_back(opGraph(op, std::string(op) == "neg" || std::string(op) == "abs" || std::string(op) == "sign"
                                   ? std::vector<std::pair<DType, Shape_>>{{d, {9}}}
                                   : std::vector<std::pair<DType, Shape_>>{{d, {9}}, {d, {9}}}));
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      gs.push_back(opGraph("cast", {{from, {5}}}, {{"to", Attr(to)}}));
  gs.push_back(opGraph("where", {{DType::I1, {4, 1}}, {DType::BF16, {4, 6}}, {DType::BF16, {6}}}));
  gs.push_back(opGraph("clamp", {{DType::F32, {8}}}, {{"min", Attr(-0.5)}, {"max", Attr(0.5)}}));
  gs.push_back(opGraph("clamp", {{DType::I32, {8}}}, {{"min", Attr(1.5)}}));
  for (const char *op : {"sum", "mean", "max", "min", "prod"})
    for (DType d : {DType::F32, DType::BF16, DType::I64}) {
      if (d == DType::I64 && std::string(op) == "mean")
        continue;
      gs.push_back(opGraph(op, {{d, {"B", 7, 9}}}, {{"axes", Attr(std::vector<int64_t>{1})}, {"keepdim", Attr(true)}}));
      gs.push_back(opGraph(op, {{d, {"B", 7}}}));
    }
  for (const char *op : {"argmax", "argmin"}) {
    gs.push_back(opGraph(op, {{DType::F16, {5, 7}}}, {{"axis", Attr(int64_t(1))}}));
    gs.push_back(opGraph(op, {{DType::I32, {5, 7}}}));
  }
  gs.push_back(opGraph("matmul", {{DType::F32, {"B", 3, 4}}, {DType::F32, {4, 5}}}));
  gs.push_back(opGraph("transpose", {{DType::F32, {3, 5, 7}}}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(2))}}));
  gs.push_back(opGraph("permute", {{DType::F32, {2, 3, 5}}}, {{"dims", Attr(std::vector<int64_t>{2, 0, 1})}}));
  gs.push_back(opGraph("broadcast_to", {{DType::F32, {3, 1}}}, {{"shape", Attr(Shape{Dim::of(2), Dim::of(3), Dim::of(4)})}}));
  gs.push_back(opGraph("slice", {{DType::F32, {10, 9}}}, {{"starts", Attr(std::vector<int64_t>{1, 2})},
                                                          {"ends", Attr(std::vector<int64_t>{9, 9})},
                                                          {"steps", Attr(std::vector<int64_t>{3, 2})}}));
  gs.push_back(opGraph("split", {{DType::F32, {3, 10}}}, {{"sizes", Attr(std::vector<int64_t>{2, 8})}, {"axis", Attr(int64_t(1))}}));
  gs.push_back(opGraph("reshape", {{DType::F32, {4, 6}}}, {{"shape", Attr(Shape{Dim::of(3), Dim::of(8)})}}));
  gs.push_back(opGraph("squeeze", {{DType::F32, {4, 1, 6}}}));
  gs.push_back(opGraph("unsqueeze", {{DType::F32, {4, 6}}}, {{"axis", Attr(int64_t(1))}}));
  gs.push_back(opGraph("flatten", {{DType::F32, {2, 3, 4}}}));
  gs.push_back(opGraph("concat", {{DType::I1, {3, 2}}, {DType::I1, {3, 5}}}, {{"axis", Attr(int64_t(1))}}));
  gs.push_back(opGraph("pad", {{DType::F16, {4, 5}}}, {{"pads", Attr(std::vector<int64_t>{1, 2, 0, 3})}}));
  gs.push_back(opGraph("gather", {{DType::F32, {5, 6}}, {DType::I64, {4, 6}}}, {{"axis", Attr(int64_t(0))}}));
  gs.push_back(opGraph("index_select", {{DType::BF16, {5, 6}}, {DType::I32, {9}}}, {{"axis", Attr(int64_t(1))}}));
  gs.push_back(opGraph("embedding", {{DType::I64, {"B", 3}}, {DType::F32, {11, 8}}}));
  gs.push_back(opGraph("dropout", {{DType::F32, {7, 33}}, {DType::I64, {}}}, {{"p", Attr(0.3)}}));
  gs.push_back(opGraph("conv2d", {{DType::F32, {"B", 4, 10, 7}}, {DType::F32, {6, 2, 3, 2}}, {DType::F32, {6}}},
                       {{"stride", Attr(std::vector<int64_t>{2, 1})}, {"padding", Attr(std::vector<int64_t>{1, 2})},
                        {"groups", Attr(int64_t(2))}}));
  gs.push_back(opGraph("max_pool2d", {{DType::BF16, {2, 3, 9, 8}}}, {{"kernel_size", Attr(std::vector<int64_t>{3, 2})}}));
  gs.push_back(opGraph("avg_pool2d", {{DType::F32, {2, 3, 9, 8}}}, {{"kernel_size", Attr(std::vector<int64_t>{3, 3})},
                                                                     {"padding", Attr(std::vector<int64_t>{1, 1})}}));
  gs.push_back(opGraph("iota", {}, {{"end", Attr(int64_t(13))}}));
  gs.push_back(opGraph("full", {}, {{"shape", Attr(Shape{Dim::of(3)})}, {"value", Attr(2.5)}}));
  gs.push_back(opGraph("scaled_dot_product_attention_backward",
                       {{DType::F32, {2, 3, 5, 4}}, {DType::F32, {2, 3, 5, 8}}, {DType::F32, {1, 3, 7, 8}},
                        {DType::F32, {2, 3, 7, 4}}},
                       {{"is_causal", Attr(true)}}));
  return gs;
}

std::vector<Graph> modelGraphs() {
  std::string root = TENSORC_SOURCE_DIR;
  std::vector<Graph> gs;
  for (const char *f : {"/examples/mlp.json", "/examples/transformer_block.json", "/test/autodiff/Inputs/chain.json",
                        "/test/passes/Inputs/composites.json", "/test/passes/Inputs/attention.json"})
    gs.push_back(loadModel(root + f)->graph);
  for (const char *f : {"/examples/mlp.json", "/test/autodiff/Inputs/chain.json"}) {
    autodiff::TrainingStepOptions options;
    options.optimizer.kind = autodiff::Optimizer::AdamW;
    gs.push_back(autodiff::buildTrainingStep(loadModel(root + f)->graph, options).graph);
  }
  return gs;
}

TEST(CudaCodegen, EveryOpAndModelCompilesWithNvrtc) {
  if (!cuda::Nvrtc::available())
    GTEST_SKIP() << "NVRTC is not installed";
  std::string source = codegen::cuda::cudaPrelude();
  int n = 0;
  for (const Graph &g : opGraphs())
    source += cudaKernels(g, "op" + std::to_string(n++));
  for (const Graph &g : modelGraphs())
    source += cudaKernels(g, "model" + std::to_string(n++));
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
