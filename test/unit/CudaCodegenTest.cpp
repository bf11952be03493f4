// The CUDA backend's source: every op of the op set (in several dtypes),
// every example graph and training steps become CUDA C++ that NVRTC
// compiles for sm_90 and sm_80 without a warning. (Running the kernels needs
// a GPU: scripts/gpu-test.sh, with the GPU runtime.) Skipped where NVRTC is
// absent.
#include "TestUtil.h"
#include "test/gpu/OpCatalog.h"

#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/CudaProgram.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/TrainingStep.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/transforms/BackendPipelines.h"
#include "ir/core/Error.h"
#include "ir/core/OpSchema.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include "passes/Pipelines.h"
#include "compiler/trace/Tracer.h"
#include "runtime/cuda/CudaProgram.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/TranslationUnits.h"

#include "mlir/Pass/PassManager.h"

#ifndef TENSORC_SOURCE_DIR
#error "TENSORC_SOURCE_DIR must be defined"
#endif

using namespace tensorc;
using namespace tensorc::testing;

namespace {


// The artifact `tensorc compile --target cuda` makes of a graph.
artifact::Artifact cudaArtifact(Graph g, const std::string &name,
                                const codegen::cuda::CudaCompileOptions &options = {},
                                const PipelineOptions &pipelineOptions = {}) {
  g.name = name; // unique kernel symbols across graphs
  mlir::MLIRContext ctx;
  loadTensorcDialects(ctx);
  GraphAnalysis a = analyzeGraph(g, name);
  mlir::OwningOpRef<mlir::ModuleOp> module = importGraph(ctx, g, a, name);
  mlir::PassManager pm(&ctx);
  buildCudaCodegenPipeline(pm, pipelineOptions);
  check(mlir::succeeded(pm.run(*module)), name + ": pipeline failed");
  return codegen::cuda::compileCudaArtifact(*module, options);
}

// The kernels of a graph, without the shared prelude.
std::string cudaKernels(Graph g, const std::string &name) {
  artifact::Artifact art = cudaArtifact(std::move(g), name);
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
  // Collectives run through NCCL, one process per GPU: not single-process
  // parity cases (docs/sharding.md has how they were checked).
  for (const OpSchema &op : allOpSchemas())
    EXPECT_EQ(covered.count(op.name) != 0, op.category != "collective")
        << op.name << (op.category == "collective" ? " is a collective" : " has no GPU parity case");
}

// Drops the attention instantiations (lines `TC_ATTENTION_*(name, args)`)
// whose macro and arguments an earlier graph already instantiated: the same
// template instance under another graph's name adds compile time, not code.
std::string withoutRepeatedAttention(const std::string &kernels, std::set<std::string> &seen) {
  std::string out;
  size_t at = 0;
  while (at < kernels.size()) {
    size_t end = kernels.find('\n', at);
    end = end == std::string::npos ? kernels.size() : end + 1;
    const std::string line = kernels.substr(at, end - at);
    at = end;
    if (line.rfind("TC_ATTENTION", 0) == 0) {
      const size_t open = line.find('('), comma = line.find(',');
      if (open != std::string::npos && comma != std::string::npos &&
          !seen.insert(line.substr(0, open) + line.substr(comma)).second)
        continue;
    }
    out += line;
  }
  return out;
}

TEST(CudaCodegen, EveryOpAndModelCompilesWithNvrtc) {
  if (!cuda::Nvrtc::available())
    GTEST_SKIP() << "NVRTC is not installed";
  // Every kernel for sm_90 (the GPU the suite runs on); for sm_80 the op
  // and large-op graphs only, which hold every kernel template and every
  // architecture-dependent path (bf16/f16 intrinsics, the attention
  // kernels): the models and backward graphs add instances, not new code,
  // and compiling them twice took half of CI's unit-test time. NVRTC's
  // front end is single-threaded: the graphs are compiled in 8 translation
  // units per core, on every core (NVVM's time grows faster than a unit's
  // size: one unit per core took 423 s on this 2-core machine, 8 per core
  // 230 s; one unit, 12 minutes).
  std::vector<std::string> ops, more;
  std::set<std::string> seen;
  int n = 0;
  for (const auto &[name, g] : gpu::opGraphs())
    ops.push_back(withoutRepeatedAttention(cudaKernels(g, name + "_" + std::to_string(n++)), seen));
  for (const auto &[name, g] : gpu::largeGraphs())
    ops.push_back(withoutRepeatedAttention(cudaKernels(g, name + "_" + std::to_string(n++)), seen));
  for (const auto &[name, g] : gpu::backwardGraphs())
    more.push_back(withoutRepeatedAttention(cudaKernels(g, name + "_" + std::to_string(n++)), seen));
  for (const auto &[name, g] : gpu::modelGraphs(TENSORC_SOURCE_DIR))
    more.push_back(withoutRepeatedAttention(cudaKernels(g, name + "_" + std::to_string(n++)), seen));
  const unsigned workers = std::max(2u, std::thread::hardware_concurrency());
  const unsigned parts = 8 * workers;
  const std::string prelude = codegen::cuda::cudaPrelude();
  std::vector<std::pair<std::string, std::string>> units; // (arch, source)
  for (const auto &[arch, withMore] : {std::pair<std::string, bool>{"sm_90", true}, {"sm_80", false}}) {
    std::vector<std::string> sources(parts, prelude);
    size_t i = 0;
    for (const std::string &k : ops)
      sources[i++ % parts] += k;
    if (withMore)
      for (const std::string &k : more)
        sources[i++ % parts] += k;
    for (std::string &source : sources)
      units.emplace_back(arch, std::move(source));
  }
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  std::vector<std::string> failures(units.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t u; (u = next++) < units.size();) {
      const auto &[arch, source] = units[u];
      try {
        cuda::Nvrtc::Output out = nvrtc.compile(source, "all_kernels_" + std::to_string(u) + ".cu", arch);
        if (out.cubin.size() <= 1000)
          failures[u] = arch + ": no code";
        else if (!out.log.empty())
          failures[u] = arch + ": warnings: " + out.log;
      } catch (const Error &e) {
        failures[u] = arch + ": " + e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < workers; ++t)
    threads.emplace_back(work);
  for (std::thread &t : threads)
    t.join();
  for (const std::string &f : failures)
    EXPECT_EQ(f, "");
}

// Matmul steps (epilogue, operand count) of an artifact, in order.
std::vector<std::pair<std::string, size_t>> matmulSteps(const artifact::Artifact &a) {
  std::vector<std::pair<std::string, size_t>> r;
  for (const artifact::Step &s : a.steps)
    if (s.kind == artifact::Step::Kind::Matmul)
      r.emplace_back(s.epilogue.name(), s.operands.size());
  return r;
}

using Pairs = std::vector<std::pair<std::string, size_t>>;

TEST(CudaCodegen, EpiloguesFoldOnlyWhatNothingElseReads) {
  trace::Tracer t("lin");
  trace::Tensor x = t.input("x", DType::F32, {"B", 8});
  trace::Tensor w = t.input("w", DType::F32, {8, 6});
  trace::Tensor b = t.input("b", DType::F32, {6});
  trace::Tensor y = t.call("matmul", {x, w})[0];
  t.output(t.call("relu", {t.call("add", {b, y})[0]})[0]); // bias on the left
  EXPECT_EQ(matmulSteps(cudaArtifact(t.graph(), "ep1")), (Pairs{{"bias_relu", 4}}));

  // Autocast's bias: an f32 parameter cast to bf16 in the matmul's kernel.
  // The cast's nest runs before the library call that reads it (it ran
  // after it: DistilGPT-2 and BERT training read a stale bias, NaN).
  trace::Tracer ac("lin_autocast");
  x = ac.input("x", DType::BF16, {"B", 8});
  w = ac.input("w", DType::BF16, {8, 6});
  b = ac.input("b", DType::F32, {6});
  trace::Tensor b16 = ac.call("cast", {b}, {{"to", Attr(DType::BF16)}})[0];
  ac.output(ac.call("add", {ac.call("matmul", {x, w})[0], b16})[0]);
  artifact::Artifact autocast = cudaArtifact(ac.graph(), "ep_autocast");
  EXPECT_EQ(matmulSteps(autocast), (Pairs{{"bias", 4}}));
  auto writer = [&](int v) {
    for (size_t si = 0; si < autocast.steps.size(); ++si)
      if (autocast.steps[si].operands[0] == v)
        return int(si);
    return -1;
  };
  for (size_t si = 0; si < autocast.steps.size(); ++si)
    if (autocast.steps[si].kind == artifact::Step::Kind::Matmul) {
      int bias = autocast.steps[si].operands[3];
      EXPECT_GE(writer(bias), 0);
      EXPECT_LT(writer(bias), int(si));
    }

  // The raw product is also an output: no epilogue (it must be stored as is).
  trace::Tracer u("lin2");
  x = u.input("x", DType::F32, {"B", 8});
  w = u.input("w", DType::F32, {8, 6});
  b = u.input("b", DType::F32, {6});
  y = u.call("matmul", {x, w})[0];
  u.output(y);
  u.output(u.call("add", {y, b})[0]);
  EXPECT_EQ(matmulSteps(cudaArtifact(u.graph(), "ep2")), (Pairs{{"", 3}}));

  // A bias that is not per column (one per row) and erf-gelu stay kernels;
  // gelu(tanh) alone folds.
  trace::Tracer v("lin3");
  x = v.input("x", DType::F32, {8, 8});
  trace::Tensor rows = v.input("r", DType::F32, {8, 1});
  // Distinct weights: identical matmuls would be merged (one product, three readers).
  v.output(v.call("add", {v.call("matmul", {x, v.input("w1", DType::F32, {8, 8})})[0], rows})[0]);
  v.output(v.call("gelu", {v.call("matmul", {x, v.input("w2", DType::F32, {8, 8})})[0]})[0]);
  v.output(v.call("gelu", {v.call("matmul", {x, v.input("w3", DType::F32, {8, 8})})[0]},
                  {{"approximate", Attr(std::string("tanh"))}})[0]);
  EXPECT_EQ(matmulSteps(cudaArtifact(v.graph(), "ep3")), (Pairs{{"", 3}, {"", 3}, {"gelu_tanh", 3}}));

  // The bias gradient rides on the weight-gradient GEMM (x^T @ dy, then
  // sum(dy, 0)) where that is asked for (off by default: cuBLASLt runs it
  // as a kernel of its own); a sum over another axis does not.
  codegen::cuda::CudaCompileOptions withBiasGradient;
  withBiasGradient.gemmBiasGradient = true;
  {
    trace::Tracer g("nobgrad");
    trace::Tensor gx = g.input("x", DType::F32, {"B", 8}), dy = g.input("dy", DType::F32, {"B", 6});
    trace::Tensor xt = g.call("transpose", {gx}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0];
    g.output(g.call("matmul", {xt, dy})[0]);
    g.output(g.call("sum", {dy}, {{"axes", Attr(std::vector<int64_t>{0})}})[0]);
    EXPECT_EQ(matmulSteps(cudaArtifact(g.graph(), "nobgrad")), (Pairs{{"", 3u}}));
  }
  for (int64_t axis : {0, 1}) {
    trace::Tracer g("grad");
    trace::Tensor gx = g.input("x", DType::F32, {"B", 8}), dy = g.input("dy", DType::F32, {"B", 6});
    trace::Tensor xt = g.call("transpose", {gx}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0];
    g.output(g.call("matmul", {xt, dy})[0]);
    g.output(g.call("sum", {dy}, {{"axes", Attr(std::vector<int64_t>{axis})}})[0]);
    EXPECT_EQ(matmulSteps(cudaArtifact(g.graph(), "bgrad" + std::to_string(axis), withBiasGradient)),
              (Pairs{{axis == 0 ? "bgrad" : "", axis == 0 ? 4u : 3u}}));
  }
  // PyTorch's layout ([out, in] weights): the weight gradient dy^T @ x, the
  // sum emitted first; the sums of the GEMM's transposed left operand.
  {
    trace::Tracer g("gradt");
    trace::Tensor gx = g.input("x", DType::BF16, {"B", 8}), dy = g.input("dy", DType::BF16, {"B", 6});
    g.output(g.call("sum", {dy}, {{"axes", Attr(std::vector<int64_t>{0})}})[0]);
    trace::Tensor dyt = g.call("transpose", {dy}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0];
    g.output(g.call("matmul", {dyt, gx})[0]);
    EXPECT_EQ(matmulSteps(cudaArtifact(g.graph(), "bgrada", withBiasGradient)), (Pairs{{"bgrad_a", 4u}}));
  }
  // Autodiff's order (the bias gradient first) and batched rows: dy [B, T, 6]
  // summed over (0, 1), the weight gradient flat(x)^T @ flat(dy). The sum is
  // lowered after the GEMM unless something reads it before.
  for (bool readEarly : {false, true}) {
    trace::Tracer g("grad3");
    trace::Tensor gx = g.input("x", DType::F32, {"B", 5, 8}), dy = g.input("dy", DType::F32, {"B", 5, 6});
    trace::Tensor db = g.call("sum", {dy}, {{"axes", Attr(std::vector<int64_t>{0, 1})}})[0];
    trace::Tensor flatDy = trace::flatten(dy, 0, 1);
    if (readEarly) // the GEMM reads dy * db: the sum must come first
      flatDy = g.call("mul", {flatDy, db})[0];
    trace::Tensor flatX = trace::flatten(gx, 0, 1);
    trace::Tensor xt = g.call("transpose", {flatX}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0];
    g.output(db);
    g.output(g.call("matmul", {xt, flatDy})[0]);
    EXPECT_EQ(matmulSteps(cudaArtifact(g.graph(), "bgrad3", withBiasGradient)), (Pairs{{readEarly ? "" : "bgrad", readEarly ? 3u : 4u}}))
        << (readEarly ? "sum read by the GEMM's operand" : "sum first");
  }
}

// Each convolution step: its direction and groups.
Pairs convolutionSteps(const artifact::Artifact &a) {
  Pairs r;
  for (const artifact::Step &s : a.steps)
    if (s.kind == artifact::Step::Kind::Convolution)
      r.push_back({s.convolution.directionName(), size_t(s.convolution.groups)});
  return r;
}

TEST(CudaCodegen, Conv2dOnCudnnUnlessAskedGemmOrDirect) {
  auto conv = [](int64_t groups, bool train = false) {
    trace::Tracer t("conv");
    trace::Tensor x = t.input("x", DType::F32, {"B", 4, 9, 7});
    trace::Tensor w = t.input("w", DType::F32, {6, 4 / groups, 3, 3});
    trace::Tensor b = t.input("b", DType::F32, {6});
    trace::Tensor y = t.call("conv2d", {x, w, b}, {{"groups", Attr(groups)}})[0];
    t.output(train ? t.call("sum", {t.call("relu", {y})[0]})[0] : y);
    Graph g = t.graph();
    autodiff::AutodiffOptions wrt;
    wrt.wrt = {"x", "w", "b"};
    return train ? autodiff::buildJointGraph(g, wrt).graph : g;
  };
  // cuDNN (the default): a convolution step, the bias an add after it.
  artifact::Artifact c1 = cudaArtifact(conv(1), "c1");
  EXPECT_EQ(convolutionSteps(c1), (Pairs{{"forward", 1}}));
  EXPECT_EQ(matmulSteps(c1), Pairs{});
  EXPECT_EQ(c1.options.at("conv"), "cudnn");
  EXPECT_EQ(convolutionSteps(cudaArtifact(conv(2), "c2")), (Pairs{{"forward", 2}}));
  // The gradients too: one step per direction.
  Pairs trained = convolutionSteps(cudaArtifact(conv(2, true), "c3"));
  std::sort(trained.begin(), trained.end());
  EXPECT_EQ(trained, (Pairs{{"backward_input", 2}, {"backward_weight", 2}, {"forward", 2}}));
  // gemm: im2col + GEMM with the bias in its epilogue (groups 1), the
  // gradients per-tap GEMMs; direct: loop nests only.
  PipelineOptions noLibrary;
  noLibrary.convolutionLibrary = false;
  codegen::cuda::CudaCompileOptions gemm, direct;
  gemm.conv = "gemm";
  direct.conv = "direct";
  EXPECT_EQ(matmulSteps(cudaArtifact(conv(1), "c4", gemm, noLibrary)), (Pairs{{"bias", 4}}));
  EXPECT_EQ(matmulSteps(cudaArtifact(conv(2), "c5", gemm, noLibrary)), Pairs{});
  artifact::Artifact c6 = cudaArtifact(conv(1, true), "c6", gemm, noLibrary);
  EXPECT_EQ(convolutionSteps(c6), Pairs{});
  EXPECT_GE(matmulSteps(c6).size(), size_t(1 + 9 + 9));
  // f64: the direct nest (cuDNN's f64 engines are not worth a step); the
  // artifact loads (a convolution step of f64 is refused at load).
  {
    trace::Tracer t("conv64");
    trace::Tensor x = t.input("x", DType::F64, {2, 4, 9, 7}), w = t.input("w", DType::F64, {6, 4, 3, 3});
    t.output(t.call("conv2d", {x, w})[0]);
    artifact::Artifact c8 = cudaArtifact(t.graph(), "c8");
    EXPECT_EQ(convolutionSteps(c8), Pairs{});
    c8.tensorcVersion = "test";
    EXPECT_NO_THROW(artifact::parse(artifact::serialize(c8), "c8"));
  }
  artifact::Artifact c7 = cudaArtifact(conv(1), "c7", direct, noLibrary);
  EXPECT_EQ(matmulSteps(c7), Pairs{});
  EXPECT_EQ(convolutionSteps(c7), Pairs{});
  EXPECT_EQ(c7.options.at("conv"), "direct");
}

TEST(CudaCodegen, VariantNamesAndTheHeuristic) {
  using artifact::KernelVariant;
  auto items = [](int b, int i) { return KernelVariant{b, i, 1, false}; };
  auto lanes = [](int b, int l) { return KernelVariant{b, 1, l, false}; };
  EXPECT_EQ(items(256, 1).name(), "b256_i1");
  EXPECT_EQ(lanes(512, 512).name(), "b512_l512");
  EXPECT_EQ((KernelVariant{1024, 1, 1, true}).name(), "b1024_r1");
  for (const KernelVariant &good : {items(256, 1), lanes(512, 512), lanes(256, 8), items(32, 1024)})
    EXPECT_EQ(artifact::variantProblem(good), "") << good.name();
  for (const KernelVariant &bad : {lanes(256, 48), items(100, 1), items(2048, 1), items(256, 0), lanes(256, 128),
                                   KernelVariant{256, 2, 8, false}, KernelVariant{256, 2, 1, true}})
    EXPECT_NE(artifact::variantProblem(bad), "") << bad.name();
  EXPECT_EQ(items(256, 4).outputsPerBlock(), 1024);
  EXPECT_EQ(lanes(256, 32).outputsPerBlock(), 8);
  EXPECT_EQ(lanes(512, 512).outputsPerBlock(), 1);

  std::vector<KernelVariant> elementwise = codegen::cuda::kernelVariants();
  std::vector<KernelVariant> reduction = elementwise;
  for (const KernelVariant &v : codegen::cuda::rowVariants())
    reduction.push_back(v);
  auto pick = [](const std::vector<KernelVariant> &vs, int64_t outputs, int64_t reduced) {
    return vs[cuda::CudaProgram::defaultVariant(vs, outputs, reduced)].name();
  };
  EXPECT_EQ(pick(elementwise, 1 << 20, 1), "b256_i1");
  std::vector<KernelVariant> vectors = elementwise;
  for (const KernelVariant &v : codegen::cuda::vectorVariants())
    vectors.push_back(v);
  EXPECT_EQ(pick(vectors, 1 << 20, 1), "b256_i1_v4");
  EXPECT_EQ(pick(vectors, 1 << 24, 1), "b256_i4_v4"); // more loads in flight
  EXPECT_EQ(pick(vectors, 1 << 12, 1), "b256_i1");
  EXPECT_EQ(vectors[elementwise.size()].name(), "b256_i1_v4");
  EXPECT_EQ(vectors[elementwise.size()].outputsPerBlock(), 1024);
  EXPECT_EQ(vectors.back().name(), "b256_i4_v4");
  EXPECT_EQ(vectors.back().outputsPerBlock(), 4096);
  for (const KernelVariant &v : codegen::cuda::vectorVariants())
    EXPECT_EQ(artifact::variantProblem(v), "") << v.name();
  KernelVariant vectorLanes = lanes(256, 32), vectorRow{256, 1, 1, true}, wide = items(256, 1);
  vectorLanes.vector = vectorRow.vector = 4;
  wide.vector = 8;
  for (const KernelVariant &bad : {vectorLanes, vectorRow, wide})
    EXPECT_NE(artifact::variantProblem(bad), "") << bad.name();
  EXPECT_EQ(pick(elementwise, 1 << 24, 1), "b256_i4");
  EXPECT_EQ(pick(reduction, 1 << 24, 8), "b256_i4");
  EXPECT_EQ(pick(elementwise, 10, 100000), "b256_i1"); // no cooperative variants: the first
  EXPECT_EQ(pick(reduction, 1000, 7), "b256_i1");
  EXPECT_EQ(pick(reduction, 1000, 64), "b256_l8");
  EXPECT_EQ(pick(reduction, 100000, 1000), "b256_l32");
  EXPECT_EQ(pick(reduction, 100, 1000), "b512_l512");
  EXPECT_EQ(pick(reduction, 16384, 4096), "b512_l512");

  // Chains: fused (one row per block) only when rows fill the GPU and rows
  // have work for a block.
  const std::vector<KernelVariant> &chain = codegen::cuda::chainVariants();
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 16384, 4096, 132), 0);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 16384, 10000, 132), 1);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 16384, 300, 132), 3);  // short rows: 64 threads
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 8192, 768, 132), 3);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 8192, 3072, 132), 0);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 16384, 50000, 132), 2);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 100, 4096, 132), -1);  // too few rows
  EXPECT_EQ(cuda::CudaProgram::chainVariant(chain, 16384, 10, 132), -1);  // rows too short
  EXPECT_EQ(cuda::CudaProgram::chainVariant({}, 16384, 4096, 132), -1);
  // With row-cache variants (after the plain ones): preferred at the same
  // block size where the GPU has the shared memory, else the plain one.
  std::vector<KernelVariant> cached = chain;
  for (KernelVariant v : chain) {
    v.cacheBytes = 201216;
    cached.push_back(v);
  }
  EXPECT_EQ(cuda::CudaProgram::chainVariant(cached, 4096, 50304, 132, 232448), 6);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(cached, 16384, 4096, 132, 232448), 4);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(cached, 8192, 768, 132, 232448), 7);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(cached, 4096, 50304, 132, 166912), 2); // an A100's 163 KiB
  EXPECT_EQ(cuda::CudaProgram::chainVariant(cached, 4096, 50304, 132), 2);
  // Rows split across a cluster of 2 (after those): where a whole row's
  // cache leaves one block per SM and the GPU has clusters, at the block
  // size of half a row.
  std::vector<KernelVariant> split = cached;
  for (int block : {256, 512}) {
    KernelVariant v{block, 1, 1, true};
    v.cacheBytes = 100608;
    v.cluster = 2;
    EXPECT_EQ(artifact::variantProblem(v), "");
    EXPECT_EQ(v.name(), "b" + std::to_string(block) + "_r1c_k2");
    split.push_back(v);
  }
  EXPECT_EQ(cuda::CudaProgram::chainVariant(split, 4096, 50304, 132, 232448, true), int(cached.size()) + 1);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(split, 4096, 50304, 132, 232448, false), 6);
  EXPECT_EQ(cuda::CudaProgram::chainVariant(split, 4096, 50304, 132, 166912, true), 2); // no whole-row cache
  KernelVariant notRow{256, 1, 1, false}, three{256, 1, 1, true};
  notRow.cluster = 2;
  three.cluster = 3;
  EXPECT_NE(artifact::variantProblem(notRow), "");
  EXPECT_NE(artifact::variantProblem(three), "");
}

