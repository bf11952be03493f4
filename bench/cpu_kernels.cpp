// CPU kernel benchmark (Google Benchmark): a generated fused kernel against
// the machine's memory bandwidth measured in the same run by a STREAM-like
// copy, and against the reference interpreter. Not a test: run it by hand,
//   ninja -C build tensorc-cpu-bench && build/bin/tensorc-cpu-bench
// Bytes counted: each input read once, each output written once.
#include "codegen/cpu/LoopKernel.h"
#include "codegen/cpu/SharedLibrary.h"
#include "compiler/graph/GraphAnalysis.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/trace/Tracer.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/MemRefDescriptor.h"
#include "runtime/host/ThreadPool.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <dlfcn.h>
#include <random>
#include <unistd.h>

using namespace tensorc;

namespace {

HostTensor randomTensor(std::vector<int64_t> shape) {
  HostTensor t(DType::F32, shape);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setF(i, u(rng));
  return t;
}

// The public pointwise workload: gelu(x * a + b) * sigmoid(x), x (n, n).
Graph pointwise() {
  trace::Tracer t("pointwise");
  trace::Tensor x = t.input("x", DType::F32, {"N", "M"});
  trace::Tensor a = t.input("a", DType::F32, {"M"}), b = t.input("b", DType::F32, {"M"});
  t.output(trace::gelu(x * a + b) * trace::sigmoid(x));
  return t.graph();
}

using Kernel = void (*)(void *, void *, void *, void *);

Kernel compilePointwise() {
  static Kernel kernel = [] {
    mlir::MLIRContext ctx;
    mlir::OwningOpRef<mlir::ModuleOp> m = codegen::cpu::buildLoopKernel(ctx, pointwise(), "kernel");
    codegen::cpu::lowerToLLVMDialect(*m);
    std::string path = "/tmp/tensorc-bench-" + std::to_string(::getpid()) + ".so";
    writeFileAtomically(path, codegen::cpu::linkSharedLibrary({codegen::cpu::emitObject(*m)}));
    void *handle = dlopen(path.c_str(), RTLD_NOW);
    return reinterpret_cast<Kernel>(dlsym(handle, "_mlir_ciface_kernel"));
  }();
  return kernel;
}

void Copy(benchmark::State &state) {
  int64_t n = state.range(0);
  std::vector<float> src(size_t(n * n), 1.0f), dst(size_t(n * n));
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * n * n * 4);
}

void GeneratedPointwise(benchmark::State &state) {
  int64_t n = state.range(0);
  Kernel kernel = compilePointwise();
  HostTensor x = randomTensor({n, n}), a = randomTensor({n}), b = randomTensor({n}),
             out(DType::F32, {n, n});
  std::vector<int64_t> dx = memrefDescriptor(x), da = memrefDescriptor(a), db = memrefDescriptor(b),
                       dout = memrefDescriptor(out);
  for (auto _ : state) {
    kernel(dx.data(), da.data(), db.data(), dout.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * n * n * 4);
}

// Rows split across the thread pool: each chunk calls the same kernel on a
// row range of x and out (offset and first size of their descriptors); the
// broadcast vectors are shared.
void GeneratedPointwiseThreaded(benchmark::State &state) {
  int64_t n = state.range(0);
  Kernel kernel = compilePointwise();
  static ThreadPool pool;
  HostTensor x = randomTensor({n, n}), a = randomTensor({n}), b = randomTensor({n}),
             out(DType::F32, {n, n});
  std::vector<int64_t> da = memrefDescriptor(a), db = memrefDescriptor(b);
  for (auto _ : state) {
    pool.parallelFor(n, 64, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> dx = memrefDescriptor(x), dout = memrefDescriptor(out), ca = da, cb = db;
      for (std::vector<int64_t> *d : {&dx, &dout}) {
        (*d)[2] = begin * n;   // offset
        (*d)[3] = end - begin; // rows
      }
      kernel(dx.data(), ca.data(), cb.data(), dout.data());
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * n * n * 4);
  state.counters["threads"] = pool.size();
}

void InterpretedPointwise(benchmark::State &state) {
  int64_t n = state.range(0);
  Graph g = pointwise();
  GraphAnalysis analysis = analyzeGraph(g, "bench");
  std::map<std::string, HostTensor> inputs = {
      {"x", randomTensor({n, n})}, {"a", randomTensor({n})}, {"b", randomTensor({n})}};
  for (auto _ : state)
    benchmark::DoNotOptimize(interpret(g, analysis, inputs).outputs[0].data());
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * n * n * 4);
}

} // namespace

BENCHMARK(Copy)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(GeneratedPointwise)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(GeneratedPointwiseThreaded)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(InterpretedPointwise)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
