#include "runtime/cuda/CudaProgram.h"
#include "runtime/cuda/Nccl.h"

#include "ir/core/Error.h"
#include "ir/core/FusedAttention.h"
#include "runtime/cache/KernelCache.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/cuda/CudnnConvolution.h"
#include "runtime/cache/Sha256.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/TranslationUnits.h"
#include "runtime/host/ThreadPool.h"
#include "runtime/host/EnvSeconds.h"
#include "runtime/host/HostTensor.h"
#include "runtime/host/Parity.h"
#include "runtime/host/Trace.h"
#include "runtime/tune/Autotuner.h"

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cmath>
#include <exception>
#include <thread>
#include <numeric>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>

namespace tensorc::cuda {

using artifact::Step;

using artifact::Storage;

// Blocks per SM from which attention's register-capped dK/dV kernel runs
// (kernels/Attention.cuh, TC_ATTENTION_BWD_KV_DENSE): two full waves at
// its three blocks per SM. Measured on an H100: faster at 11.6 blocks per
// SM (1536 blocks), slower at 1 or fewer.
constexpr long long kDenseBlocksPerSm = 6;

namespace {

// How the attention step's kernels index its user mask (attentionMaskOperand)
// over the scores [q's batch dims..., L, S] at these shapes; nullopt with
// `why` where they cannot (ir/core/FusedAttention.h).
std::optional<AttentionMaskLayout> maskLayout(const Step &s, const std::vector<std::vector<int64_t>> &shapes,
                                              size_t q, size_t k, std::string &why) {
  std::vector<int64_t> scores(shapes[size_t(s.operands[q])]);
  scores.back() = shapes[size_t(s.operands[k])].end()[-2];
  return attentionMaskLayout(shapes[size_t(s.operands[artifact::attentionMaskOperand(s)])], scores, why);
}

// The cubins of `code` compiled for `arch` in parallel parts
// (TranslationUnits.h), each through the kernel cache where there is one.
struct CompiledParts {
  std::vector<std::string> cubins;
  bool built = false; // some part was compiled (not all from the cache)
};

// TENSORC_LAZY_KERNELS=0: every kernel variant is compiled at load (as
// before the later tier existed), not the heuristics' picks alone.
bool lazyKernelsOff() {
  const char *v = std::getenv("TENSORC_LAZY_KERNELS");
  return v && std::string(v) == "0";
}

// Threads for NVRTC: TENSORC_NVRTC_THREADS, else the CPUs this process may use.
unsigned nvrtcThreads(const std::string &where) {
  if (const char *v = std::getenv("TENSORC_NVRTC_THREADS"); v && *v) {
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    check(*end == '\0' && n >= 1 && n <= 4096,
          where + ": TENSORC_NVRTC_THREADS='" + v + "' is not a number of threads (1 to 4096)");
    return unsigned(n);
  }
  return availableCpus();
}

// TENSORC_NVRTC_FAST_COMPILE=min|mid|max: NVRTC's -Ofast-compile, which
// trades the kernels' speed for compile time (BERT's forward, the 65
// kernels loaded: 41 s -> 28.5 / 15.1 / 10.1 s on the 2-core machine). Off
// by default: what it costs at run time is not measured yet.
std::vector<std::string> nvrtcOptions(const std::string &where) {
  const char *v = std::getenv("TENSORC_NVRTC_FAST_COMPILE");
  if (!v || !*v || std::string(v) == "0")
    return {};
  std::string level = v;
  check(level == "min" || level == "mid" || level == "max",
        where + ": TENSORC_NVRTC_FAST_COMPILE='" + level + "' is not min, mid, max or 0");
  return {"--Ofast-compile=" + level};
}

CompiledParts compileInParts(const std::string &code, const std::string &where, const std::string &arch,
                             KernelCache *cache, const std::string &tensorcVersion) {
  const Nvrtc &nvrtc = Nvrtc::get();
  unsigned threads = nvrtcThreads(where);
  const std::vector<std::string> options = nvrtcOptions(where);
  std::string flags = "--std=c++17";
  for (const std::string &o : options)
    flags += " " + o;
  std::vector<std::string> units = splitTranslationUnit(code, translationUnitParts(code, threads));
  CompiledParts out;
  out.cubins.resize(units.size());
  // NVRTC's own split compile takes the threads no part uses.
  int splitThreads = int(std::max<size_t>(1, threads / units.size()));
  std::vector<std::exception_ptr> errors(units.size());
  std::atomic<bool> built{false};
  auto compilePart = [&](size_t i) {
    try {
      std::string name = units.size() == 1 ? where
                                           : where + " (part " + std::to_string(i + 1) + " of " +
                                                 std::to_string(units.size()) + ")";
      auto build = [&] {
        built = true;
        return nvrtc.compile(units[i], name, arch, options, splitThreads).cubin;
      };
      out.cubins[i] = cache ? cache->getOrBuild(KernelKey{units[i], arch, nvrtc.version(), flags,
                                                          tensorcVersion},
                                                build)
                            : build();
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (size_t i = 1; i < units.size(); ++i)
    workers.emplace_back(compilePart, i);
  compilePart(0);
  for (std::thread &t : workers)
    t.join();
  for (const std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  out.built = built;
  return out;
}

} // namespace

CudaProgram::CudaProgram(const artifact::Artifact &a, const std::string &where,
                         const std::string &kernelCacheDir, int variant)
    : driver_(Driver::get()), arch_("sm_" + std::to_string(driver_.computeCapability())),
      forcedVariant_(variant) {
  // Loading may happen on any thread: PyTorch's backward loaded an
  // artifact on its autograd thread (a uniform-cotangent backward variant),
  // where no context was current: moduleLoadData failed with 201.
  driver_.makeCurrent();
  const char *trace = std::getenv("TENSORC_CUDA_TRACE");
  trace_ = trace && *trace && std::string(trace) != "0";
  const char *overlap = std::getenv("TENSORC_NCCL_OVERLAP");
  overlapCollectives_ = !(overlap && std::string(overlap) == "0");
  const char *group = std::getenv("TENSORC_NCCL_GROUP");
  groupCollectives_ = !(group && std::string(group) == "0");
  const char *defer = std::getenv("TENSORC_NCCL_DEFER");
  deferIssue_ = !(defer && std::string(defer) == "0");
  const char *priority = std::getenv("TENSORC_NCCL_PRIORITY");
  commPriority_ = !(priority && std::string(priority) == "0");
  const char *cudnnAttention = std::getenv("TENSORC_CUDNN_ATTENTION");
  cudnnAttentionOn_ = !(cudnnAttention && std::string(cudnnAttention) == "0");
  cudnnAttention_ = std::make_unique<CudnnAttention>();
  const char *cudnnConvolution = std::getenv("TENSORC_CUDNN_CONVOLUTION");
  cudnnConvolutionOn_ = !(cudnnConvolution && std::string(cudnnConvolution) == "0");
  cudnnConvolution_ = std::make_unique<CudnnConvolution>();
  if (std::optional<double> timeout = secondsFromEnvironment("TENSORC_NCCL_TIMEOUT", where))
    collectiveTimeoutS_ = *timeout;
  for (size_t si = 0; si < a.steps.size(); ++si) {
    const Step &s = a.steps[si];
    if (s.kind != Step::Kind::Collective)
      continue;
    ++collectiveCount_;
    collectiveOrdinal_[si] = collectives_.size();
    collectives_.push_back(artifact::collectiveStepName(s, si));
  }
  for (const Step &s : a.steps)
    if (s.kind == Step::Kind::Matmul) {
      DType d = a.values[size_t(s.operands[1])].dtype;
      check(isFloat(d), where + ": step '" + s.label + "': integer matmul steps are not supported on the GPU (the compiler makes them loop nests; recompile with this tensorc)");
      CublasLt::get(); // fails here, naming the library, if cuBLASLt is missing
      hasMatmul_ = true;
    }
  if (auto it = a.options.find("allow_tf32"); it != a.options.end())
    allowTf32_ = it->second == "true";
  if (auto it = a.binaries.find(arch_); it != a.binaries.end()) {
    compilerVersion_ = "precompiled";
    // Part 0 under the architecture's name, the others as "sm_90#1", ...
    for (size_t part = 0;; ++part) {
      auto at = part == 0 ? it : a.binaries.find(arch_ + "#" + std::to_string(part));
      if (at == a.binaries.end())
        break;
      modules_.push_back(driver_.loadModule(a.data.substr(size_t(at->second.first), size_t(at->second.second))));
    }
  } else {
    compilerVersion_ = Nvrtc::get().version();
    for (const std::string &o : nvrtcOptions(where)) // kernels of another speed: their own tuning choices
      compilerVersion_ += " " + o;
    where_ = where, kernelCacheDir_ = kernelCacheDir, tensorcVersion_ = a.tensorcVersion;
    // The kernels the heuristics launch at the artifact's sizes now; the
    // other variants (the autotuner's candidates, other sizes) when a
    // launch first needs one: NVRTC's time is per kernel, and most of a
    // step's variants never run (BERT's forward: 210 of 643 kernels).
    KernelTiers tiers;
    if (forcedVariant_ < 0 && !lazyKernelsOff()) {
      std::set<std::string> expected = expectedKernels(a);
      tiers = splitKernelTiers(a.code, [&](const std::string &name) { return expected.count(name) > 0; });
    } else {
      tiers.now = a.code;
    }
    laterCode_ = std::move(tiers.later);
    KernelCache cache(kernelCacheDir);
    double startUs = trace::nowUs();
    CompiledParts parts = compileInParts(tiers.now, where, arch_, &cache, a.tensorcVersion);
    trace::add({parts.built ? "NVRTC compile" : "kernel cache hit", "load", startUs, trace::nowUs() - startUs, 0,
                {{"arch", arch_}, {"parts", std::to_string(parts.cubins.size())},
                 {"later kernels", std::to_string(tiers.laterKernels)}}});
    for (const std::string &cubin : parts.cubins)
      modules_.push_back(driver_.loadModule(cubin));
  }
  // A kernel of the later tier is looked up when a launch needs it.
  auto loaded = [&](const std::string &name) -> void * {
    if (!laterCode_.empty() && !driver_.hasFunction(modules_, name))
      return nullptr;
    return driver_.function(modules_, name);
  };
  for (const Step &s : a.steps)
    if (s.epilogue.biasGradient) {
      DType d = a.values[size_t(s.operands[artifact::biasGradientSource(s)])].dtype;
      if (!columnSums_.count(d))
        columnSums_[d] = driver_.function(modules_, "tc_" + a.function + "_column_sums_" + std::string(dtypeName(d)));
    }
  for (const Step &s : a.steps)
    if (s.kind == Step::Kind::ScatterAdd) {
      std::string name = artifact::scatterAddKernel(a, s);
      if (!scatterAdds_.count(name))
        scatterAdds_[name] = driver_.function(modules_, name);
    }
  for (const Step &s : a.steps) {
    std::vector<Launchable> chain;
    for (const artifact::KernelVariant &v : s.chainVariants) {
      // Cluster variants exist (and launch) on sm_90 and later only.
      if (v.cluster > 1 && !clusters()) {
        chain.push_back({nullptr, v, ""});
        continue;
      }
      void *f = loaded(s.chainKernel + "_" + v.name());
      // A row cache larger than the GPU allows is never launched (chainVariant).
      if (f && v.cacheBytes > 0 && v.cacheBytes <= driver_.maxSharedMemoryPerBlock())
        driver_.allowSharedMemory(f, unsigned(v.cacheBytes));
      chain.push_back({f, v, s.chainKernel + "_" + v.name()});
    }
    size_t chainCount = chain.size();
    chainKernels_.push_back(std::move(chain));
    std::vector<AttentionKernel> attention;
    if (s.kind == Step::Kind::Attention) {
      for (const char *part : !s.attention.backward      ? std::vector<const char *>{"_fwd"}
                              : s.attention.savedForward ? std::vector<const char *>{"_bwd_q_saved", "_bwd_kv"}
                                                         : std::vector<const char *>{"_bwd_q", "_bwd_kv"}) {
        AttentionKernel k{driver_.function(modules_, s.symbol + part), 0, 0};
        int launch[2];
        driver_.readGlobal(modules_, s.symbol + part + "_launch", launch, sizeof launch);
        k.rows = launch[0];
        k.sharedBytes = launch[1];
        check(k.rows > 0 && k.sharedBytes >= 0 && k.sharedBytes <= driver_.maxSharedMemoryPerBlock(),
              "cuda: attention kernel '" + s.symbol + part + "' asks for " + std::to_string(k.sharedBytes) +
                  " bytes of shared memory; this GPU gives a block at most " +
                  std::to_string(driver_.maxSharedMemoryPerBlock()));
        if (k.sharedBytes > 0)
          driver_.allowSharedMemory(k.function, unsigned(k.sharedBytes));
        attention.push_back(k);
      }
      // The register-capped dK/dV kernel (kernels/Attention.cuh), which the
      // code generator adds for f16/bf16 at padded head dims up to 64
      // (codegen/cuda/AttentionKernel.cpp): a third entry, null otherwise.
      if (s.attention.backward) {
        const DType dtype = a.values[size_t(s.operands[6])].dtype; // q
        // (Not for f32 gradients of 16-bit operands: the f32-output backward.)
        const bool wide = a.values[size_t(s.operands[0])].dtype != dtype;
        AttentionKernel k{nullptr, attention.back().rows, 0};
        if (dtype != DType::F32 && !wide && s.attention.paddedHeadDim <= 64) {
          const std::string dense = s.symbol + "_bwd_kv_dense";
          k.function = driver_.function(modules_, dense);
          int launch[2];
          driver_.readGlobal(modules_, dense + "_launch", launch, sizeof launch);
          k.rows = launch[0];
          check(k.rows > 0 && launch[1] == 0, "cuda: attention kernel '" + dense + "' has a bad launch record");
        }
        attention.push_back(k);
      }
      // Variant 0 lets cuDNN run a 16-bit attention, >= 1 the generated
      // kernels: --all-variants checks both.
      if (a.values[size_t(s.operands[s.attention.backward ? 6 : s.attention.saveLse ? 2 : 1])].dtype != DType::F32)
        variantCount_ = std::max(variantCount_, 2);
    }
    attentionKernels_.push_back(std::move(attention));
    std::vector<Launchable> variants;
    if (s.kind == Step::Kind::Loop || s.kind == Step::Kind::Convolution) {
      check(!s.variants.empty(), where + ": step '" + s.label + "' has no GPU kernel variants");
      for (const artifact::KernelVariant &v : s.variants)
        variants.push_back({loaded(s.symbol + "_" + v.name()), v, s.symbol + "_" + v.name()});
    }
    // A convolution's variant 0 is cuDNN, its kernel's variants follow.
    const int own = int(variants.size()) + (s.kind == Step::Kind::Convolution ? 1 : 0);
    variantCount_ = std::max({variantCount_, own, int(chainCount)});
    kernels_.push_back(std::move(variants));
  }
  // Constants only (precompiled binaries follow them in the data section).
  size_t constantBytes = 0;
  for (const artifact::ConstantDecl &c : a.constants)
    constantBytes = std::max(constantBytes, size_t(c.offset + c.bytes));
  constants_ = driver_.allocate(std::max<size_t>(constantBytes, 1));
  driver_.copyToDevice(constants_, a.data.data(), constantBytes);
  // Sessions' streams do not wait for the default stream: finish here.
  driver_.synchronize();
}

void precompile(artifact::Artifact &a, const std::string &arch, const std::string &where) {
  check(a.target.kind == "cuda", where + ": --precompile needs a cuda artifact");
  int cc = 0;
  int used = 0;
  check(std::sscanf(arch.c_str(), "sm_%d%n", &cc, &used) == 1 && size_t(used) == arch.size(),
        where + ": --arch '" + arch + "' is not an architecture like sm_90");
  const Nvrtc &nvrtc = Nvrtc::get();
  std::vector<int> archs = nvrtc.supportedArchs();
  check(std::find(archs.begin(), archs.end(), cc) != archs.end(),
        where + ": " + nvrtc.version() + " cannot compile for " + arch);
  CompiledParts parts = compileInParts(a.code, where, arch, nullptr, a.tensorcVersion);
  for (size_t part = 0; part < parts.cubins.size(); ++part) {
    while (a.data.size() % 64)
      a.data.push_back('\0');
    a.binaries[part == 0 ? arch : arch + "#" + std::to_string(part)] = {a.data.size(), parts.cubins[part].size()};
    a.data += parts.cubins[part];
  }
  a.options["precompiled"] = arch;
}

namespace {

// A launch's kernel parameters: the operand pointers of steps first..last
// in order, then the symbol sizes (long long); `params` points into both.
struct KernelArgs {
  std::vector<DevicePtr> pointers;
  std::vector<long long> symbols;
  std::vector<void *> params;
  KernelArgs(const artifact::Artifact &a, size_t first, size_t last, const std::vector<DevicePtr> &ptr,
             const std::vector<int64_t> &symbolValues)
      : symbols(symbolValues.begin(), symbolValues.end()) {
    for (size_t k = first; k <= last; ++k)
      for (int o : a.steps[k].operands)
        pointers.push_back(ptr[size_t(o)]);
    for (DevicePtr &p : pointers)
      params.push_back(&p);
    for (long long &x : symbols)
      params.push_back(&x);
  }
  KernelArgs(const KernelArgs &) = delete; // params point into the members
};

} // namespace

std::set<std::string> CudaProgram::expectedKernels(const artifact::Artifact &a) const {
  std::set<std::string> out;
  const std::map<std::string, int64_t> none; // the artifact's own sizes: static dims only
  std::vector<bool> chained(a.steps.size(), false);
  for (size_t si = 0; si < a.steps.size(); ++si) {
    const Step &s = a.steps[si];
    if (!s.chainKernel.empty()) {
      size_t last = si;
      while (a.steps[last].chainNext)
        ++last;
      std::optional<int64_t> rows = s.extent.evaluate(none);
      int64_t rowWork = artifact::chainRowWork(a.steps, si, last, [&](const Dim &d) { return d.evaluate(none); });
      if (!rows || rowWork < 0) {
        for (const artifact::KernelVariant &v : s.chainVariants)
          out.insert(s.chainKernel + "_" + v.name());
      } else if (!artifact::chainIsOneElementwisePass(a.steps, si, last)) {
        int v = chainVariant(s.chainVariants, *rows, rowWork, driver_.multiprocessors(),
                             driver_.maxSharedMemoryPerBlock(), clusters());
        if (v >= 0 && *rows > 0) { // the chain's kernel, not its steps' own
          out.insert(s.chainKernel + "_" + s.chainVariants[size_t(v)].name());
          for (size_t k = si; k <= last; ++k)
            chained[k] = true;
        }
      }
    }
    if (s.kind == Step::Kind::Convolution) { // cuDNN's, or where it is missing any kernel variant
      for (const artifact::KernelVariant &v : s.variants)
        out.insert(s.symbol + "_" + v.name());
    } else if (s.kind == Step::Kind::Loop && !chained[si]) {
      std::optional<int64_t> threads = s.threads.evaluate(none), reduced = s.reduced.evaluate(none);
      if (threads && reduced) {
        if (*threads > 0)
          out.insert(s.symbol + "_" + s.variants[defaultVariant(s.variants, *threads, *reduced)].name());
      } else {
        for (const artifact::KernelVariant &v : s.variants)
          out.insert(s.symbol + "_" + v.name());
      }
    }
  }
  return out;
}

void *CudaProgram::functionOf(const Launchable &k) const {
  if (void *f = k.function.load(std::memory_order_acquire))
    return f;
  check(k.available(), "cuda: kernel variant " + k.shape.name() + " cannot run on this GPU");
  std::lock_guard<std::mutex> lock(laterMutex_);
  if (void *f = k.function.load(std::memory_order_acquire))
    return f;
  if (!laterCode_.empty()) {
    driver_.makeCurrent();
    KernelCache cache(kernelCacheDir_);
    double startUs = trace::nowUs();
    CompiledParts parts = compileInParts(laterCode_, where_ + " (kernels compiled when first launched)", arch_,
                                         &cache, tensorcVersion_);
    // The kernel that asked (a launch the load's heuristics did not
    // expect, where no autotuning is on, is worth knowing about: it costs
    // every later kernel's compile).
    trace::add({parts.built ? "NVRTC compile (later kernels)" : "kernel cache hit (later kernels)", "load", startUs,
                trace::nowUs() - startUs, 0,
                {{"arch", arch_}, {"parts", std::to_string(parts.cubins.size())}, {"first needed", k.name}}});
    if (trace_)
      std::fprintf(stderr, "tensorc: %s: kernel %s was not compiled at load: the later kernels took %.2f s\n",
                   where_.c_str(), k.name.c_str(), (trace::nowUs() - startUs) / 1e6);
    for (const std::string &cubin : parts.cubins)
      modules_.push_back(driver_.loadModule(cubin));
    laterCode_.clear();
  }
  void *f = driver_.function(modules_, k.name);
  if (k.shape.cacheBytes > 0 && k.shape.cacheBytes <= driver_.maxSharedMemoryPerBlock())
    driver_.allowSharedMemory(f, unsigned(k.shape.cacheBytes));
  k.function.store(f, std::memory_order_release);
  return f;
}

size_t CudaProgram::defaultVariant(const std::vector<artifact::KernelVariant> &variants, int64_t outputs,
                                   int64_t reduced) {
  auto find = [&](int block, int lanes, int items = 1, int vector = 1) {
    artifact::KernelVariant want{block, items, lanes, false};
    want.vector = vector;
    auto it = std::find(variants.begin(), variants.end(), want);
    return it == variants.end() ? std::nullopt : std::optional<size_t>(size_t(it - variants.begin()));
  };
  std::optional<size_t> pick;
  // Many outputs, little or no reduction: four consecutive outputs per
  // thread as vectors where the nest has them, else four outputs BLOCK
  // apart (more loads in flight, shared index arithmetic). Measured on an
  // H100 (pointwise_f32, 8192 x 8192): b256_i1_v4 0.210 ms, b256_i4 0.263,
  // b256_i1 0.293, b512_i2 0.285, b128_i1 0.353.
  // From 2^24 outputs, four vectors per thread: more loads in flight for
  // the bandwidth of an H200 (pointwise_f32, 2^26: 142.6 us against 157.5)
  // and of the backward of a cross-entropy on an H100 (4096 x 50304: 0.63
  // ms against 0.68); on an H100 pointwise_f32 within 3% of one vector.
  if (reduced <= 1 && outputs >= (int64_t(1) << 24))
    pick = find(256, 1, 4, 4);
  if (!pick && reduced <= 1 && outputs >= (int64_t(1) << 16)) // elementwise (vector variants are only theirs)
    pick = find(256, 1, 1, 4);
  if (!pick && reduced < 16 && outputs >= (int64_t(1) << 22))
    pick = find(256, 1, 4);
  else if (reduced >= 4096 || (reduced >= 512 && outputs < 4096))
    pick = find(512, 512);
  else if (reduced >= 128)
    pick = find(256, 32);
  else if (reduced >= 16)
    pick = find(256, 8);
  return pick.value_or(0);
}

int CudaProgram::chainVariant(const std::vector<artifact::KernelVariant> &variants, int64_t rows, int64_t rowWork,
                              int multiprocessors, int64_t maxSharedBytes, bool clusters) {
  // One block per row pays when rows fill the GPU and each row has work
  // for a block; otherwise the steps' own kernels spread better.
  if (variants.empty() || rows < 2 * int64_t(multiprocessors) || rowWork < 256)
    return -1;
  int block = artifact::chainRowThreads(rowWork);
  // The row cache reads each cached operand's row from memory once instead
  // of once per chained step.
  for (const artifact::KernelVariant &v : variants)
    if (v.block == block && v.cacheBytes > 0 && v.cacheBytes <= maxSharedBytes && v.cluster == 1) {
      // A whole row's cache for one block per SM: loads, the passes over
      // shared memory and stores take turns. Split across a cluster of 2,
      // two blocks per SM overlap them.
      if (clusters && v.cacheBytes > maxSharedBytes / 2) {
        int splitBlock = std::min(512, artifact::chainRowThreads((rowWork + 1) / 2));
        for (const artifact::KernelVariant &c : variants)
          if (c.cluster == 2 && c.block == splitBlock && c.cacheBytes <= maxSharedBytes / 2)
            return int(&c - variants.data());
      }
      return int(&v - variants.data());
    }
  artifact::KernelVariant want{block, 1, 1, true};
  auto it = std::find(variants.begin(), variants.end(), want);
  return it == variants.end() ? 0 : int(it - variants.begin());
}

std::string CudaProgram::launchAttention(const artifact::Artifact &a, size_t si,
                                         const std::vector<std::vector<int64_t>> &shapes,
                                         const std::vector<DevicePtr> &ptr, Stream stream,
                                         Workspace &workspace, bool mayMeasure) const {
  const Step &s = a.steps[si];
  const artifact::AttentionStep &at = s.attention;
  const size_t first = at.backward ? 6 : at.saveLse ? 2 : 1; // q's operand
  auto pointer = [&](size_t operand) { return ptr[size_t(s.operands[operand])]; };
  // cuDNN's tensors are described 16-byte aligned: a caller's tensor at an
  // odd offset (a view into a larger buffer) runs the generated kernels.
  const bool aligned = std::all_of(s.operands.begin(), s.operands.end(),
                                   [&](int v) { return ptr[size_t(v)] % 16 == 0; });
  std::optional<CudnnAttentionShape> c = aligned ? cudnnShape(a, si, shapes) : std::nullopt;
  const cudnn::Plan *plan = nullptr;
  if (c) {
    std::string why;
    plan = cudnnAttention_->plan(*c, why);
    if (!plan && trace_)
      std::fprintf(stderr, "tensorc: step %zu (%s): cuDNN declined the attention: %s\n", si, s.label.c_str(),
                   why.c_str());
  }
  if (!plan)
    return launchGeneratedAttention(a, si, shapes, ptr, stream);
  auto runCudnn = [&] {
    growScratch(workspace, CudnnAttention::workspaceBytes(*c, *plan), stream);
    CudnnAttentionTensors t;
    t.q = pointer(first);
    t.k = pointer(first + 1);
    t.v = pointer(first + 2);
    if (c->bias)
      t.bias = pointer(artifact::attentionMaskOperand(s));
    if (at.backward) {
      t.dq = pointer(0), t.dk = pointer(1), t.dv = pointer(2), t.lse = pointer(3), t.delta = pointer(4);
      t.dout = pointer(5), t.o = pointer(9);
    } else {
      t.o = pointer(0);
      t.lse = at.saveLse ? pointer(1) : 0;
    }
    CudnnAttention::run(*c, *plan, t, workspace.scratch, stream);
  };
  size_t choice = 0; // cuDNN's engines by default: 2.2x the generated kernels on attn_bf16_fb (an H100)
  const ChoiceKey memoKey{int64_t(TunedSite::Attention), int64_t(si), c->b, c->h, c->L, c->S, c->D};
  std::optional<int> known = tuner_ && forcedVariant_ < 0 ? knownChoice(memoKey) : std::nullopt;
  if (known) {
    choice = size_t(*known);
  } else if (tuner_ && forcedVariant_ < 0) {
    // Candidates: cuDNN, then the generated kernels, judged on what the step
    // defines: the output (and the statistics a backward reads: both write
    // natural-log log-sum-exps), or dq, dk, dv. The backward's delta
    // (operand 4) is each implementation's own scratch.
    std::vector<int> outputs, inputs;
    const size_t defined = at.backward ? 3 : at.saveLse ? 2 : 1;
    for (size_t o = 0; o < s.operands.size(); ++o) {
      if (o < defined)
        outputs.push_back(s.operands[o]);
      else if (!(at.backward && o == 4))
        inputs.push_back(s.operands[o]);
    }
    runtime::TuneSite site;
    site.label = s.label + (at.backward ? " (attention backward)" : " (attention)");
    site.kernel = tuneKernels_[si];
    // cuDNN's engine and the generated kernels' grids depend on the exact sizes.
    site.bucket = "cudnn=" + std::to_string(cudnn::Library::get().version()) + ",b=" + std::to_string(c->b) +
                  ",h=" + std::to_string(c->h) + ",l=" + std::to_string(c->L) + ",s=" + std::to_string(c->S) +
                  ",d=" + std::to_string(c->D);
    site.dtype = dtypeName(a.values[size_t(s.operands[first])].dtype);
    site.candidates = {"cudnn", "generated"};
    growScratch(workspace, CudnnAttention::workspaceBytes(*c, *plan), stream);
    choice = tuneChoice(
        a, site, {0, 1}, outputs, inputs,
        [&](size_t k) {
          if (k == 0)
            runCudnn();
          else
            launchGeneratedAttention(a, si, shapes, ptr, stream);
        },
        shapes, ptr, stream, mayMeasure);
    rememberChoice(memoKey, int(choice), mayMeasure);
  }
  if (choice == 1)
    return launchGeneratedAttention(a, si, shapes, ptr, stream);
  runCudnn();
  if (trace_)
    std::fprintf(stderr, "tensorc: step %zu (%s): cuDNN attention %s\n", si, s.label.c_str(),
                 at.backward ? "backward" : "forward");
  return std::string("cuDNN attention ") + (at.backward ? "backward" : "forward");
}

std::string CudaProgram::launchGeneratedAttention(const artifact::Artifact &a, size_t si,
                                                  const std::vector<std::vector<int64_t>> &shapes,
                                                  const std::vector<DevicePtr> &ptr, Stream stream) const {
  const Step &s = a.steps[si];
  const artifact::AttentionStep &at = s.attention;
  const size_t first = at.backward ? 6 : at.saveLse ? 2 : 1; // q's operand
  auto pointer = [&](size_t operand) { return ptr[size_t(s.operands[operand])]; };
  const std::vector<int64_t> &qs = shapes[size_t(s.operands[first])], &ks = shapes[size_t(s.operands[first + 1])];
  // [batch..., rows, D], contiguous (the artifact's validation): one batch
  // index per grid row.
  long long bh = 1;
  for (size_t d = 0; d + 2 < qs.size(); ++d)
    bh *= qs[d];
  long long L = qs[qs.size() - 2], S = ks[ks.size() - 2], D = qs.back();
  if (bh == 0)
    return "attention (empty)";
  const std::vector<AttentionKernel> &kernels = attentionKernels_[si];
  check(bh <= 65535, "cuda: step '" + s.label + "': attention over more than 65535 batch entries is not supported");
  long long shape[11] = {L, S, D, D, D, D, D, L * D, S * D, S * D, L * D};
  float scale = float(at.scale);
  // The user mask and how the kernels index it.
  DevicePtr mask = 0;
  AttentionMaskLayout layout;
  if (at.mask != artifact::AttentionStep::Mask::None) {
    std::string why;
    std::optional<AttentionMaskLayout> l = maskLayout(s, shapes, first, first + 1, why);
    check(l.has_value(), "cuda: step '" + s.label + "': attention " + why);
    layout = *l;
    mask = pointer(artifact::attentionMaskOperand(s));
  }
  long long maskIndexing[5] = {layout.heads, layout.outer, layout.inner, layout.row, layout.col};
  // Dropout: the seed's device scalar, the stream, the draw's keep
  // threshold ceil(p 2^24) (Attention.cuh's dropFactor: a draw's top 24
  // bits u keep where u / 2^24 >= p, as the dropout op's) and 1 / (1 - p).
  DevicePtr dropSeed = at.dropout() ? pointer(artifact::attentionSeedOperand(s)) : 0;
  unsigned dropStream = at.dropoutStream;
  unsigned dropThreshold = unsigned(std::ceil(at.dropoutP * 16777216.0));
  float dropScale = at.dropout() ? float(1.0 / (1.0 - at.dropoutP)) : 1.0f;
  // Blocks of query rows (forward, dq) or key rows (dk, dv).
  auto blocks = [&](size_t kernel, long long rows) {
    const long long n = (rows + kernels[kernel].rows - 1) / kernels[kernel].rows;
    check(n <= 0x7fffffff, "cuda: step '" + s.label + "': attention over " + std::to_string(rows) + " rows");
    return unsigned(n);
  };
  auto launch = [&](size_t kernel, std::vector<DevicePtr> tensors, unsigned tiles) {
    std::vector<void *> params;
    for (DevicePtr &p : tensors)
      params.push_back(&p);
    for (long long &x : shape)
      params.push_back(&x);
    params.push_back(&scale);
    params.push_back(&mask);
    for (long long &x : maskIndexing)
      params.push_back(&x);
    params.push_back(&dropSeed);
    params.push_back(&dropStream);
    params.push_back(&dropThreshold);
    params.push_back(&dropScale);
    if (tiles > 0) // no query rows: nothing to write (dk, dv still are: zeros)
      driver_.launch(kernels[kernel].function, tiles, 128, params.data(), stream, unsigned(bh),
                     unsigned(kernels[kernel].sharedBytes));
  };
  // dout, q, k, v, lse, delta -> dk, dv: the register-capped kernel (three
  // blocks per SM) where the grid fills the GPU that often, else the other.
  auto launchKeys = [&]() -> std::string {
    const bool dense = kernels.size() > 2 && kernels[2].function &&
                       (long long)blocks(2, S) * bh >= kDenseBlocksPerSm * driver_.multiprocessors();
    const size_t k = dense ? 2 : 1;
    launch(k, {pointer(5), pointer(6), pointer(7), pointer(8), pointer(3), pointer(4), pointer(1), pointer(2)},
           blocks(k, S));
    return dense ? "_bwd_kv_dense" : "_bwd_kv";
  };
  if (!at.backward) {
    launch(0,
           {pointer(first), pointer(first + 1), pointer(first + 2), pointer(0), at.saveLse ? pointer(1) : 0},
           blocks(0, L));
    return "attention " + s.symbol + "_fwd";
  }
  if (at.savedForward) {
    // dout, q, k, v, out, lse -> dq, delta; then as below.
    launch(0,
           {pointer(5), pointer(6), pointer(7), pointer(8), pointer(9), pointer(3), pointer(0), pointer(4)},
           blocks(0, L));
    return "attention " + s.symbol + "_bwd_q_saved + " + launchKeys();
  }
  // dout, q, k, v -> dq, lse, delta; then dout, q, k, v, lse, delta -> dk, dv.
  launch(0, {pointer(5), pointer(6), pointer(7), pointer(8), pointer(0), pointer(3), pointer(4)}, blocks(0, L));
  return "attention " + s.symbol + "_bwd_q + " + launchKeys();
}

void CudaProgram::setTuner(runtime::Autotuner *tuner, const artifact::Artifact &a) {
  tuner_ = tuner;
  if (!tuner_ || !sourceHash_.empty())
    return;
  sourceHash_ = sha256Hex(a.code);
  tuneKernels_.assign(a.steps.size(), "");
  tuneChainKernels_.assign(a.steps.size(), "");
  for (size_t si = 0; si < a.steps.size(); ++si) {
    const Step &s = a.steps[si];
    if (s.kind == Step::Kind::Convolution) {
      // A convolution's engines: what ranks them beyond the sizes.
      const artifact::ConvolutionStep &c = s.convolution;
      tuneKernels_[si] =
          sha256Hex("cudnn convolution " + c.directionName() + " groups=" + std::to_string(c.groups) + " stride=" +
                    std::to_string(c.stride[0]) + "x" + std::to_string(c.stride[1]) + " padding=" +
                    std::to_string(c.padding[0]) + "x" + std::to_string(c.padding[1]) + " dilation=" +
                    std::to_string(c.dilation[0]) + "x" + std::to_string(c.dilation[1]) + " dtype=" +
                    std::string(dtypeName(a.values[size_t(s.operands[0])].dtype)) + (allowTf32_ ? " tf32" : "") +
                    (c.channelsLast ? " nhwc" : ""))
              .substr(0, 32);
      continue;
    }
    if (s.kind == Step::Kind::Attention) {
      // cuDNN or the generated kernels (their source, direction and mask).
      tuneKernels_[si] = sha256Hex(sourceHash_ + ":" + s.symbol + (s.attention.backward ? ":backward" : ":forward") +
                                   (s.attention.causal ? ":causal" : "") + (s.attention.saveLse ? ":lse" : ""))
                             .substr(0, 32);
      continue;
    }
    if (s.kind != Step::Kind::Loop)
      continue;
    tuneKernels_[si] = sha256Hex(sourceHash_ + ":" + s.symbol).substr(0, 32);
    if (!s.chainKernel.empty())
      tuneChainKernels_[si] = sha256Hex(sourceHash_ + ":" + s.chainKernel).substr(0, 32);
  }
}

std::string CudaProgram::tuningDevice() const {
  return driver_.deviceName() + " " + arch_ + " " + std::to_string(driver_.multiprocessors()) + " SMs";
}

std::optional<int> CudaProgram::knownChoice(const ChoiceKey &key) const {
  std::lock_guard<std::mutex> lock(choicesMutex_);
  auto it = choices_.find(key);
  return it == choices_.end() ? std::nullopt : std::optional<int>(it->second);
}

int CudaProgram::rememberChoice(const ChoiceKey &key, int choice, bool mayMeasure) const {
  if (mayMeasure) {
    std::lock_guard<std::mutex> lock(choicesMutex_);
    choices_[key] = choice;
  }
  return choice;
}

size_t CudaProgram::tuneChoice(const artifact::Artifact &a, runtime::TuneSite site, const std::vector<size_t> &order,
                               const std::vector<int> &outputs, const std::vector<int> &inputs,
                               const std::function<void(size_t)> &launchCandidate,
                               const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
                               Stream stream, bool mayMeasure) const {
  auto bytesOf = [&](int v) {
    size_t n = dtypeSize(a.values[size_t(v)].dtype);
    for (int64_t d : shapes[size_t(v)])
      n *= size_t(d);
    return n;
  };
  // Steps writing over what they read cannot run twice with the same
  // result: they keep the heuristic.
  for (int out : outputs)
    for (int in : inputs) {
      DevicePtr o = ptr[size_t(out)], p = ptr[size_t(in)];
      size_t ob = bytesOf(out), b = bytesOf(in);
      if (b && ob && p < o + ob && o < p + b)
        return order[0];
    }
  // Allocated only when measuring (snapshot), never on a known choice.
  // `reference`: the outputs after the default candidate ran (what the
  // launch leaves, restored after the trials); `expected`: what it writes
  // into poisoned outputs, which every candidate must equal. They differ
  // where the launch writes part of its output (the q, k and v parts of a
  // fused QKV gradient are three launches): there both stay poison.
  std::vector<HostTensor> reference, expected;
  std::vector<double> largest;
  size_t lastRun = 0; // the reference's candidate, run before snapshot()
  runtime::TrialHooks hooks;
  hooks.run = [&](size_t k) {
    if (!mayMeasure)
      fail("cuda: autotuning cannot measure while a CUDA graph is captured");
    lastRun = k;
    launchCandidate(order[k]);
    driver_.synchronize(stream);
  };
  hooks.poison = [&] {
    for (int out : outputs)
      driver_.fill(ptr[size_t(out)], 0xff, bytesOf(out), stream);
  };
  auto copyOutputs = [&](std::vector<HostTensor> &to) {
    to.clear();
    for (int out : outputs) {
      to.emplace_back(a.values[size_t(out)].dtype, shapes[size_t(out)]);
      driver_.copyToHost(to.back().data(), ptr[size_t(out)], bytesOf(out), stream);
    }
    driver_.synchronize(stream);
  };
  hooks.restore = [&] {
    for (size_t i = 0; i < outputs.size(); ++i)
      driver_.copyToDevice(ptr[size_t(outputs[i])], reference[i].data(), bytesOf(outputs[i]), stream);
    driver_.synchronize(stream);
  };
  hooks.snapshot = [&] {
    copyOutputs(reference);
    hooks.poison();
    hooks.run(lastRun);
    copyOutputs(expected);
    largest.clear();
    for (const HostTensor &e : expected)
      largest.push_back(largestMagnitude(e));
    hooks.restore();
  };
  hooks.compare = [&]() -> std::string {
    for (size_t i = 0; i < outputs.size(); ++i) {
      HostTensor got(expected[i].dtype(), expected[i].shape());
      driver_.copyToHost(got.data(), ptr[size_t(outputs[i])], bytesOf(outputs[i]), stream);
      driver_.synchronize(stream);
      std::string why = candidateMismatch(got, expected[i], largest[i]);
      if (!why.empty())
        return "wrong output: " + why;
    }
    return "";
  };
  hooks.nowUs = [&] {
    if (mayMeasure) // never inside a capture
      driver_.synchronize(stream);
    return trace::nowUs();
  };
  // Device time between events, from a cold L2 (as Triton's do_bench):
  // host clocks around a synchronized launch add its launch latency (5-20
  // us) and their noise to kernels of tens of microseconds.
  hooks.timeUs = [&](size_t k) {
    if (!mayMeasure)
      fail("cuda: autotuning cannot measure while a CUDA graph is captured");
    const size_t flushBytes = 2 * size_t(driver_.l2CacheBytes());
    if (!l2Flush_)
      l2Flush_ = driver_.allocate(flushBytes);
    if (!tuneStart_)
      tuneStart_ = driver_.createEvent();
    if (!tuneEnd_)
      tuneEnd_ = driver_.createEvent();
    driver_.fill(l2Flush_, 0, flushBytes, stream);
    driver_.record(tuneStart_, stream);
    launchCandidate(order[k]);
    driver_.record(tuneEnd_, stream);
    return double(driver_.elapsedMs(tuneStart_, tuneEnd_)) * 1e3;
  };
  if (!mayMeasure) {
    // While capturing: only what is known (memory, cache); a miss in
    // max-autotune mode keeps the heuristic rather than measure.
    try {
      return order[tuner_->choose(site, hooks)];
    } catch (const Error &e) {
      if (std::string(e.what()).find("autotune (strict)") != std::string::npos)
        throw;
      return order[0];
    }
  }
  return order[tuner_->choose(site, hooks)];
}

size_t CudaProgram::tunedVariant(const artifact::Artifact &a, size_t si, size_t heuristic, int64_t threads,
                                 int64_t reduced, const std::vector<std::vector<int64_t>> &shapes,
                                 const std::vector<DevicePtr> &ptr, Stream stream, void **params,
                                 bool mayMeasure) const {
  const ChoiceKey memoKey{int64_t(TunedSite::Loop), int64_t(si), int64_t(heuristic), threads, reduced};
  if (std::optional<int> known = knownChoice(memoKey))
    return size_t(*known);
  const Step &s = a.steps[si];
  const std::vector<Launchable> &ks = kernels_[si];
  // Candidates: the heuristic's first, then the others in artifact order.
  std::vector<size_t> order = {heuristic};
  for (size_t k = 0; k < ks.size(); ++k)
    if (k != heuristic)
      order.push_back(k);
  int out = s.operands[0];
  runtime::TuneSite site;
  site.kernel = tuneKernels_[si];
  site.label = s.label;
  site.bucket = "outputs=" + runtime::powerOfTwoBucket(threads) + ",reduced=" + runtime::powerOfTwoBucket(reduced);
  site.dtype = dtypeName(a.values[size_t(out)].dtype);
  for (size_t k : order)
    site.candidates.push_back(ks[k].shape.name());
  const size_t choice = tuneChoice(
      a, site, order, {out}, std::vector<int>(s.operands.begin() + 1, s.operands.end()),
      [&](size_t k) {
        const Launchable &l = ks[k];
        int64_t perBlock = l.shape.outputsPerBlock();
        driver_.launch(functionOf(l), unsigned((threads + perBlock - 1) / perBlock), unsigned(l.shape.block), params,
                       stream);
      },
      shapes, ptr, stream, mayMeasure);
  return size_t(rememberChoice(memoKey, int(choice), mayMeasure));
}

int CudaProgram::tunedChainVariant(const artifact::Artifact &a, size_t si, size_t last, int heuristic, int64_t rows,
                                   int64_t rowWork, const std::vector<std::vector<int64_t>> &shapes,
                                   const std::vector<DevicePtr> &ptr, Stream stream, void **params,
                                   const std::function<void()> &launchUnfused, bool mayMeasure) const {
  const ChoiceKey memoKey{int64_t(TunedSite::Chain), int64_t(si), heuristic, rows, rowWork};
  if (std::optional<int> known = knownChoice(memoKey))
    return *known;
  const Step &s = a.steps[si];
  const std::vector<Launchable> &ks = chainKernels_[si];
  // Candidates: the heuristic's first, then every other variant this GPU
  // can launch (row caches that fit its shared memory), then the steps'
  // own kernels one after another ("unfused": index ks.size()).
  const size_t unfused = ks.size();
  std::vector<size_t> order = {heuristic < 0 ? unfused : size_t(heuristic)};
  for (size_t k = 0; k < ks.size(); ++k)
    if (int(k) != heuristic && ks[k].shape.cacheBytes <= driver_.maxSharedMemoryPerBlock() && ks[k].available())
      order.push_back(k);
  if (heuristic >= 0)
    order.push_back(unfused);
  // Every step's output; the inputs are what the chain reads from outside
  // (not an output, nor a view of one: a reshape aliases its value).
  auto storageOf = [&](int v) { return artifact::storageValue(a, v); };
  std::vector<int> outputs, inputs;
  std::set<int> written;
  for (size_t k = si; k <= last; ++k) {
    outputs.push_back(a.steps[k].operands[0]);
    written.insert(storageOf(a.steps[k].operands[0]));
  }
  for (size_t k = si; k <= last; ++k)
    for (size_t o = 1; o < a.steps[k].operands.size(); ++o)
      if (!written.count(storageOf(a.steps[k].operands[o])))
        inputs.push_back(a.steps[k].operands[o]);
  runtime::TuneSite site;
  site.kernel = tuneChainKernels_[si];
  site.label = s.label + " (chain)";
  site.bucket = "rows=" + runtime::powerOfTwoBucket(rows) + ",row=" + runtime::powerOfTwoBucket(rowWork);
  site.dtype = dtypeName(a.values[size_t(outputs.back())].dtype);
  for (size_t k : order)
    site.candidates.push_back(k == unfused ? "unfused" : ks[k].shape.name());
  const size_t choice = tuneChoice(
      a, site, order, outputs, inputs,
      [&](size_t k) {
        if (k == unfused)
          launchUnfused();
        else
          driver_.launch(functionOf(ks[k]), unsigned(rows * ks[k].shape.cluster), unsigned(ks[k].shape.block), params,
                         stream, 1, unsigned(ks[k].shape.cacheBytes));
      },
      shapes, ptr, stream, mayMeasure);
  return rememberChoice(memoKey, choice == unfused ? -1 : int(choice), mayMeasure);
}

int CudaProgram::tunedGemmRank(const artifact::Artifact &a, size_t si, const MatmulDims &dims,
                               const GemmEpilogue &epilogue, const std::vector<std::vector<int64_t>> &shapes,
                               const std::vector<DevicePtr> &ptr, Stream stream, DevicePtr workspace,
                               bool mayMeasure) const {
  const ChoiceKey memoKey{int64_t(TunedSite::Gemm), int64_t(si), dims.batches, dims.M, dims.N, dims.K,
                          dims.batches > 1 ? dims.aOffset(1) - dims.aOffset(0) : 0,
                          dims.batches > 1 ? dims.bOffset(1) - dims.bOffset(0) : 0};
  if (std::optional<int> known = knownChoice(memoKey))
    return *known;
  const Step &s = a.steps[si];
  const int c = s.operands[0], l = s.operands[1], r = s.operands[2];
  const DType dtype = a.values[size_t(l)].dtype;
  const CublasLt &lt = CublasLt::get();
  auto remember = [&](int rank) { return rememberChoice(memoKey, rank, mayMeasure); };
  auto run = [&](size_t rank) {
    lt.matmul(ptr[size_t(l)], s.transposeA, ptr[size_t(r)], s.transposeB, ptr[size_t(c)], dtype, dims, epilogue,
              stream, workspace, GemmAlgorithm{int(rank), nullptr});
  };
  int count = 0;
  lt.matmul(ptr[size_t(l)], s.transposeA, ptr[size_t(r)], s.transposeB, ptr[size_t(c)], dtype, dims, epilogue,
            stream, workspace, GemmAlgorithm{0, &count});
  if (count < 2)
    return remember(0);
  // Candidates: cuBLASLt's ranking (its first the default), each checked
  // against the first's output within the dtype's tolerance (split-K
  // algorithms sum in another order).
  std::vector<size_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), size_t(0));
  runtime::TuneSite site;
  site.label = s.label + " (cuBLASLt matmul)";
  const std::string problem = std::string("cublaslt matmul ") + std::string(dtypeName(dtype)) + (s.transposeA ? " aT" : "") +
                              (s.transposeB ? " bT" : "") + " epilogue=" + std::string(s.epilogue.name()) +
                              (allowTf32_ ? " tf32" : "");
  site.kernel = sha256Hex(problem).substr(0, 32);
  // The ranking depends on cuBLASLt's version and the exact problem.
  site.bucket = "cublaslt=" + std::to_string(lt.version()) + ",batches=" + std::to_string(dims.batches) +
                ",m=" + std::to_string(dims.M) + ",n=" + std::to_string(dims.N) + ",k=" + std::to_string(dims.K) +
                (dims.batches > 1 ? ",a_batch_stride=" + std::to_string(dims.aOffset(1) - dims.aOffset(0)) +
                                        ",b_batch_stride=" + std::to_string(dims.bOffset(1) - dims.bOffset(0))
                                  : "");
  site.dtype = dtypeName(dtype);
  for (size_t k : order)
    site.candidates.push_back("cublaslt_algo_" + std::to_string(k + 1));
  std::vector<int> inputs(s.operands.begin() + 1, s.operands.end());
  return remember(int(tuneChoice(a, site, order, {c}, inputs, run, shapes, ptr, stream, mayMeasure)));
}

CudaProgram::~CudaProgram() {
  if (constants_)
    driver_.free(constants_);
  driver_.free(l2Flush_);
  if (tuneStart_)
    driver_.destroyEvent(tuneStart_);
  if (tuneEnd_)
    driver_.destroyEvent(tuneEnd_);
}

std::optional<CudnnAttentionShape> CudaProgram::cudnnShape(const artifact::Artifact &a, size_t si,
                                                           const std::vector<std::vector<int64_t>> &shapes) const {
  const Step &s = a.steps[si];
  const artifact::AttentionStep &at = s.attention;
  // (Bool masks: generated kernels; cuDNN's graphs take an additive one.)
  // (Dropout: generated kernels; cuDNN's draws its own mask.)
  if (!cudnnAttentionOn_ || forcedVariant_ >= 1 || (at.backward && !at.savedForward) ||
      at.mask == artifact::AttentionStep::Mask::Bool || at.dropout())
    return std::nullopt;
  const size_t first = at.backward ? 6 : at.saveLse ? 2 : 1; // q's operand
  const DType dtype = a.values[size_t(s.operands[first])].dtype;
  // (An f32 output of 16-bit operands: the generated kernels alone.)
  if ((dtype != DType::F16 && dtype != DType::BF16) || a.values[size_t(s.operands[0])].dtype != dtype)
    return std::nullopt;
  const std::vector<int64_t> &qs = shapes[size_t(s.operands[first])], &ks = shapes[size_t(s.operands[first + 1])];
  if (qs.size() < 2)
    return std::nullopt;
  CudnnAttentionShape c;
  c.dtype = dtype == DType::F16 ? cudnn::kHalf : cudnn::kBfloat16;
  // [batch..., heads, rows, D]: the last batch index as cuDNN's heads.
  const size_t n = qs.size();
  c.h = n >= 3 ? qs[n - 3] : 1;
  for (size_t d = 0; d + 3 < n; ++d)
    c.b *= qs[d];
  c.L = qs[n - 2];
  c.S = ks[ks.size() - 2];
  c.D = qs.back();
  c.causal = at.causal;
  c.backward = at.backward;
  c.stats = at.backward || at.saveLse;
  c.scale = float(at.scale);
  if (at.mask == artifact::AttentionStep::Mask::Additive) {
    std::string why;
    std::optional<AttentionMaskLayout> l = maskLayout(s, shapes, first, first + 1, why);
    // Only masks shared by every entry of the leading batch dims: with a
    // batch dim of 2 in the bias, cuDNN 9.19's results were wrong on an
    // H100 (docs/cuda-backend.md, "User masks").
    if (!l || (l->outer != 0 && c.b > 1))
      return std::nullopt;
    // Dims of 1 where it broadcasts (stride 0), then strides cuDNN accepts.
    const int64_t full[4] = {c.b, c.h, c.L, c.S}, stride[4] = {l->outer, l->inner, l->row, l->col};
    for (int d = 0; d < 4; ++d) {
      c.biasDims[size_t(d)] = stride[d] == 0 ? 1 : full[d];
      c.biasStrides[size_t(d)] = stride[d] == 0 ? 1 : stride[d];
    }
    c.bias = true;
  }
  if (!CudnnAttention::eligible(c))
    return std::nullopt;
  return c;
}

std::optional<CudnnConvolutionShape>
CudaProgram::convolutionShape(const artifact::Artifact &a, size_t si,
                              const std::vector<std::vector<int64_t>> &shapes) const {
  const Step &s = a.steps[si];
  if (!cudnnConvolutionOn_ || forcedVariant_ >= 1)
    return std::nullopt;
  const artifact::ConvolutionStep &c = s.convolution;
  using Direction = artifact::ConvolutionStep::Direction;
  const artifact::ConvolutionOperands o = artifact::convolutionOperands(s);
  const std::vector<int64_t> &x = shapes[size_t(o.x)], &w = shapes[size_t(o.w)], &y = shapes[size_t(o.y)];
  const DType dtype = a.values[size_t(s.operands[0])].dtype;
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || x[0] == 0 ||
      (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16))
    return std::nullopt;
  CudnnConvolutionShape p;
  p.direction = c.direction == Direction::Forward         ? cudnn::ConvolutionDirection::Forward
                : c.direction == Direction::BackwardInput ? cudnn::ConvolutionDirection::BackwardData
                                                          : cudnn::ConvolutionDirection::BackwardFilter;
  p.dtype = dtype == DType::F16 ? cudnn::kHalf : dtype == DType::BF16 ? cudnn::kBfloat16 : cudnn::kFloat;
  if (c.channelsLast) { // NHWC shapes; w [k, r, s, c / groups]
    p.n = x[0], p.c = x[3], p.h = x[1], p.w = x[2];
    p.k = w[0], p.r = w[1], p.s = w[2];
    p.p = y[1], p.q = y[2];
    p.channelsLast = true;
  } else {
    p.n = x[0], p.c = x[1], p.h = x[2], p.w = x[3];
    p.k = w[0], p.r = w[2], p.s = w[3];
    p.p = y[2], p.q = y[3];
  }
  p.groups = c.groups;
  for (size_t i = 0; i < 2; ++i) {
    p.stride[i] = c.stride[i];
    p.padding[i] = c.padding[i];
    p.dilation[i] = c.dilation[i];
  }
  p.allowTf32 = allowTf32_;
  return p;
}

std::string CudaProgram::launchConvolution(const artifact::Artifact &a, size_t si,
                                           const std::vector<std::vector<int64_t>> &shapes,
                                           const std::vector<DevicePtr> &ptr, Stream stream, Workspace &workspace,
                                           bool mayMeasure) const {
  const Step &s = a.steps[si];
  // cuDNN's tensors are described 16-byte aligned.
  const bool aligned = std::all_of(s.operands.begin(), s.operands.end(),
                                   [&](int v) { return ptr[size_t(v)] % 16 == 0; });
  std::optional<CudnnConvolutionShape> c = aligned ? convolutionShape(a, si, shapes) : std::nullopt;
  if (!c)
    return "";
  std::string why;
  const CudnnConvolutionEngines *e = cudnnConvolution_->engines(*c, why);
  if (!e) {
    if (trace_)
      std::fprintf(stderr, "tensorc: step %zu (%s): cuDNN declined the convolution: %s\n", si, s.label.c_str(),
                   why.c_str());
    return "";
  }
  const artifact::ConvolutionOperands o = artifact::convolutionOperands(s);
  auto run = [&](size_t k) {
    const cudnn::Plan &p = *e->plans[k];
    growScratch(workspace, size_t(p.workspaceBytes()), stream);
    CudnnConvolution::run(p, ptr[size_t(o.x)], ptr[size_t(o.w)], ptr[size_t(o.y)], workspace.scratch, stream);
  };
  size_t choice = 0;
  const ChoiceKey memoKey{int64_t(TunedSite::Convolution), int64_t(si), c->n, c->c, c->h, c->w, c->k, c->r, c->s};
  std::optional<int> known = tuner_ && forcedVariant_ < 0 ? knownChoice(memoKey) : std::nullopt;
  if (known) {
    choice = size_t(*known);
  } else if (tuner_ && forcedVariant_ < 0 && e->plans.size() > 1) {
    // Candidates: cuDNN's engines in its heuristic's order (the first its
    // own choice), each checked against the first's output.
    std::vector<size_t> candidates(e->plans.size());
    std::iota(candidates.begin(), candidates.end(), size_t(0));
    runtime::TuneSite site;
    site.label = s.label + " (cuDNN convolution)";
    // The engines' ranking depends on cuDNN's version and the exact sizes.
    site.bucket = "cudnn=" + std::to_string(cudnn::Library::get().version()) + ",n=" + std::to_string(c->n) +
                  ",c=" + std::to_string(c->c) + ",h=" + std::to_string(c->h) + ",w=" + std::to_string(c->w) +
                  ",k=" + std::to_string(c->k) + ",r=" + std::to_string(c->r) + ",s=" + std::to_string(c->s);
    site.kernel = tuneKernels_[si];
    site.dtype = dtypeName(a.values[size_t(s.operands[0])].dtype);
    for (size_t k : candidates)
      site.candidates.push_back("cudnn_engine_" + std::to_string(k + 1));
    growScratch(workspace, size_t(e->workspaceBytes()), stream);
    choice = tuneChoice(a, site, candidates, {s.operands[0]}, {s.operands[1], s.operands[2]}, run, shapes, ptr,
                        stream, mayMeasure);
    rememberChoice(memoKey, int(choice), mayMeasure);
  }
  run(choice);
  const std::string what = "cuDNN convolution " + s.convolution.directionName() +
                           (choice ? " (engine " + std::to_string(choice + 1) + " of the ranking)" : "");
  if (trace_)
    std::fprintf(stderr, "tensorc: step %zu (%s): %s\n", si, s.label.c_str(), what.c_str());
  return what;
}

void CudaProgram::growScratch(Workspace &workspace, size_t bytes, Stream stream) const {
  if (bytes <= workspace.scratchBytes)
    return;
  if (workspace.scratch) {
    driver_.synchronize(stream); // queued work may still use the old scratch
    driver_.free(workspace.scratch);
    workspace.scratch = 0;
    workspace.scratchBytes = 0;
  }
  workspace.scratch = driver_.allocate(bytes);
  workspace.scratchBytes = bytes;
}

void CudaProgram::reserve(const artifact::Artifact &a, const std::vector<std::vector<int64_t>> &shapes,
                          Stream stream, Workspace &workspace) const {
  driver_.makeCurrent();
  if (hasMatmul_ && !workspace.gemm)
    workspace.gemm = driver_.allocate(CublasLt::kWorkspaceBytes);
  reserveCollectives(workspace);
  for (size_t si = 0; si < a.steps.size(); ++si) {
    std::string why;
    if (a.steps[si].kind == Step::Kind::Attention)
      if (std::optional<CudnnAttentionShape> c = cudnnShape(a, si, shapes))
        if (const cudnn::Plan *p = cudnnAttention_->plan(*c, why))
          growScratch(workspace, CudnnAttention::workspaceBytes(*c, *p), stream);
    if (a.steps[si].kind == Step::Kind::Convolution)
      if (std::optional<CudnnConvolutionShape> c = convolutionShape(a, si, shapes))
        if (const CudnnConvolutionEngines *e = cudnnConvolution_->engines(*c, why))
          growScratch(workspace, size_t(e->workspaceBytes()), stream); // any engine the tuner may pick
  }
}

void CudaProgram::reserveCollectives(Workspace &workspace) const {
  if (!collectiveCount_ || !overlapCollectives_)
    return;
  // High priority (as NCCL's own streams in PyTorch can be): a collective's
  // few blocks start as soon as an SM frees up, not after the compute
  // kernels queued before them.
  if (!workspace.comm)
    workspace.comm = driver_.createStream(commPriority_);
  while (workspace.commEvents.size() < 2 * collectiveCount_)
    workspace.commEvents.push_back(driver_.createEvent(/*timing=*/false));
}

void CudaProgram::launch(const artifact::Artifact &a, const std::vector<int64_t> &symbolValues,
                         const std::map<std::string, int64_t> &bindings,
                         const std::vector<std::vector<int64_t>> &shapes,
                         const std::vector<DevicePtr> &ptr, Stream stream, Workspace &workspace,
                         const StepMarker &mark, bool mayMeasure) const {
  driver_.makeCurrent();
  auto bytesOf = [&](int v) {
    size_t n = dtypeSize(a.values[size_t(v)].dtype);
    for (int64_t d : shapes[size_t(v)])
      n *= size_t(d);
    return n;
  };
  // Collectives queued on the communication stream and not yet waited
  // for: their done event and the memory they read and write. A step that
  // touches any of it (its output read, its operand's buffer reused by the
  // memory plan) first makes the launch's stream wait; the launch ends
  // waiting for the rest, so its stream's order covers everything.
  using Memory = std::vector<std::pair<DevicePtr, size_t>>; // (start, bytes)
  struct Pending {
    void *done;
    Memory memory;
  };
  std::vector<Pending> pending;
  size_t issued = 0;
  // Whether the steps from `first` (its chain) read or write `memory`.
  auto touches = [&](size_t first, const Memory &memory) {
    size_t last = first;
    while (a.steps[last].chainNext && last + 1 < a.steps.size())
      ++last;
    for (size_t si = first; si <= last; ++si)
      for (int v : a.steps[si].operands)
        for (const auto &[p, bytes] : memory)
          if (bytes && bytesOf(v) && ptr[size_t(v)] < p + bytes && p < ptr[size_t(v)] + bytesOf(v))
            return true;
    return false;
  };
  auto waitForCollectivesTouching = [&](size_t first) {
    for (auto it = pending.begin(); it != pending.end();) {
      if (touches(first, it->memory)) {
        driver_.wait(stream, it->done);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  };
  // Queues step si's own kernel (the default variant, or the autotuner's
  // where `tune`); returns what ran.
  auto launchStep = [&](size_t si, bool tune) -> std::string {
    const Step &s = a.steps[si];
    int64_t threads = *s.threads.evaluate(bindings);
    if (threads == 0)
      return "empty";
    KernelArgs args(a, si, si, ptr, symbolValues);
    const std::vector<Launchable> &ks = kernels_[si];
    int64_t reduced = *s.reduced.evaluate(bindings);
    // A convolution's forced variant v >= 1 is its kernel's variant v - 1.
    const int forced = s.kind == Step::Kind::Convolution ? std::max(forcedVariant_ - 1, 0) : forcedVariant_;
    size_t pick = forcedVariant_ >= 0 ? std::min(size_t(forced), ks.size() - 1)
                                      : defaultVariant(s.variants, threads, reduced);
    if (tune && tuner_ && forcedVariant_ < 0 && ks.size() > 1 && s.kind == Step::Kind::Loop)
      pick = tunedVariant(a, si, pick, threads, reduced, shapes, ptr, stream, args.params.data(), mayMeasure);
    const Launchable &k = ks[pick];
    int64_t perBlock = k.shape.outputsPerBlock();
    int64_t grid = (threads + perBlock - 1) / perBlock;
    check(grid <= 0x7fffffff, "cuda: too many threads for one launch");
    driver_.launch(functionOf(k), unsigned(grid), unsigned(k.shape.block), args.params.data(), stream);
    if (trace_)
      std::fprintf(stderr, "tensorc: step %zu (%s): kernel %s_%s, %lld blocks\n", si, s.label.c_str(),
                   s.symbol.c_str(), k.shape.name().c_str(), (long long)grid);
    return "kernel " + s.symbol + "_" + k.shape.name();
  };
  // A collective group whose operands are computed (`queued` recorded on
  // the launch's stream) but not yet handed to NCCL.
  struct Deferred {
    size_t first, last;
    size_t ordinal; // its event pair: workspace.commEvents[2 * ordinal], [2 * ordinal + 1]
    Memory memory;  // what its collectives read and write
  };
  std::optional<Deferred> deferred;
  auto elementsOf = [&](int v) {
    int64_t n = 1;
    for (int64_t d : shapes[size_t(v)])
      n *= d;
    return n;
  };
  auto runCollective = [&](const Step &c, Stream on) {
    int out = c.operands[0], in = c.operands.size() > 1 ? c.operands[1] : out;
    Nccl::process().run(c.collective, a.values[size_t(in)].dtype, ptr[size_t(out)],
                        c.operands.size() > 1 ? ptr[size_t(in)] : 0, elementsOf(in), elementsOf(out), driver_, on);
  };
  // The communication stream waits for `queued`, runs the group (one NCCL
  // group where it has several) and records `done`.
  auto issueCollectives = [&](const Deferred &d) {
    const size_t ordinal = d.ordinal;
    void *done = workspace.commEvents[2 * ordinal + 1];
    driver_.wait(workspace.comm, workspace.commEvents[2 * ordinal]);
    if (workspace.traceComm) {
      while (workspace.commTimes.size() < 2 * ordinal + 2)
        workspace.commTimes.push_back(driver_.createEvent());
      driver_.record(workspace.commTimes[2 * ordinal], workspace.comm);
    }
    if (d.last > d.first)
      Nccl::process().groupStart();
    for (size_t k = d.first; k <= d.last; ++k)
      runCollective(a.steps[k], workspace.comm);
    if (d.last > d.first)
      Nccl::process().groupEnd();
    driver_.record(done, workspace.comm);
    if (workspace.traceComm)
      driver_.record(workspace.commTimes[2 * ordinal + 1], workspace.comm);
    pending.push_back(Pending{done, d.memory});
  };
  // Queues step si (a chain: steps si..last); returns last and what ran.
  auto launchGroup = [&](size_t si) -> std::pair<size_t, std::string> {
    const Step &s = a.steps[si];
    if (s.kind == Step::Kind::Matmul) {
      if (!workspace.gemm)
        workspace.gemm = driver_.allocate(CublasLt::kWorkspaceBytes);
      int c = s.operands[0], l = s.operands[1], r = s.operands[2];
      std::vector<int64_t> as = shapes[size_t(l)], bs = shapes[size_t(r)];
      if (s.transposeA && as.size() >= 2)
        std::swap(as[as.size() - 1], as[as.size() - 2]);
      if (s.transposeB && bs.size() >= 2)
        std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
      GemmEpilogue e;
      e.relu = s.epilogue.activation == artifact::MatmulEpilogue::Activation::Relu;
      e.geluTanh = s.epilogue.activation == artifact::MatmulEpilogue::Activation::GeluTanh;
      if (s.operands.size() > 3)
        (s.epilogue.biasGradient ? e.biasGradient : e.bias) = ptr[size_t(s.operands[3])];
      e.biasGradientOfA = s.epilogue.biasGradientOfA;
      e.allowTf32 = allowTf32_;
      const MatmulDims dims = matmulDims(as, bs, shapes[size_t(c)]);
      GemmAlgorithm algorithm;
      // A bias gradient cuBLASLt may not fuse (then a column-sum kernel
      // follows): cuBLASLt's own choice.
      if (tuner_ && forcedVariant_ < 0 && !e.biasGradient)
        algorithm.rank = tunedGemmRank(a, si, dims, e, shapes, ptr, stream, workspace.gemm, mayMeasure);
      bool fused = CublasLt::get().matmul(ptr[size_t(l)], s.transposeA, ptr[size_t(r)], s.transposeB, ptr[size_t(c)],
                                          a.values[size_t(l)].dtype, dims, e, stream, workspace.gemm, algorithm);
      std::string epilogue = s.epilogue.name();
      if (trace_)
        std::fprintf(stderr, "tensorc: step %zu (%s): cuBLASLt matmul%s%s\n", si, s.label.c_str(),
                     epilogue.empty() ? "" : ", epilogue ", epilogue.empty() ? "" :
                     (fused ? epilogue.c_str() : (epilogue + " (column-sum kernel: no cuBLASLt algorithm)").c_str()));
      if (e.biasGradient && !fused) {
        // No cuBLASLt algorithm with the bias gradient here: the
        // artifact's column-sum kernel (one thread per column).
        int summed = s.operands[artifact::biasGradientSource(s)];
        DevicePtr out = e.biasGradient, in = ptr[size_t(summed)];
        long long rows = shapes[size_t(summed)][0], cols = shapes[size_t(summed)][1];
        void *params[] = {&out, &in, &rows, &cols};
        if (cols > 0)
          driver_.launch(columnSums_.at(a.values[size_t(summed)].dtype), unsigned((cols + 255) / 256), 256, params,
                         stream);
      }
      return {si, std::string("cuBLASLt matmul") + (epilogue.empty() ? "" : " + " + epilogue)};
    }
    if (s.kind == Step::Kind::Attention)
      return {si, launchAttention(a, si, shapes, ptr, stream, workspace, mayMeasure)};
    if (s.kind == Step::Kind::Convolution)
      if (std::string what = launchConvolution(a, si, shapes, ptr, stream, workspace, mayMeasure); !what.empty())
        return {si, what};
    if (s.kind == Step::Kind::Copy) {
      DevicePtr offset = DevicePtr(*s.copyOffset.evaluate(bindings)) * dtypeSize(a.values[size_t(s.operands[0])].dtype);
      driver_.copyOnDevice(ptr[size_t(s.operands[0])] + offset, ptr[size_t(s.operands[1])],
                           bytesOf(s.operands[1]), stream);
      return {si, "copy"};
    }
    if (s.kind == Step::Kind::ScatterAdd) {
      // Zeroed, then atomic adds: 256 columns per block along x, rows
      // along y (grid-stride past 65535).
      DevicePtr out = ptr[size_t(s.operands[0])], grad = ptr[size_t(s.operands[1])],
                indices = ptr[size_t(s.operands[2])];
      const std::vector<int64_t> &outShape = shapes[size_t(s.operands[0])];
      long long rows = 1, cols = outShape[1], numWeights = outShape[0], skip = s.skipIndex;
      for (int64_t d : shapes[size_t(s.operands[2])])
        rows *= d;
      driver_.fill(out, 0, bytesOf(s.operands[0]), stream);
      if (rows > 0 && cols > 0) {
        void *params[] = {&out, &grad, &indices, &rows, &cols, &numWeights, &skip};
        long long chunks = std::min<long long>((cols + 255) / 256, 65535);
        driver_.launch(scatterAdds_.at(artifact::scatterAddKernel(a, s)), unsigned(chunks), 256, params, stream,
                       unsigned(std::min<long long>(rows, 65535)));
      }
      return {si, "scatter-add"};
    }
    if (s.kind == Step::Kind::Collective) {
      if (!overlaps(s.collective)) {
        runCollective(s, stream);
        return {si, std::string("NCCL ") + artifact::CollectiveStep::opName(s.collective.op)};
      }
      // NCCL's own collectives go to the communication stream once the
      // launch's stream has computed the operand; consecutive ones go as
      // one NCCL group (one kernel: a bias's and a weight's gradient
      // all_reduce, FSDP's gathers).
      // Collectives on NCCL window buffers group only where NCCL sums such
      // groups right (Nccl::groupsWindowCollectives).
      const bool windowsGroup = Nccl::process().groupsWindowCollectives();
      auto groupable = [&](const Step &c) {
        if (windowsGroup)
          return true;
        for (int v : c.operands)
          if (Nccl::process().inWindow(ptr[size_t(v)]))
            return false;
        return true;
      };
      size_t last = si;
      bool group = groupCollectives_ && groupable(s);
      while (group && last + 1 < a.steps.size() && a.steps[last + 1].kind == Step::Kind::Collective &&
             overlaps(a.steps[last + 1].collective) && groupable(a.steps[last + 1]))
        ++last;
      reserveCollectives(workspace);
      check(issued < collectiveCount_, "cuda: more collectives than the artifact has");
      void *queued = workspace.commEvents[2 * issued];
      workspace.commFirst.resize(issued + 1);
      workspace.commFirst[issued++] = collectiveOrdinal_.at(si);
      std::string what = last > si ? "NCCL group of " + std::to_string(last - si + 1) + " collectives"
                                   : std::string("NCCL ") + artifact::CollectiveStep::opName(s.collective.op);
      driver_.record(queued, stream);
      Deferred d{si, last, issued - 1, {}};
      for (size_t k = si; k <= last; ++k)
        for (int v : a.steps[k].operands)
          d.memory.push_back({ptr[size_t(v)], bytesOf(v)});
      // Handed to NCCL once the next compute step is queued (the
      // collective still waits only for `queued`): under CUDA graphs the
      // DDP step took 1.249-1.256 ms issuing at once, 1.243-1.245 so (2x
      // H200, two rounds each).
      if (deferIssue_ && !deferred)
        deferred = d;
      else
        issueCollectives(d);
      return {last, what};
    }
    if (!s.chainKernel.empty()) {
      // The chain's steps, and how much of each row they compute.
      size_t last = si;
      while (a.steps[last].chainNext)
        ++last;
      int64_t rows = *s.extent.evaluate(bindings);
      int64_t rowWork = std::max<int64_t>(
          0, artifact::chainRowWork(a.steps, si, last, [&](const Dim &d) { return d.evaluate(bindings); }));
      int v = forcedVariant_ >= 0
                  ? (size_t(forcedVariant_) < s.chainVariants.size() ? forcedVariant_ : -1)
                  : chainVariant(s.chainVariants, rows, rowWork, driver_.multiprocessors(),
                                 driver_.maxSharedMemoryPerBlock(), clusters());
      if (v >= 0 && (s.chainVariants[size_t(v)].cacheBytes > driver_.maxSharedMemoryPerBlock() ||
                     !chainKernels_[si][size_t(v)].available()))
        v = -1; // forced, but more shared memory than this GPU has, or clusters it lacks: the steps' own kernels
      // One elementwise pass after per-row values: its own vectorized kernel
      // beat one block per row (cross-entropy's backward exported from
      // PyTorch, 4096 x 50304 f32 on an H100: 0.63 ms against 0.72), so it
      // is the default; the fused variants stay candidates for the autotuner.
      const bool unfusedByDefault = forcedVariant_ < 0 && artifact::chainIsOneElementwisePass(a.steps, si, last);
      if (v >= 0 && rows > 0) {
        KernelArgs args(a, si, last, ptr, symbolValues);
        if (tuner_ && forcedVariant_ < 0) {
          // The steps' own kernels (their default variants) are a candidate too.
          auto unfused = [&] {
            for (size_t k = si; k <= last; ++k)
              launchStep(k, /*tune=*/false);
          };
          v = tunedChainVariant(a, si, last, unfusedByDefault ? -1 : v, rows, rowWork, shapes, ptr, stream,
                                args.params.data(), unfused, mayMeasure);
        } else if (unfusedByDefault) {
          v = -1;
        }
        if (v >= 0) {
          const Launchable &k = chainKernels_[si][size_t(v)];
          check(rows * k.shape.cluster <= 0x7fffffff, "cuda: too many rows for one launch");
          driver_.launch(functionOf(k), unsigned(rows * k.shape.cluster), unsigned(k.shape.block), args.params.data(),
                         stream, 1, unsigned(k.shape.cacheBytes));
          if (trace_)
            std::fprintf(stderr, "tensorc: steps %zu-%zu (%s): chain kernel %s, %lld blocks\n", si, last,
                         s.label.c_str(), s.chainVariants[size_t(v)].name().c_str(), (long long)rows);
          return {last, "chain kernel " + s.chainKernel + "_" + s.chainVariants[size_t(v)].name()};
        }
      }
    }
    return {si, launchStep(si, /*tune=*/true)};
  };
  for (size_t si = 0; si < a.steps.size(); ++si) {
    std::optional<Deferred> issueAfter;
    if (deferred) {
      if (a.steps[si].kind == Step::Kind::Collective || touches(si, deferred->memory))
        issueCollectives(*deferred); // in order, and before a step that needs it
      else
        issueAfter = deferred;
      deferred.reset();
    }
    if (!pending.empty())
      waitForCollectivesTouching(si);
    if (mark)
      mark(si, si, false, "");
    auto [last, what] = launchGroup(si);
    if (mark)
      mark(si, last, true, what);
    if (issueAfter)
      issueCollectives(*issueAfter);
    si = last;
  }
  if (deferred)
    issueCollectives(*deferred);
  for (const Pending &p : pending)
    driver_.wait(stream, p.done);
  workspace.commIssued = issued;
}

bool CudaProgram::overlaps(const artifact::CollectiveStep &c) const {
  // axis_index and all_slice are copies: they stay in order.
  using Op = artifact::CollectiveStep::Op;
  return overlapCollectives_ && c.op != Op::AxisIndex && c.op != Op::AllSlice;
}

void CudaProgram::synchronize(Stream stream, const Workspace &workspace) const {
  if (!collectiveCount_) {
    driver_.synchronize(stream);
    return;
  }
  Nccl &nccl = Nccl::process();
  auto start = std::chrono::steady_clock::now();
  auto rank = [&] { return "NCCL: rank " + std::to_string(nccl.rank()) + " of " + std::to_string(nccl.size()); };
  // The first collective of the last launch not finished (its done event),
  // or every collective when they ran in order on `stream`.
  auto stuck = [&]() -> std::string {
    for (size_t k = 0; k < workspace.commIssued && 2 * k + 1 < workspace.commEvents.size(); ++k)
      if (!driver_.eventFinished(workspace.commEvents[2 * k + 1]))
        return k < workspace.commFirst.size() && workspace.commFirst[k] < collectives_.size()
                   ? collectives_[workspace.commFirst[k]] + (groupCollectives_ ? " (or one grouped after it)" : "")
                   : "a collective";
    std::string all;
    for (const std::string &c : collectives_)
      all += (all.empty() ? "" : ", ") + c;
    return "one of the collectives " + all;
  };
  // NCCL's communicators are aborted first, so the stuck kernels end.
  // Where the abort does not return (kernels of NCCL's symmetric memory
  // still spin on the lost rank's flags), the GPU stays held by them and
  // nothing of this process's CUDA work can finish, not even freeing
  // memory at exit: the process ends here, with the error on stderr (as
  // PyTorch's NCCL watchdog ends it).
  auto abortAndFail = [&](const std::string &message) {
    constexpr double kAbortSeconds = 10;
    if (!nccl.abortWithin(kAbortSeconds)) {
      std::fprintf(stderr,
                   "tensorc: %s; NCCL's abort did not return in %g s (its kernels still wait for the lost rank "
                   "and hold the GPU): ending the process\n",
                   message.c_str(), kAbortSeconds);
      std::fflush(stderr);
      std::_Exit(1);
    }
    fail(message + "; NCCL was aborted");
  };
  for (unsigned polls = 0; !driver_.finished(stream); ++polls) {
    if (std::string error = nccl.asyncError(); !error.empty())
      abortAndFail(rank() + ": " + stuck() + " failed: " + error);
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > collectiveTimeoutS_) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", collectiveTimeoutS_);
      abortAndFail(rank() + ": " + stuck() + " did not finish in " + seconds +
                   " s ($TENSORC_NCCL_TIMEOUT): another rank failed, stopped or runs a different program");
    }
    // Spin briefly (most steps end within microseconds of the first query),
    // then sleep between queries.
    if (polls > 100)
      std::this_thread::sleep_for(std::chrono::microseconds(polls > 2000 ? 1000 : 20));
  }
}

} // namespace tensorc::cuda