// A chain whose steps read the same operand at their row keeps that row in
// shared memory in its cached variants: the layer norm's input (4096 floats
// a row), not its weight and bias (read at every row: broadcast).
// Elementwise nests whose innermost dim is a static multiple of 4 get
// variants that compute four consecutive outputs per item: one vector load
// per operand indexed contiguously there, scalar loads per lane for the
// rest (a transposed read), one vector store. Rows reduced along such a
// dim (softmax's sums) read four positions per load.
TEST(CudaCodegen, NestsReadAndWriteFourConsecutiveElements) {
  auto loopVariants = [](const artifact::Artifact &a) {
    std::vector<std::vector<std::string>> names;
    for (const artifact::Step &s : a.steps)
      if (s.kind == artifact::Step::Kind::Loop) {
        names.emplace_back();
        for (const artifact::KernelVariant &v : s.variants)
          names.back().push_back(v.name());
      }
    return names;
  };
  trace::Tracer t("vec");
  trace::Tensor x = t.input("x", DType::F32, {"B", 64, 64}), a = t.input("a", DType::F32, {64});
  trace::Tensor sq = t.input("s", DType::F32, {64, 64});
  trace::Tensor st = t.call("transpose", {sq}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0];
  t.output(t.call("add", {t.call("gelu", {t.call("mul", {x, a})[0]})[0], t.call("exp", {st})[0]})[0]);
  artifact::Artifact vec = cudaArtifact(t.graph(), "vec");
  std::vector<std::vector<std::string>> names = loopVariants(vec);
  ASSERT_FALSE(names.empty());
  for (const std::vector<std::string> &n : names)
    EXPECT_EQ(n, (std::vector<std::string>{"b256_i1", "b128_i1", "b256_i1_v4", "b256_i2_v4", "b256_i4_v4"}));
  EXPECT_NE(vec.code.find("tc_load4(m1 + "), std::string::npos);   // x, contiguous
  EXPECT_NE(vec.code.find("tc_store4(m0 + "), std::string::npos);
  for (const artifact::Step &s : vec.steps)
    for (const artifact::KernelVariant &v : s.variants)
      EXPECT_NE(vec.code.find(s.symbol + "_" + v.name() + "("), std::string::npos) << v.name();
  artifact::Artifact back = artifact::parse(artifact::serialize(vec), "vec.tcx");
  EXPECT_EQ(loopVariants(back), names);

  // 63 columns: no vectors.
  trace::Tracer u("odd");
  trace::Tensor y = u.input("x", DType::F32, {"B", 63});
  u.output(u.call("gelu", {y})[0]);
  for (const std::vector<std::string> &n : loopVariants(cudaArtifact(u.graph(), "odd")))
    for (const std::string &v : n)
      EXPECT_EQ(v.find("_v4"), std::string::npos) << v;

  // A row sum of 4096 (softmax): the row template reads vectors, with the
  // scalar loop for unaligned pointers.
  trace::Tracer w("rows");
  trace::Tensor r = w.input("x", DType::F32, {"B", 4096});
  w.output(w.call("softmax", {r}, {{"axis", Attr(int64_t(-1))}})[0]);
  std::string code = cudaArtifact(w.graph(), "rows").code;
  // (The row max: m1 read four at a time; the log-sum-exp: m1 at the point
  // and the row's max m2, its shift, through m2's second pointer.)
  EXPECT_NE(code.find("_point4(i0, i1, s0, m0, m1, xa); }"), std::string::npos);
  EXPECT_NE(code.find("_point4(i0, i1, s0, m0, m1, m2, m2, xa); }"), std::string::npos);
  EXPECT_NE(code.find("if (true && tc_aligned4(m1)) {"), std::string::npos);
}

