// The CPU backend: an artifact's code section is a shared library of loop
// kernels (runtime/core/KernelLibrary), matmul steps call OpenBLAS
// (runtime/core/Blas), and everything runs on the calling thread and the
// executable's thread pool. Memory is host memory, so "device" tensors are
// host tensors and copies are memcpy.
#include "runtime/core/Backend.h"

#include "ir/core/Error.h"
#include "runtime/cache/Sha256.h"
#include "runtime/tune/Autotuner.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Blas.h"
#include "runtime/core/KernelLibrary.h"
#include "runtime/core/ScatterAdd.h"
#include "runtime/host/ThreadPool.h"
#include "runtime/host/Trace.h"
#include "runtime/tune/TuneDb.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

namespace tensorc::runtime {

using artifact::Step;

namespace {

// Nests with fewer iterations than this run on the calling thread: below
// it, waking workers costs more than the loop.
constexpr int64_t kParallelWork = 1 << 15;
constexpr int64_t kChunkWork = 1 << 13;

const char *hostArch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

bool hostHasFeature(const std::string &f) {
#if defined(__x86_64__)
  __builtin_cpu_init();
#define TC_FEATURE(name)                                                                         \
  if (f == name)                                                                                 \
    return __builtin_cpu_supports(name);
  TC_FEATURE("sse4.2")
  TC_FEATURE("avx")
  TC_FEATURE("avx2")
  TC_FEATURE("fma")
  TC_FEATURE("f16c")
  TC_FEATURE("bmi2")
  TC_FEATURE("avx512f")
  TC_FEATURE("avx512bw")
  TC_FEATURE("avx512dq")
  TC_FEATURE("avx512vl")
#undef TC_FEATURE
#endif
  return false;
}

// `what` names the allocation in the out-of-memory error (the arena, an
// input's staging copy, the constants, an output).
std::shared_ptr<uint8_t> hostAllocate(size_t bytes, const char *what) {
  void *p = bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr;
  check(bytes == 0 || p != nullptr,
        std::string("cpu: out of memory allocating ") + what + " (" + std::to_string(bytes) + " bytes)");
  return std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), [](uint8_t *q) { std::free(q); });
}

int64_t numelOf(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n = checkedMul(n, d, "tensor size");
  return n;
}

// How a loop group's rows are spread over the thread pool: tasks of about
// `taskWork` iterations (0: all on the calling thread). The candidates the
// autotuner measures; kChunkWork is the heuristic's.
constexpr int64_t kTaskWorks[] = {1 << 11, kChunkWork, 1 << 15, 1 << 17};

std::string scheduleName(int64_t taskWork) {
  return taskWork == 0 ? "serial" : "tasks_w" + std::to_string(taskWork);
}

// "cpu <model> (<threads> threads)": the device part of autotune keys.
std::string cpuDeviceName(size_t threads) {
  std::string model = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return "cpu " + model + " (" + std::to_string(threads) + " threads)";
}

class CpuBackend;

class CpuSession final : public BackendSession {
public:
  explicit CpuSession(const CpuBackend &backend) : backend_(backend) {}
  Address arena(size_t bytes) override {
    if (bytes > arenaBytes_) {
      arena_ = hostAllocate(bytes, "the arena of intermediate values");
      arenaBytes_ = bytes;
    }
    return Address(arena_.get());
  }
  Address staging(size_t slot, size_t bytes) override {
    if (slot >= staging_.size())
      staging_.resize(slot + 1);
    if (bytes > staging_[slot].second)
      staging_[slot] = {hostAllocate(bytes, "an input's staging copy"), bytes};
    return Address(staging_[slot].first.get());
  }
  void copyIn(Address dst, const void *src, size_t bytes) override {
    if (bytes) // empty tensors may have null pointers
      std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  }
  void copyOut(void *dst, Address src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  }
  void copyWithin(Address dst, Address src, size_t bytes) override {
    if (bytes)
      std::memmove(reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), bytes);
  }
  void execute(const artifact::Artifact &a, const RunFrame &frame) override;
  void readFlags(const std::vector<Address> &addresses) override {
    flags_.resize(addresses.size());
    for (size_t i = 0; i < addresses.size(); ++i)
      std::memcpy(&flags_[i], reinterpret_cast<const void *>(addresses[i]), sizeof(int32_t));
  }
  const int32_t *flags() const override { return flags_.data(); }
  void synchronize() override {}
  void setStream(void *, bool own) override {
    check(own, "a cpu executable runs on the calling thread: it takes no stream");
  }

