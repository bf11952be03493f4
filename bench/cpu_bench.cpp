// The CPU benchmark (Google Benchmark). For every CPU-sized public workload
// (bench/graphs/cpu, from `make_graphs.py --cpu`):
//   compiled   tensorc's CPU backend (fused kernels, tensorc-cpu-pipeline)
//   unfused    the same graph compiled one op per kernel (no tensorc-fuse)
//   interp     the reference interpreter (one iteration: it is slow)
// Counters: GB/s of compulsory traffic (inputs read once, outputs written
// once) and that as a fraction of the machine's copy bandwidth, measured in
// the same run by a STREAM-like multi-threaded copy. For the f32 MLP, the
// same two GEMMs through OpenBLAS alone give the matmul reference.
//
//   ninja -C build tensorc-cpu-bench && build/bin/tensorc-cpu-bench [--benchmark_filter=...]
#include "codegen/cpu/CpuProgram.h"
#include "compiler/driver/Model.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/transforms/BackendPipelines.h"
#include "ir/core/Error.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "runtime/core/Blas.h"
#include "runtime/host/ThreadPool.h"
#include "tensorc/Runtime.h"

#include "mlir/Pass/PassManager.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#ifndef TENSORC_SOURCE_DIR
#error "TENSORC_SOURCE_DIR must be defined"
#endif

using namespace tensorc;
namespace rt = tensorc::runtime;

namespace {

double copyBandwidth = 0; // bytes/s (read + write), measured first

// STREAM-like copy over every hardware thread: 2 x 256 MiB, the best of 20
// (STREAM's convention; this VM's bandwidth varies from run to run).
double measureCopyBandwidth() {
  size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> seconds;
  for (int rep = 0; rep < 20; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        size_t per = bytes / threads, begin = t * per, end = t + 1 == threads ? bytes : begin + per;
        std::memcpy(b.data() + begin, a.data() + begin, end - begin);
      });
    for (auto &t : ts)
      t.join();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  benchmark::DoNotOptimize(b.data());
  return 2.0 * double(bytes) / seconds.front();
}

std::string compile(const Graph &g, bool fuse) {
  mlir::MLIRContext ctx;
  loadTensorcDialects(ctx);
  GraphAnalysis a = analyzeGraph(g, g.name);
  mlir::OwningOpRef<mlir::ModuleOp> module = importGraph(ctx, g, a, g.name);
  mlir::PassManager pm(&ctx);
  if (fuse) {
    buildCpuPipeline(pm, PipelineOptions{});
  } else {
    // The same decompositions and simplifications, then one kernel per op.
    pm.addPass(createFoldConstantsPass());
    buildSimplifyPipeline(pm, PipelineOptions{});
    pm.addPass(createDecomposePass());
  }
  check(mlir::succeeded(pm.run(*module)), g.name + ": pipeline failed");
  artifact::Artifact art = codegen::cpu::compileCpuArtifact(*module, {});
  art.tensorcVersion = "bench";
  return artifact::serialize(art);
}

struct Workload {
  std::string name;
  std::unique_ptr<Model> model;
  std::map<std::string, HostTensor> inputs;
  std::vector<HostTensor> outputs;
  double bytes = 0; // compulsory traffic
};

rt::TensorView viewOf(HostTensor &t) {
  return {rt::ElementType(int(t.dtype())), t.shape(), t.data()};
}

void runCompiled(benchmark::State &state, Workload *w, std::shared_ptr<rt::Executable> exe) {
  rt::Session session(exe);
  std::vector<rt::TensorView> in, out;
  for (const rt::TensorInfo &i : exe->inputs())
    in.push_back(viewOf(w->inputs.at(i.name)));
  for (HostTensor &o : w->outputs)
    out.push_back(viewOf(o));
  session.run(in, out); // warm-up: binds sizes, plans and allocates the arena
  for (auto _ : state)
    session.run(in, out);
  state.counters["GB/s"] = benchmark::Counter(w->bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_copy_bw"] =
      benchmark::Counter(w->bytes / copyBandwidth, benchmark::Counter::kIsIterationInvariantRate);
}

void runInterpreter(benchmark::State &state, Workload *w) {
  for (auto _ : state)
    benchmark::DoNotOptimize(interpret(w->model->graph, w->model->analysis, w->inputs));
  state.counters["GB/s"] = benchmark::Counter(w->bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// The f32 MLP's two GEMMs alone through OpenBLAS (the runtime's GEMM call).
void runGemmsOnly(benchmark::State &state) {
  ThreadPool pool;
  int64_t n = 512, d = 1024, h = 4096;
  std::vector<float> x(size_t(n * d), 0.5f), w1(size_t(d * h), 0.25f), w2(size_t(h * d), 0.125f),
      y1(size_t(n * h)), y2(size_t(n * d));
  for (auto _ : state) {
    rt::matmul({x.data(), DType::F32, {n, d}, false}, {w1.data(), DType::F32, {d, h}, false},
               y1.data(), DType::F32, {n, h}, pool);
    rt::matmul({y1.data(), DType::F32, {n, h}, false}, {w2.data(), DType::F32, {h, d}, false},
               y2.data(), DType::F32, {n, d}, pool);
    benchmark::DoNotOptimize(y2.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * double(n * d * h) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  copyBandwidth = measureCopyBandwidth();
  std::printf("copy bandwidth (%u threads, 256 MiB, best of 20): %.1f GB/s (read + write); GEMM: %s\n",
              std::max(1u, std::thread::hardware_concurrency()), copyBandwidth / 1e9,
              rt::gemmProvider().c_str());
  std::vector<std::unique_ptr<Workload>> workloads;
  std::string dir = std::string(TENSORC_SOURCE_DIR) + "/bench/graphs/cpu";
  std::vector<std::filesystem::path> files;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto &file : files) {
    auto w = std::make_unique<Workload>();
    w->model = loadModel(file.string());
    w->name = w->model->graph.name;
    w->inputs = completeInputs(w->model->graph, w->model->analysis, {}, 1);
    for (const auto &[name, t] : w->inputs)
      w->bytes += double(t.nbytes());
    for (const TensorSpec &o : w->model->analysis.outputs) {
      w->outputs.emplace_back(o.dtype, concreteShape(o.shape, {}));
      w->bytes += double(w->outputs.back().nbytes());
    }
    Workload *wp = w.get();
    for (bool fuse : {true, false}) {
      auto exe = rt::Executable::loadFromMemory(compile(w->model->graph, fuse), w->name);
      benchmark::RegisterBenchmark((w->name + (fuse ? "/compiled" : "/unfused")).c_str(),
                                   [wp, exe](benchmark::State &s) { runCompiled(s, wp, exe); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark((w->name + "/interp").c_str(),
                                 [wp](benchmark::State &s) { runInterpreter(s, wp); })
        ->UseRealTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
    workloads.push_back(std::move(w));
  }
  benchmark::RegisterBenchmark("mlp_f32_fb/openblas_gemms_only", runGemmsOnly)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