TEST(CudaCodegen, ChainsKeepRowsInSharedMemory) {
  trace::Tracer t("ln");
  trace::Tensor x = t.input("x", DType::F32, {"B", 4096});
  trace::Tensor w = t.input("w", DType::F32, {4096}), b = t.input("b", DType::F32, {4096});
  t.output(t.call("layer_norm", {x, w, b})[0]);
  artifact::Artifact a = cudaArtifact(t.graph(), "cache");
  size_t heads = 0;
  for (const artifact::Step &s : a.steps) {
    if (s.chainKernel.empty())
      continue;
    ++heads;
    std::vector<std::string> names;
    for (const artifact::KernelVariant &v : s.chainVariants) {
      names.push_back(v.name());
      EXPECT_EQ(v.cacheBytes, v.name().back() == 'c' ? 4096 * 4 : 0) << v.name();
    }
    EXPECT_EQ(names, (std::vector<std::string>{"b256_r1", "b512_r1", "b1024_r1", "b64_r1", "b256_r1c", "b512_r1c",
                                               "b1024_r1c", "b64_r1c"}));
    EXPECT_NE(a.code.find("void __launch_bounds__(256) " + s.chainKernel + "_b256_r1c("), std::string::npos);
    EXPECT_NE(a.code.find("tc_copy_row<BLOCK>(c0, "), std::string::npos);
  }
  EXPECT_EQ(heads, 1u);
  // The weight and bias, read away from the point (one element per
  // column), come through their second pointers e<k>: in a chain split
  // across a cluster those point at device memory while m<k> is the row
  // cache, so the vector path checks each e<k> it reads as vectors.
  size_t elsewhereVectors = 0;
  for (size_t at = a.code.find("tc_load4(e"); at != std::string::npos; at = a.code.find("tc_load4(e", at + 1)) {
    std::string pointer = a.code.substr(at + 9, a.code.find_first_of(" +)", at + 9) - at - 9);
    EXPECT_NE(a.code.find("tc_aligned4(" + pointer + ")"), std::string::npos) << pointer;
    ++elsewhereVectors;
  }
  EXPECT_GT(elsewhereVectors, 0u);
  artifact::Artifact back = artifact::parse(artifact::serialize(a), "cache.tcx");
  for (size_t i = 0; i < a.steps.size(); ++i)
    EXPECT_EQ(back.steps[i].chainVariants, a.steps[i].chainVariants);

  // softmax(x) * x^T: the chain's last nest reads x at another row (column
  // `row` of row `c`), which a copy of the row would not hold: no cache.
  trace::Tracer u("tr");
  trace::Tensor v = u.input("x", DType::F32, {512, 512});
  trace::Tensor s = u.call("softmax", {v}, {{"axis", Attr(int64_t(-1))}})[0];
  trace::Tensor vt = u.call("transpose", {v}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0];
  u.output(u.call("mul", {s, vt})[0]);
  artifact::Artifact transposed = cudaArtifact(u.graph(), "nocache");
  size_t chains = 0;
  for (const artifact::Step &st : transposed.steps) {
    chains += !st.chainKernel.empty();
    for (const artifact::KernelVariant &var : st.chainVariants)
      EXPECT_EQ(var.cacheBytes, 0) << var.name();
  }
  EXPECT_EQ(chains, 1u);

  // Cross-entropy's forward reads the row twice (its max, the shift; then
  // the online log-sum-exp of x - max) and its gradient (exp(z - lse)) a
  // third time: the chain keeps the 16 KB row either way.
  for (bool grad : {false, true}) {
    trace::Tracer c("xent");
    trace::Tensor logits = c.input("logits", DType::F32, {"B", 4096});
    trace::Tensor target = c.input("target", DType::I64, {"B"});
    trace::Tensor loss = c.call("cross_entropy", {logits, target})[0];
    c.output(loss);
    if (grad)
      c.output(c.call("softmax", {logits}, {{"axis", Attr(int64_t(-1))}})[0]);
    artifact::Artifact xent = cudaArtifact(c.graph(), grad ? "xent_softmax" : "xent");
    int64_t cached = 0;
    for (const artifact::Step &st : xent.steps)
      for (const artifact::KernelVariant &var : st.chainVariants)
        cached = std::max(cached, var.cacheBytes);
    EXPECT_EQ(cached, 4096 * 4) << (grad ? "with softmax" : "forward");
  }
}