private:
  // The autotuner's choice of task size for loop steps [first, last] (a
  // chain), measured on this run's operands when it must be.
  int64_t tunedTaskWork(const artifact::Artifact &a, const RunFrame &frame, const std::vector<void *> &ptr,
                        size_t first, size_t last, int64_t extent, int64_t perRow, int64_t heuristic,
                        const std::function<void(int64_t)> &runWith);
  const CpuBackend &backend_;
  std::shared_ptr<uint8_t> arena_;
  size_t arenaBytes_ = 0;
  std::vector<std::pair<std::shared_ptr<uint8_t>, size_t>> staging_;
  std::vector<int32_t> flags_;
  // Tuned task sizes by (first step, rows, work per row): later runs skip
  // building the tuning site (this session's thread only, no lock).
  std::map<std::tuple<size_t, int64_t, int64_t>, int64_t> taskWorks_;
};

class CpuBackend final : public Backend {
public:
  CpuBackend(const artifact::Artifact &a, const std::string &where, const LoadOptions &options) {
    std::string arch = a.target.triple.substr(0, a.target.triple.find('-'));
    check(arch == hostArch(), where + ": compiled for " + a.target.triple + ", but this machine is " +
                                  hostArch() + "; recompile with --target cpu on (or for) it");
    for (const std::string &f : a.target.features)
      check(hostHasFeature(f), where + ": the code needs the CPU feature '" + f + "' (compiled for " +
                                   a.target.cpu +
                                   "), which this machine lacks; recompile with --cpu x86-64 or on "
                                   "this machine");
    for (const Step &s : a.steps)
      check(s.kind != Step::Kind::Attention && s.kind != Step::Kind::Convolution,
            where + ": step '" + s.label + "' is a " +
                (s.kind == Step::Kind::Attention ? "fused attention" : "convolution") +
                " step, which only the CUDA backend runs");
    // The processes of the run, for its collectives (MPI under mpirun).
    for (const Step &s : a.steps)
      if (s.kind == Step::Kind::Collective && !communicator_) {
        try {
          communicator_ = processCommunicator();
        } catch (const Error &e) {
          fail(where + ": " + e.what());
        }
      }
    library_ = std::make_unique<KernelLibrary>(a.code, where);
    for (size_t i = 0; i < a.steps.size(); ++i) {
      const Step &s = a.steps[i];
      if (s.kind != Step::Kind::Loop) {
        kernels_.push_back(nullptr);
        continue;
      }
      kernels_.push_back(library_->loopKernel(s.symbol));
      // The kernel's own record of what it was compiled for against the
      // manifest's step: an operand dropped, an extent, kernel or dtype
      // changed would have it read or write past a buffer.
      std::string want = artifact::loopSignature(a, s);
      std::string have = library_->constantString(artifact::loopSignatureSymbol(s.symbol),
                                                  "signature for kernel '" + s.symbol + "'");
      check(have == want, where + ": step " + std::to_string(i) + " '" + s.label + "' does not match its kernel '" +
                              s.symbol + "' (artifact corrupted or built by another tensorc): the kernel was " +
                              "compiled for {" + have + "}, the manifest says {" + want + "}");
    }
    constants_ = hostAllocate(a.data.size(), "the artifact's constants");
    if (!a.data.empty())
      std::memcpy(constants_.get(), a.data.data(), a.data.size());
    pool_ = std::make_unique<ThreadPool>(options.threads);
    AutotuneMode mode = parseAutotuneMode(options.autotune);
    std::string dbPath = options.tuneDb.empty() ? tune::TuneDb::defaultPath() : options.tuneDb;
    // Default mode reads a cache that exists; it never creates one.
    if (pool_->size() > 1 && (mode != AutotuneMode::Default || std::filesystem::exists(dbPath))) {
      tuner_ = std::make_unique<Autotuner>(mode, dbPath, cpuDeviceName(pool_->size()), "cpu loops 1");
      // Each loop group's kernel hash (the code and the group's symbols),
      // by its first step.
      std::string codeHash = sha256Hex(a.code);
      groupKernels_.resize(a.steps.size());
      size_t sites = 0; // parallel loop groups: unchained steps and chain heads
      for (size_t i = 0; i < a.steps.size(); ++i) {
        if (a.steps[i].kind != Step::Kind::Loop || (i > 0 && a.steps[i - 1].chainNext))
          continue;
        std::string symbols;
        for (size_t k = i; k < a.steps.size(); ++k) {
          symbols += a.steps[k].symbol + ";";
          if (!a.steps[k].chainNext)
            break;
        }
        groupKernels_[i] = sha256Hex(codeHash + ":" + symbols).substr(0, 32);
        sites += a.steps[i].parallel;
      }
      tuner_->setSites(sites);
    }
  }
  Device device() const override { return {}; }
  size_t arenaAlignment() const override { return 64; }
  Address constants() const override { return Address(constants_.get()); }
  std::unique_ptr<BackendSession> newSession() const override {
    return std::make_unique<CpuSession>(*this);
  }
  std::shared_ptr<uint8_t> allocate(size_t bytes) const override { return hostAllocate(bytes, "a tensor"); }