// Cross-entropy's training step, rows split across a cluster (201 KB rows):
// the row max and the log-sum-exp read their points from the block's part
// of the row cache, the log-sum-exp the max (its shift) through device
// memory; every block finishes both from all the blocks' partials
// (exchanged through distributed shared memory) and computes the per-row
// values itself, so the chain waits only for its own block: no cluster
// barrier (whose release waits for every store in flight), none after the
// gradient's stores.
TEST(CudaCodegen, SplitChainsReadTheirPartAndWaitOnlyWhereNeeded) {
  trace::Tracer t("xent");
  trace::Tensor logits = t.input("logits", DType::F32, {4096, 50304});
  trace::Tensor target = t.input("target", DType::I64, {4096});
  t.output(t.call("cross_entropy", {logits, target})[0]);
  autodiff::AutodiffOptions wrt;
  wrt.wrt = {"logits"};
  artifact::Artifact a = cudaArtifact(autodiff::buildJointGraph(t.graph(), wrt).graph, "xent_step");
  const artifact::Step *head = nullptr;
  for (const artifact::Step &st : a.steps)
    if (!st.chainKernel.empty())
      head = &st;
  ASSERT_NE(head, nullptr);
  size_t at = a.code.find("void " + head->chainKernel + "_split(");
  ASSERT_NE(at, std::string::npos);
  std::string split = a.code.substr(at, a.code.find("\n}\n", at) - at);
  // The first nest: the row's max (the shift) over the block's part, its
  // points from the cache (q), finished in every block (ALL); then the
  // log-sum-exp of x - max, its points from the cache, the max from device
  // memory (p), finished in every block too.
  size_t first = split.find(head->symbol + "_row<BLOCK, CLUSTER, false, true>(i0, rank, p0, q1);");
  EXPECT_NE(first, std::string::npos) << split;
  size_t lse = split.find("_row<BLOCK, CLUSTER, false, true>(i0, rank, p", split.find(';', first));
  EXPECT_NE(lse, std::string::npos) << split;
  EXPECT_NE(split.find(", q", lse), std::string::npos) << split;
  EXPECT_NE(a.code.find("tc_exchange_send(&exchange0[rank], acc, &exchangeBarrier, c);"), std::string::npos);
  EXPECT_EQ(split.find("tc_cluster_sync()"), std::string::npos) << split;
  // The per-row values (the target's logit, the loss) in every block, the
  // whole of their one element per row.
  EXPECT_NE(split.find("_row<BLOCK, 1>(i0, 0u, p"), std::string::npos) << split;
  // Block barriers only where a nest reads what the one before stored: the
  // max (read by the log-sum-exp), then before the nest reading the cached
  // row at every column (the gradient); none after it.
  size_t afterMax = split.find("__syncthreads(); // the next nest");
  ASSERT_NE(afterMax, std::string::npos) << split;
  EXPECT_LT(afterMax, lse) << split;
  size_t barrier = split.find("__syncthreads(); // the next nest", afterMax + 1);
  ASSERT_NE(barrier, std::string::npos) << split;
  EXPECT_EQ(split.find("__syncthreads(); // the next nest", barrier + 1), std::string::npos) << split;
  size_t gradient = split.find("_row<BLOCK, CLUSTER>(i0, rank, p", barrier);
  EXPECT_NE(gradient, std::string::npos);
  EXPECT_NE(split.find(", q", gradient), std::string::npos) << split;
  // Every nest with one output per row stores its own buffer: a block
  // never writes over what another block has still to read.
  std::set<int> rowBuffers;
  size_t perRow = 0;
  for (const artifact::Step &st : a.steps)
    if (st.threads == st.extent && (&st == head || st.chainNext || (&st > head && (&st)[-1].chainNext))) {
      const artifact::Storage &s = a.values[size_t(artifact::storageValue(a, st.operands[0]))].storage;
      if (s.kind == artifact::Storage::Kind::Buffer) {
        rowBuffers.insert(s.index);
        ++perRow;
      }
    }
  EXPECT_GT(perRow, 1u);
  EXPECT_EQ(rowBuffers.size(), perRow);
}

// Elementwise nests that read only what is outside their chain (a gelu and
// its derivative, from one product) compute four outputs each per vector
// in one pass, no row cache; a chain whose nests read each other's rows
// (the layer norm above) keeps its row templates.
TEST(CudaCodegen, SiblingElementwiseChainsComputeTogether) {
  trace::Tracer t("sib");
  trace::Tensor x = t.input("x", DType::BF16, {"B", 4096}), b = t.input("b", DType::BF16, {4096});
  trace::Tensor h = t.call("add", {x, b})[0];
  t.output(t.call("gelu", {h})[0]);
  t.output(t.call("exp", {h})[0]);
  artifact::Artifact a = cudaArtifact(t.graph(), "sib");
  size_t heads = 0;
  for (const artifact::Step &s : a.steps) {
    if (s.chainKernel.empty())
      continue;
    ++heads;
    for (const artifact::KernelVariant &v : s.chainVariants)
      EXPECT_EQ(v.cacheBytes, 0) << v.name();
    EXPECT_NE(a.code.find("// " + s.chainKernel + ": 2 sibling elementwise nests"), std::string::npos);
  }
  EXPECT_EQ(heads, 1u);
  EXPECT_NE(a.code.find("_at4(i0 * inner + p, "), std::string::npos);
  // x and b, read by both, through the first nest's pointers (p1, p2): the
  // same loads, so what the nests share (h) is computed once.
  EXPECT_NE(a.code.find("_at4(i0 * inner + p, p3, p1, p2, s0, o1[u])"), std::string::npos) << a.code;

  trace::Tracer u("ln");
  trace::Tensor y = u.input("x", DType::F32, {"B", 4096});
  u.output(u.call("layer_norm", {y, u.input("w", DType::F32, {4096}), u.input("b", DType::F32, {4096})})[0]);
  EXPECT_EQ(cudaArtifact(u.graph(), "ln").code.find("sibling elementwise"), std::string::npos);
}