  std::unique_ptr<KernelLibrary> library_;
  std::vector<LoopKernelFn> kernels_; // per step (null for library steps)
  std::shared_ptr<Communicator> communicator_; // artifacts with collective steps
  std::shared_ptr<uint8_t> constants_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Autotuner> tuner_; // null: the heuristics alone
  std::vector<std::string> groupKernels_; // tuning: by a loop group's first step
};

int64_t CpuSession::tunedTaskWork(const artifact::Artifact &a, const RunFrame &frame,
                                  const std::vector<void *> &ptr, size_t first, size_t last, int64_t extent,
                                  int64_t perRow, int64_t heuristic,
                                  const std::function<void(int64_t)> &runWith) {
  const CpuBackend &x = backend_;
  auto known = taskWorks_.find({first, extent, perRow});
  if (known != taskWorks_.end())
    return known->second;
  // The bytes each operand spans; what the group writes and what it reads
  // from outside. A group writing over its own inputs (in place) cannot
  // run twice with the same result: it keeps the heuristic.
  struct Range {
    uint8_t *begin;
    size_t bytes;
  };
  auto rangeOf = [&](int v) {
    return Range{static_cast<uint8_t *>(ptr[size_t(v)]),
                 size_t(numelOf(frame.shapes[size_t(v)])) * dtypeSize(a.values[size_t(v)].dtype)};
  };
  std::vector<int> writtenValues;
  std::vector<Range> written, read;
  for (size_t k = first; k <= last; ++k) {
    const Step &s = a.steps[k];
    for (size_t o = 0; o < s.operands.size(); ++o) {
      int v = s.operands[o];
      if (artifact::writesOperand(s, o)) {
        writtenValues.push_back(v);
        written.push_back(rangeOf(v));
      } else if (std::find(writtenValues.begin(), writtenValues.end(), v) == writtenValues.end()) {
        read.push_back(rangeOf(v));
      }
    }
  }
  for (const Range &w : written)
    for (const Range &r : read)
      if (w.bytes && r.bytes && w.begin < r.begin + r.bytes && r.begin < w.begin + w.bytes)
        return heuristic;

  TuneSite site;
  site.kernel = x.groupKernels_[first];
  site.label = a.steps[first].label + (last > first ? " (+" + std::to_string(last - first) + " chained)" : "");
  site.bucket = "rows=" + powerOfTwoBucket(extent) + ",row_work=" + powerOfTwoBucket(perRow);
  site.dtype = dtypeName(a.values[size_t(a.steps[first].operands[0])].dtype);
  std::vector<int64_t> schedules = {heuristic};
  for (int64_t w : {int64_t(0), kTaskWorks[0], kTaskWorks[1], kTaskWorks[2], kTaskWorks[3]})
    if (w != heuristic)
      schedules.push_back(w);
  for (int64_t w : schedules)
    site.candidates.push_back(scheduleName(w));

  std::vector<std::string> reference;
  TrialHooks hooks;
  hooks.run = [&](size_t k) { runWith(schedules[k]); };
  hooks.snapshot = [&] {
    reference.clear();
    for (const Range &w : written)
      reference.emplace_back(reinterpret_cast<const char *>(w.begin), w.bytes);
  };
  hooks.poison = [&] {
    for (const Range &w : written)
      std::memset(w.begin, 0xff, w.bytes);
  };
  hooks.compare = [&]() -> std::string {
    for (size_t i = 0; i < written.size(); ++i)
      if (std::memcmp(written[i].begin, reference[i].data(), written[i].bytes) != 0)
        return "wrong output: value " + std::to_string(writtenValues[i]) + " differs from the default's";
    return "";
  };
  hooks.restore = [&] {
    for (size_t i = 0; i < written.size(); ++i)
      std::memcpy(written[i].begin, reference[i].data(), written[i].bytes);
  };
  hooks.nowUs = [] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  return taskWorks_[{first, extent, perRow}] = schedules[x.tuner_->choose(site, hooks)];
}