// An elementwise step that reads a GEMM product only at each element it
// writes, as the product's last reader, writes over it (one buffer); one
// that reads the product transposed does not write over the product.
TEST(CudaCodegen, ElementwiseStepsWriteOverWhatTheyAloneRead) {
  for (bool transposed : {false, true}) {
    trace::Tracer t("inplace");
    trace::Tensor x = t.input("x", DType::F32, {64, 64});
    trace::Tensor h = t.call("matmul", {x, t.input("w1", DType::F32, {64, 64})})[0];
    trace::Tensor other =
        transposed ? t.call("transpose", {h}, {{"dim0", Attr(int64_t(0))}, {"dim1", Attr(int64_t(1))}})[0] : h;
    trace::Tensor s = t.call("mul", {t.call("sigmoid", {h})[0], other})[0];
    t.output(t.call("matmul", {s, t.input("w2", DType::F32, {64, 64})})[0]);
    artifact::Artifact a = cudaArtifact(t.graph(), transposed ? "inplace_t" : "inplace");
    std::vector<const artifact::Step *> gemms;
    for (const artifact::Step &st : a.steps)
      if (st.kind == artifact::Step::Kind::Matmul)
        gemms.push_back(&st);
    ASSERT_EQ(gemms.size(), 2u);
    const artifact::ValueDecl &product = a.values[size_t(gemms[0]->operands[0])];
    const artifact::ValueDecl &scaled = a.values[size_t(gemms[1]->operands[1])];
    ASSERT_EQ(product.storage.kind, artifact::Storage::Kind::Buffer);
    ASSERT_EQ(scaled.storage.kind, artifact::Storage::Kind::Buffer);
    EXPECT_EQ(product.storage.index == scaled.storage.index, !transposed)
        << (transposed ? "read transposed" : "read at each element");
    EXPECT_NO_THROW(artifact::parse(artifact::serialize(a), "inplace.tcx"));
  }
}

TEST(CudaCodegen, ChainsOfRowPassesGetOneKernel) {
  trace::Tracer t("sm");
  trace::Tensor x = t.input("x", DType::F32, {"B", 33});
  t.output(t.call("softmax", {x}, {{"axis", Attr(int64_t(-1))}})[0]);
  artifact::Artifact a = cudaArtifact(t.graph(), "chain");
  size_t heads = 0, chained = 0;
  for (const artifact::Step &s : a.steps) {
    heads += !s.chainKernel.empty();
    chained += s.chainNext;
    if (!s.chainKernel.empty()) {
      std::vector<std::string> names;
      for (const artifact::KernelVariant &v : s.chainVariants)
        names.push_back(v.name());
      EXPECT_EQ(names, (std::vector<std::string>{"b256_r1", "b512_r1", "b1024_r1", "b64_r1"}));
      EXPECT_NE(a.code.find("void __launch_bounds__(512) " + s.chainKernel + "_b512_r1("), std::string::npos);
    }
  }
  EXPECT_EQ(heads, 1u);
  EXPECT_GE(chained, 1u);
}

// Layers that repeat compile once (issue 57): a nest whose kernels are
// another's with the names changed is that nest (its step launches the
// first one's symbol), a chain of the same nests is that chain; the
// source has each kernel once and still compiles. Each layer's dropout has
// a stream of its own, which its kernel reads (not a literal in its text).
TEST(CudaCodegen, RepeatedLayersShareTheirKernels) {
  auto layers = [](int n) {
    trace::Tracer t("stack");
    trace::Tensor x = t.input("x", DType::F32, {"B", 64});
    trace::Tensor seed = t.input("seed", DType::I64, {});
    for (int i = 0; i < n; ++i) {
      trace::Tensor h = t.call("layer_norm", {x}, {{"axis", Attr(int64_t(1))}})[0];
      h = t.call("softmax", {t.call("gelu", {h})[0]}, {{"axis", Attr(int64_t(-1))}})[0];
      h = t.call("dropout", {h, seed}, {{"p", Attr(0.1)}, {"stream", Attr(int64_t(i))}})[0];
      x = t.call("add", {x, h})[0];
    }
    t.output(x);
    return cudaArtifact(t.graph(), "stack");
  };
  artifact::Artifact one = layers(1), four = layers(4);
  auto kernels = [](const artifact::Artifact &a) {
    size_t n = 0;
    for (size_t at = a.code.find("extern \"C\" __global__"); at != std::string::npos;
         at = a.code.find("extern \"C\" __global__", at + 1))
      ++n;
    return n;
  };
  auto distinct = [](const artifact::Artifact &a) {
    std::set<std::string> symbols, chains;
    for (const artifact::Step &s : a.steps) {
      symbols.insert(s.symbol);
      if (!s.chainKernel.empty())
        chains.insert(s.chainKernel);
    }
    return std::make_pair(symbols.size(), chains.size());
  };
  EXPECT_GT(four.steps.size(), 3 * one.steps.size()) << "four layers' steps";
  // The first layer reads the input x, the others the previous layer's sum:
  // the same kernels, so four layers have at most a few more than one.
  EXPECT_LE(kernels(four), kernels(one) + kernels(one) / 2) << kernels(one) << " vs " << kernels(four);
  EXPECT_LE(distinct(four).first, distinct(one).first + 2);
  EXPECT_LE(distinct(four).second, distinct(one).second + 1);
  for (const artifact::Step &s : four.steps) {
    if (s.kind != artifact::Step::Kind::Loop)
      continue;
    for (const artifact::KernelVariant &v : s.variants)
      EXPECT_NE(four.code.find(" " + s.symbol + "_" + v.name() + "("), std::string::npos) << s.symbol;
  }
  if (cuda::Nvrtc::available()) {
    EXPECT_NO_THROW(cuda::Nvrtc::get().compile(four.code, "stack.cu", "sm_90", {}, 1));
  }
}

// Per-row values, then one elementwise pass over the rows (cross-entropy's
// backward): the runtime runs such a chain's own kernels by default. Row
// reductions (softmax) and sibling passes (a gelu and its derivative) keep
// the chain kernel.
TEST(CudaCodegen, ChainsOfOneElementwisePassRunUnfused) {
  auto step = [](int64_t threads, int64_t reduced) {
    artifact::Step s;
    s.extent = Dim::of(4096);
    s.threads = Dim::of(threads);
    s.reduced = Dim::of(reduced);
    return s;
  };
  std::vector<artifact::Step> xent = {step(4096, 1), step(4096, 1), step(4096 * 50304, 1)};
  EXPECT_TRUE(artifact::chainIsOneElementwisePass(xent, 0, 2));
  EXPECT_TRUE(artifact::chainIsOneElementwisePass(xent, 2, 2));
  std::vector<artifact::Step> softmax = {step(4096, 50304), step(4096, 50304), step(4096 * 50304, 1)};
  EXPECT_FALSE(artifact::chainIsOneElementwisePass(softmax, 0, 2));
  std::vector<artifact::Step> siblings = {step(4096 * 4096, 1), step(4096 * 4096, 1)};
  EXPECT_FALSE(artifact::chainIsOneElementwisePass(siblings, 0, 1));
  // Symbolic rows: a step computes one value per row where its threads are
  // its extent.
  std::vector<artifact::Step> symbolic = {step(4096, 1), step(4096, 1), step(4096, 1)};
  for (artifact::Step &s : symbolic)
    s.extent = Dim::symbol("B");
  symbolic[0].threads = symbolic[1].threads = Dim::symbol("B");
  EXPECT_TRUE(artifact::chainIsOneElementwisePass(symbolic, 0, 2));
  symbolic[1].threads = Dim::of(8);
  EXPECT_FALSE(artifact::chainIsOneElementwisePass(symbolic, 0, 2));
}