void CpuSession::execute(const artifact::Artifact &a, const RunFrame &frame) {
  const CpuBackend &x = backend_;
  std::vector<void *> ptr;
  for (Address v : frame.values)
    ptr.push_back(reinterpret_cast<void *>(v));
  bool tracing = trace::enabled();
  for (size_t si = 0; si < a.steps.size(); ++si) {
    const Step &step = a.steps[si];
    size_t firstStep = si;
    double startUs = tracing ? trace::nowUs() : 0;
    switch (step.kind) {
    case Step::Kind::Loop: {
      // A chain of loops runs block by block of rows: every loop of the
      // chain on rows [r, r + block) before the next block.
      size_t last = si;
      while (a.steps[last].chainNext)
        ++last;
      int64_t extent = *step.extent.evaluate(frame.bindings);
      int64_t work = 0;
      std::vector<std::vector<void *>> args;
      for (size_t k = si; k <= last; ++k) {
        work += *a.steps[k].work.evaluate(frame.bindings);
        std::vector<void *> ops;
        for (int o : a.steps[k].operands)
          ops.push_back(ptr[size_t(o)]);
        args.push_back(std::move(ops));
      }
      size_t first = si;
      si = last;
      if (extent == 0)
        break;
      const int64_t *syms = frame.symbolValues.data();
      int64_t perRow = std::max<int64_t>(1, work / extent);
      int64_t block = last > first ? std::max<int64_t>(1, kChunkWork / perRow) : extent;
      auto runRows = [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; r += block)
          for (size_t k = first; k <= last; ++k)
            x.kernels_[k](args[k - first].data(), syms, r, std::min(e, r + block));
      };
      auto runWith = [&](int64_t taskWork) {
        if (taskWork > 0)
          x.pool_->parallelFor(extent, std::max<int64_t>(1, taskWork / perRow), runRows);
        else
          runRows(0, extent);
      };
      bool parallel = step.parallel && x.pool_->size() > 1;
      int64_t taskWork = parallel && work >= kParallelWork ? kChunkWork : 0;
      if (parallel && x.tuner_ && extent > 1)
        taskWork = tunedTaskWork(a, frame, ptr, first, last, extent, perRow, taskWork, runWith);
      runWith(taskWork);
      break;
    }
    case Step::Kind::Matmul: {
      size_t c = size_t(step.operands[0]), l = size_t(step.operands[1]), r = size_t(step.operands[2]);
      MatmulOperand left{ptr[l], a.values[l].dtype, frame.shapes[l], step.transposeA};
      MatmulOperand right{ptr[r], a.values[r].dtype, frame.shapes[r], step.transposeB};
      matmul(left, right, ptr[c], a.values[c].dtype, frame.shapes[c], *x.pool_);
      applyEpilogue(ptr[c], a.values[c].dtype, frame.shapes[c], step.epilogue,
                    step.operands.size() > 3 ? ptr[size_t(step.operands[3])] : nullptr,
                    artifact::biasGradientSource(step) == 1 ? left : right);
      break;
    }
    case Step::Kind::Copy: {
      size_t d = size_t(step.operands[0]), s = size_t(step.operands[1]);
      size_t bytes = size_t(numelOf(frame.shapes[s])) * dtypeSize(a.values[s].dtype);
      size_t offset = size_t(*step.copyOffset.evaluate(frame.bindings)) * dtypeSize(a.values[d].dtype);
      if (bytes)
        std::memmove(static_cast<char *>(ptr[d]) + offset, ptr[s], bytes);
      break;
    }
    case Step::Kind::Attention:
    case Step::Kind::Convolution:
      fail("cpu: attention and convolution steps run on the GPU only"); // refused at load
    case Step::Kind::ScatterAdd: {
      size_t out = size_t(step.operands[0]), grad = size_t(step.operands[1]), idx = size_t(step.operands[2]);
      const std::vector<int64_t> &outShape = frame.shapes[out];
      scatterAdd({ptr[out], a.values[out].dtype, ptr[grad], a.values[grad].dtype, ptr[idx], a.values[idx].dtype,
                  numelOf(frame.shapes[idx]), outShape[1], outShape[0], step.skipIndex},
                 step.label);
      break;
    }
    case Step::Kind::Collective: {
      size_t out = size_t(step.operands[0]), in = step.operands.size() > 1 ? size_t(step.operands[1]) : out;
      runHostCollective(*x.communicator_, step.collective, a.values[in].dtype, ptr[out],
                        step.operands.size() > 1 ? ptr[in] : nullptr, numelOf(frame.shapes[in]),
                        numelOf(frame.shapes[out]), artifact::collectiveStepName(step, si));
      break;
    }
    }
    if (tracing) {
      trace::Slice slice{step.label, "step", startUs, trace::nowUs() - startUs, 0, {}};
      const char *kinds[] = {"loop", "matmul", "copy", "attention", "convolution", "collective", "scatter-add"};
      slice.args = {{"launch", step.kind == Step::Kind::Loop ? "loop " + step.symbol : kinds[int(step.kind)]},
                    {"steps", si == firstStep ? std::to_string(si)
                                              : std::to_string(firstStep) + "-" + std::to_string(si)}};
      trace::add(std::move(slice));
    }
  }
}

} // namespace

std::unique_ptr<Backend> makeCpuBackend(const artifact::Artifact &a, const std::string &where,
                                        const LoadOptions &options) {
  return std::make_unique<CpuBackend>(a, where, options);
}

} // namespace tensorc::runtime