TEST(CudaCodegen, ArtifactsRefuseBadVariantsAndEpilogues) {
  trace::Tracer t("lin");
  trace::Tensor x = t.input("x", DType::F32, {"B", 8});
  trace::Tensor w = t.input("w", DType::F32, {8, 6});
  t.output(t.call("sum", {t.call("relu", {t.call("matmul", {x, w})[0]})[0]}, {{"axes", Attr(std::vector<int64_t>{1})}})[0]);
  artifact::Artifact good = cudaArtifact(t.graph(), "bad");
  EXPECT_NO_THROW(artifact::parse(artifact::serialize(good), "good.tcx"));
  auto refused = [&](const std::function<void(artifact::Artifact &)> &damage, const std::string &want) {
    artifact::Artifact a = good;
    damage(a);
    try {
      artifact::parse(artifact::serialize(a), "bad.tcx");
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  size_t mm = 0, loop = 0;
  for (size_t i = 0; i < good.steps.size(); ++i)
    (good.steps[i].kind == artifact::Step::Kind::Matmul ? mm : loop) = i;
  refused([&](artifact::Artifact &a) { a.steps[loop].variants.push_back({256, 1, 48, false}); },
          "bad kernel variant b256_l48: 48 lanes");
  refused([&](artifact::Artifact &a) { a.steps[loop].variants.push_back({256, 1, 1, true}); },
          "bad kernel variant b256_r1: a chain kernel's variant");
  refused([&](artifact::Artifact &a) {
    artifact::KernelVariant v{256, 1, 1, false};
    v.cacheBytes = 4096;
    a.steps[loop].variants.push_back(v);
  }, "4096 bytes of row cache");
  refused([&](artifact::Artifact &a) { a.steps[loop].epilogue.bias = true; }, "an epilogue on a step that is not a matmul");
  refused([&](artifact::Artifact &a) { a.steps[mm].epilogue.bias = true; }, "wrong number of operands");
  refused(
      [&](artifact::Artifact &a) {
        a.steps[mm].epilogue.biasGradient = true;
        a.steps[mm].epilogue.activation = artifact::MatmulEpilogue::Activation::Relu;
      },
      "a bias-gradient epilogue with a bias or an activation");
  refused([&](artifact::Artifact &a) { a.binaries["sm_90"] = {0, a.data.size() + 1}; },
          "GPU binary for sm_90 lies outside the data section");
}

// cuDNN reads and writes whole tensors of the shapes a convolution step
// states: a step whose shapes are not one convolution's is refused at load.
TEST(CudaCodegen, ArtifactsRefuseBadConvolutionSteps) {
  trace::Tracer t("cv");
  trace::Tensor x = t.input("x", DType::F32, {"B", 4, 9, 7}), w = t.input("w", DType::F32, {6, 2, 3, 3});
  t.output(t.call("conv2d", {x, w}, {{"groups", Attr(int64_t(2))}, {"stride", Attr(std::vector<int64_t>{2, 1})}})[0]);
  artifact::Artifact good = cudaArtifact(t.graph(), "cv");
  good.tensorcVersion = "test";
  size_t cv = 0;
  for (size_t i = 0; i < good.steps.size(); ++i)
    if (good.steps[i].kind == artifact::Step::Kind::Convolution)
      cv = i;
  ASSERT_EQ(good.steps[cv].kind, artifact::Step::Kind::Convolution);
  artifact::Artifact back = artifact::parse(artifact::serialize(good), "good.tcx");
  EXPECT_EQ(back.steps[cv].convolution.stride, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(back.steps[cv].convolution.groups, 2);
  auto refused = [&](const std::function<void(artifact::ConvolutionStep &)> &damage, const std::string &want) {
    artifact::Artifact a = good;
    damage(a.steps[cv].convolution);
    try {
      artifact::parse(artifact::serialize(a), "bad.tcx");
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused([](artifact::ConvolutionStep &c) { c.stride = {1, 1}; }, "convolution output size does not match");
  refused([](artifact::ConvolutionStep &c) { c.padding = {1, 0}; }, "convolution output size does not match");
  refused([](artifact::ConvolutionStep &c) { c.groups = 1; }, "convolution channels do not match");
  refused([](artifact::ConvolutionStep &c) { c.dilation = {0, 1}; }, "bad convolution dilation");
  refused([](artifact::ConvolutionStep &c) { c.stride = {1}; }, "bad convolution stride");
  refused([](artifact::ConvolutionStep &c) { c.direction = artifact::ConvolutionStep::Direction::BackwardWeight; },
          "convolution");
}

} // namespace

// Chains are bounded: a kernel inlining every chained loop's row pass took
// NVRTC seconds per variant (BERT-base's backward: 77 loops, 5.9 s in
// NVVM). A chain runs at most 16 loops, and loops independent of each other
// (siblings) at most 4, so that the same op of 12 layers forms groups of
// one text, compiled once.
TEST(CudaCodegen, ChainsAreBoundedAndSiblingGroupsShareOneText) {
  auto longest = [](const artifact::Artifact &a) {
    size_t most = 0, run = 0;
    for (const artifact::Step &s : a.steps) {
      run = s.chainKernel.empty() && run == 0 ? 0 : run + 1;
      most = std::max(most, run);
      if (!s.chainNext)
        run = 0;
    }
    return most;
  };
  {
    trace::Tracer t("stack");
    trace::Tensor x = t.input("x", DType::F32, {128, 64});
    for (int i = 0; i < 24; ++i)
      x = t.call("softmax", {t.call("add", {x, x})[0]}, {{"axis", Attr(int64_t(-1))}})[0];
    t.output(x);
    artifact::Artifact a = cudaArtifact(t.graph(), "stack");
    EXPECT_GT(longest(a), 8u);
    EXPECT_LE(longest(a), 16u);
  }
  {
    trace::Tracer t("siblings");
    trace::Tensor x = t.input("x", DType::F32, {128, 64});
    trace::Tensor seed = t.input("seed", DType::I64, {});
    for (int i = 0; i < 12; ++i)
      t.output(t.call("dropout", {x, seed}, {{"p", Attr(0.1)}, {"stream", Attr(int64_t(i))}})[0]);
    artifact::Artifact a = cudaArtifact(t.graph(), "siblings");
    std::set<std::string> chains;
    for (const artifact::Step &s : a.steps)
      if (!s.chainKernel.empty())
        chains.insert(s.chainKernel);
    EXPECT_LE(longest(a), 4u);
    EXPECT_LE(chains.size(), 1u) << "groups of four dropouts are one text";
    if (cuda::Nvrtc::available()) {
      EXPECT_NO_THROW(cuda::Nvrtc::get().compile(a.code, "siblings.cu", "sm_90", {}, 1));
    }
  }
}

// The runtime compiles an artifact's source in parts, each with only the
// generated functions its kernels use (runtime/cuda/TranslationUnits.h):
// real artifacts (attention, chains, row caches, matmul epilogues, an
// AdamW training step) split into parts that together define every kernel
// once, each part smaller than the whole and complete for NVRTC.
TEST(CudaCodegen, PartsOfRealArtifactsCompileWithOnlyTheirFunctions) {
  std::vector<artifact::Artifact> arts;
  for (const auto &[name, g] : gpu::modelGraphs(TENSORC_SOURCE_DIR))
    arts.push_back(cudaArtifact(g, "parts_" + std::to_string(arts.size())));
  ASSERT_GE(arts.size(), 5u);
  for (const artifact::Artifact &a : arts) {
    std::set<std::string> kernels;
    for (size_t at = a.code.find("extern \"C\" __global__"); at != std::string::npos;
         at = a.code.find("extern \"C\" __global__", at + 1))
      kernels.insert(cuda::kernelDefinedBy(a.code.substr(at, a.code.find('\n', at) - at)));
    kernels.erase("");
    std::vector<std::string> parts = cuda::splitTranslationUnit(a.code, 3);
    ASSERT_EQ(parts.size(), 3u);
    for (const std::string &name : kernels) {
      size_t in = 0;
      for (const std::string &p : parts)
        in += p.find(" " + name + "(") != std::string::npos ? 1 : 0;
      EXPECT_EQ(in, 1u) << name;
    }
    for (const std::string &p : parts) {
      size_t text = p.size() - size_t(std::count(p.begin(), p.end(), '\n'));
      EXPECT_LT(text, a.code.size() - size_t(std::count(a.code.begin(), a.code.end(), '\n')));
      // NVRTC's front end alone (it names a function a part lacks; the whole
      // compile of the seven artifacts' parts took 33 s of CI's unit tests).
      if (cuda::Nvrtc::available()) {
        EXPECT_NO_THROW(cuda::Nvrtc::get().compile(p, "part.cu", "sm_90", {"--fdevice-syntax-only"}, 1));
      }
    }
  }
}
