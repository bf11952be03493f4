// The CUDA backend: the artifact's kernels on device 0 (runtime/cuda/
// CudaProgram), and per session a stream (its own, or the caller's), the
// arena, staging memory for host tensors, cuBLASLt's workspace, two events
// around the launch sequence (Session::lastDeviceMs) and page-locked memory
// the run-time check flags are copied into without blocking.
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/Nccl.h"

#include "ir/core/Error.h"
#include "runtime/cuda/CudaProgram.h"
#include "runtime/host/Trace.h"
#include "runtime/tune/Autotuner.h"
#include "runtime/tune/TuneDb.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace tensorc::runtime {
namespace {

using cuda::DevicePtr;
using cuda::Driver;

class CudaBackend;

// An SPMD program's device memory (its arena, tensors the runtime allocates
// for it) comes from NCCL's symmetric windows where NCCL has them: its
// collectives then run NCCL's symmetric kernels, which slow the compute
// beside them less (docs/sharding.md "Symmetric memory"). Windows come in
// 2 MiB pieces: buffers under $TENSORC_NCCL_WINDOW_MIN bytes (default 1
// MiB; a bias's gradient) share windows (Nccl::allocateShared), larger
// ones have their own (the GPU parity checks set 0: every buffer its own).
size_t smallestWindow() {
  static const size_t bytes = [] {
    const char *v = std::getenv("TENSORC_NCCL_WINDOW_MIN");
    return v && *v ? size_t(std::strtoull(v, nullptr, 10)) : size_t(1) << 20;
  }();
  return bytes;
}
DevicePtr allocateFor(const cuda::CudaProgram &program, size_t bytes) {
  if (program.hasCollectives()) {
    cuda::Nccl &nccl = cuda::Nccl::process();
    if (DevicePtr p = bytes >= smallestWindow() ? nccl.allocateWindow(bytes) : nccl.allocateShared(bytes))
      return p;
  }
  return Driver::get().allocate(bytes);
}
void freeFor(const cuda::CudaProgram &program, DevicePtr p) {
  if (p && !(program.hasCollectives() && cuda::Nccl::process().freeWindow(p)))
    Driver::get().free(p);
}

class CudaSession final : public BackendSession {
  // A captured graph's key: every value's address and the workspaces', then
  // the symbols; the last kGraphs graphs are kept.
  using GraphKey = std::pair<std::vector<DevicePtr>, std::vector<int64_t>>;
  static constexpr size_t kGraphs = 8;

public:
  explicit CudaSession(const cuda::CudaProgram &program)
      : program_(program), driver_(Driver::get()) {
    driver_.makeCurrent();
    own_ = driver_.createStream();
    stream_ = own_;
    start_ = driver_.createEvent();
    end_ = driver_.createEvent();
  }
  ~CudaSession() override {
    driver_.makeCurrent();
    {
      try {
        driver_.synchronize(stream_);
      } catch (const std::exception &) {
        // A fault of the last run was reported by synchronize() or is lost
        // with the session; freeing must go on.
      }
    }
    for (auto &[key, exec] : graphs)
      driver_.destroyGraph(exec);
    for (void *e : traceEvents_)
      driver_.destroyEvent(e);
    freeFor(program_, arena_);
    driver_.free(workspace_.gemm);
    driver_.free(workspace_.scratch);
    for (void *e : workspace_.commEvents)
      driver_.destroyEvent(e);
    for (void *e : workspace_.commTimes)
      driver_.destroyEvent(e);
    driver_.destroyStream(workspace_.comm);
    for (auto &[p, bytes] : staging_)
      freeFor(program_, p);
    driver_.freeHost(flags_);
    driver_.destroyEvent(start_);
    driver_.destroyEvent(end_);
    driver_.destroyEvent(handoff_);
    driver_.destroyStream(own_);
  }

  Address arena(size_t bytes) override {
    driver_.makeCurrent();
    if (bytes > arenaBytes_) {
      // The old arena may still be read by queued work: wait first.
      driver_.synchronize(stream_);
      freeFor(program_, arena_);
      arena_ = 0;
      arena_ = allocateFor(program_, bytes);
      arenaBytes_ = bytes;
    }
    return Address(arena_);
  }
  Address staging(size_t slot, size_t bytes) override {
    driver_.makeCurrent();
    if (slot >= staging_.size())
      staging_.resize(slot + 1, {0, 0});
    auto &[p, have] = staging_[slot];
    if (bytes > have) {
      driver_.synchronize(stream_);
      freeFor(program_, p);
      p = 0;
      p = allocateFor(program_, std::max<size_t>(bytes, 1));
      have = bytes;
    }
    return Address(p);
  }
  void copyIn(Address dst, const void *src, size_t bytes) override {
    driver_.makeCurrent();
    // From pageable memory the driver stages the copy: the host side is
    // done when the call returns.
    driver_.copyToDevice(DevicePtr(dst), src, bytes, stream_);
  }
  void copyOut(void *dst, Address src, size_t bytes) override {
    driver_.makeCurrent();
    // A copy to pageable memory blocks the host until the stream gets
    // there: with collectives, wait first where a timeout can end the wait.
    if (program_.hasCollectives())
      program_.synchronize(stream_, workspace_);
    driver_.copyToHost(dst, DevicePtr(src), bytes, stream_);
  }
  void copyWithin(Address dst, Address src, size_t bytes) override {
    driver_.makeCurrent();
    driver_.copyOnDevice(DevicePtr(dst), DevicePtr(src), bytes, stream_);
  }
  void execute(const artifact::Artifact &a, const RunFrame &frame) override {
    driver_.makeCurrent();
    std::vector<DevicePtr> ptr(frame.values.begin(), frame.values.end());
    if (trace::enabled()) {
      // Traced runs launch step by step (no graph), an event pair each.
      executeTraced(a, frame, ptr);
      return;
    }
    void *exec = nullptr;
    // Repeated graphs replace launches' host cost; one kernel launched
    // directly costs less than a graph launch (pointwise_f32 through
    // torch.compile(backend="tensorc") on an H100: 39 against 52 us of host
    // time per call). One library call (cuBLASLt, cuDNN) still gains.
    const bool oneKernel = a.steps.size() == 1 && (a.steps[0].kind == artifact::Step::Kind::Loop ||
                                                   a.steps[0].kind == artifact::Step::Kind::Copy);
    if (graphsMode_ == CudaGraphs::Always || (graphsMode_ == CudaGraphs::Repeated && !oneKernel)) {
      // Kernel arguments are baked into a graph: every value's address, the
      // symbols and the workspaces' addresses identify it.
      GraphKey key{ptr, frame.symbolValues};
      key.first.push_back(workspace_.gemm);
      key.first.push_back(workspace_.scratch);
      exec = findGraph(key);
      if (!exec && (graphsMode_ == CudaGraphs::Always || seenBefore(key)))
        exec = capture(a, frame, ptr, std::move(key));
    }
    driver_.record(start_, stream_);
    if (exec)
      driver_.launchGraph(exec, stream_);
    else
      program_.launch(a, frame.symbolValues, frame.bindings, frame.shapes, ptr, stream_, workspace_, {},
                      /*mayMeasure=*/true);
    driver_.record(end_, stream_);
    timed_ = true;
  }
  void setGraphs(CudaGraphs mode) override {
    graphsMode_ = mode;
    seen_.clear();
  }
  void readFlags(const std::vector<Address> &addresses) override {
    driver_.makeCurrent();
    if (addresses.size() > flagCount_) {
      driver_.synchronize(stream_);
      driver_.freeHost(flags_);
      flags_ = nullptr;
      flags_ = static_cast<int32_t *>(driver_.allocateHost(addresses.size() * sizeof(int32_t)));
      flagCount_ = addresses.size();
    }
    for (size_t i = 0; i < addresses.size(); ++i)
      driver_.copyToHost(&flags_[i], DevicePtr(addresses[i]), sizeof(int32_t), stream_);
  }
  const int32_t *flags() const override { return flags_; }

  // The captured graph for this key (most recently used first), or null.
  void *findGraph(const GraphKey &key) {
    for (size_t i = 0; i < graphs.size(); ++i)
      if (graphs[i].first == key) {
        std::rotate(graphs.begin(), graphs.begin() + long(i), graphs.begin() + long(i) + 1);
        return graphs.front().second;
      }
    return nullptr;
  }
  // Repeated mode: whether one of the last kGraphs runs had this key
  // (remembering it if not).
  bool seenBefore(const GraphKey &key) {
    if (std::find(seen_.begin(), seen_.end(), key) != seen_.end())
      return true;
    if (seen_.size() == kGraphs)
      seen_.pop_back();
    seen_.insert(seen_.begin(), key);
    return false;
  }
  // The launch sequence for these addresses and sizes as a CUDA graph:
  // captured on the session's own stream (capture records, it does not
  // run), kept for replays; the last kGraphs are kept (LRU).
  void *capture(const artifact::Artifact &a, const RunFrame &frame, const std::vector<DevicePtr> &ptr,
                GraphKey key) {
    // Allocation and cuDNN's plan building cannot be captured: first (the
    // key then names the workspaces the graph uses).
    program_.reserve(a, frame.shapes, stream_, workspace_);
    key.first.end()[-2] = workspace_.gemm;
    key.first.end()[-1] = workspace_.scratch;
    driver_.beginCapture(own_);
    try {
      program_.launch(a, frame.symbolValues, frame.bindings, frame.shapes, ptr, own_, workspace_);
    } catch (...) {
      try {
        driver_.destroyGraph(driver_.endCapture(own_));
      } catch (const std::exception &) {
        // The capture is invalid anyway; the launch's error is the one to report.
      }
      throw;
    }
    void *exec = driver_.endCapture(own_);
    if (graphs.size() == kGraphs) {
      driver_.synchronize(stream_); // the evicted graph may still be running
      driver_.destroyGraph(graphs.back().second);
      graphs.pop_back();
    }
    graphs.insert(graphs.begin(), {std::move(key), exec});
    return exec;
  }
  void synchronize() override {
    driver_.makeCurrent();
    // Kernel faults surface here (and collectives that never finish).
    program_.synchronize(stream_, workspace_);
    if (timed_)
      lastMs_ = driver_.elapsedMs(start_, end_);
    timed_ = false;
    if (!traced_.empty()) {
      std::vector<trace::Slice> slices;
      for (const Traced &t : traced_) {
        double begin = driver_.elapsedMs(start_, traceEvents_[2 * t.index]);
        double end = driver_.elapsedMs(start_, traceEvents_[2 * t.index + 1]);
        trace::Slice slice{t.label, "step", traceOriginUs_ + begin * 1e3, (end - begin) * 1e3, 1, {}};
        char host[32];
        std::snprintf(host, sizeof host, "%.1f", t.hostUs);
        slice.args = {{"launch", t.what}, {"steps", t.steps}, {"host_us", host}};
        slices.push_back(std::move(slice));
      }
      // The communication stream's collectives (from when they could start:
      // their operands computed and the collectives before them done).
      for (size_t k = 0; k < workspace_.commIssued && 2 * k + 1 < workspace_.commTimes.size(); ++k) {
        double begin = driver_.elapsedMs(start_, workspace_.commTimes[2 * k]);
        double end = driver_.elapsedMs(start_, workspace_.commTimes[2 * k + 1]);
        const std::string &first = program_.collectiveDescription(workspace_.commFirst[k]);
        trace::Slice slice{first, "collective", traceOriginUs_ + begin * 1e3, (end - begin) * 1e3, 2, {}};
        slices.push_back(std::move(slice));
      }
      trace::add(std::move(slices));
      traced_.clear();
    }
  }

  // One event pair per launch; the slices are made at synchronize().
  void executeTraced(const artifact::Artifact &a, const RunFrame &frame,
                     const std::vector<DevicePtr> &ptr) {
    traced_.clear();
    traceOriginUs_ = trace::nowUs();
    driver_.record(start_, stream_);
    workspace_.traceComm = true;
    struct Untrace {
      cuda::Workspace &w;
      ~Untrace() { w.traceComm = false; }
    } untrace{workspace_};
    program_.launch(a, frame.symbolValues, frame.bindings, frame.shapes, ptr, stream_, workspace_,
                    [&](size_t first, size_t last, bool after, const std::string &what) {
                      size_t k = after ? traced_.size() - 1 : traced_.size();
                      while (traceEvents_.size() < 2 * (k + 1))
                        traceEvents_.push_back(driver_.createEvent());
                      if (after) // the host's cost of queueing the launch (not the event's)
                        traced_.back().hostUs = trace::nowUs() - traced_.back().hostUs;
                      driver_.record(traceEvents_[2 * k + (after ? 1 : 0)], stream_);
                      if (!after) {
                        traced_.push_back({k, a.steps[first].label, "", "", trace::nowUs()});
                        return;
                      }
                      traced_.back().what = what;
                      traced_.back().steps = first == last ? std::to_string(first)
                                                           : std::to_string(first) + "-" +
                                                                 std::to_string(last);
                    });
    driver_.record(end_, stream_);
    timed_ = true;
  }
  void setStream(void *stream, bool own) override {
    driver_.makeCurrent();
    cuda::Stream next = own ? own_ : static_cast<cuda::Stream>(stream);
    if (next == stream_)
      return; // PyTorch's bridge sets its current stream before every call
    // What was queued on the old stream comes first (it may still use the
    // arena), without waiting on the host.
    if (!handoff_)
      handoff_ = driver_.createEvent();
    driver_.record(handoff_, stream_);
    driver_.wait(next, handoff_);
    stream_ = next;
  }
  double lastDeviceMs() const override { return lastMs_; }

private:
  const cuda::CudaProgram &program_;
  Driver &driver_;
  cuda::Stream own_ = nullptr, stream_ = nullptr;
  void *start_ = nullptr, *end_ = nullptr;
  void *handoff_ = nullptr; // orders a stream change
  bool timed_ = false;
  double lastMs_ = -1;
  DevicePtr arena_ = 0;
  cuda::Workspace workspace_;
  size_t arenaBytes_ = 0;
  std::vector<std::pair<DevicePtr, size_t>> staging_;
  int32_t *flags_ = nullptr;
  size_t flagCount_ = 0;
  CudaGraphs graphsMode_ = CudaGraphs::Off;
  std::vector<GraphKey> seen_; // Repeated mode: keys of recent runs, most recent first
  struct Traced {
    size_t index;
    std::string label, what, steps;
    double hostUs = 0; // the launch's start, then its host time
  };
  std::vector<Traced> traced_;
  std::vector<void *> traceEvents_;
  double traceOriginUs_ = 0;
  std::vector<std::pair<GraphKey, void *>> graphs; // most recent first
};

class CudaBackend final : public Backend {
public:
  CudaBackend(const artifact::Artifact &a, const std::string &where, const LoadOptions &options)
      : program_(a, where, options.kernelCacheDir, options.kernelVariant) {
    AutotuneMode mode = parseAutotuneMode(options.autotune);
    std::string dbPath = options.tuneDb.empty() ? tune::TuneDb::defaultPath() : options.tuneDb;
    // Default mode reads a cache that exists; it never creates one.
    if (mode != AutotuneMode::Default || std::filesystem::exists(dbPath)) {
      tuner_ = std::make_unique<Autotuner>(mode, dbPath, program_.tuningDevice(), program_.tuningVersions());
      program_.setTuner(tuner_.get(), a);
      size_t sites = 0; // loop steps with a choice of variants, convolutions (cuDNN's engines)
      for (const artifact::Step &s : a.steps)
        sites += (s.kind == artifact::Step::Kind::Loop && s.variants.size() > 1) ||
                 s.kind == artifact::Step::Kind::Convolution;
      tuner_->setSites(sites);
    }
  }
  Device device() const override { return {DeviceType::Cuda, 0}; }
  size_t arenaAlignment() const override { return 256; }
  Address constants() const override { return Address(program_.constants()); }
  std::unique_ptr<BackendSession> newSession() const override {
    return std::make_unique<CudaSession>(program_);
  }
  int kernelVariantCount() const override { return program_.variantCount(); }
  std::shared_ptr<uint8_t> allocate(size_t bytes) const override {
    Driver *d = &Driver::get();
    d->makeCurrent();
    DevicePtr p = allocateFor(program_, std::max<size_t>(bytes, 1));
    // A tensor may outlive the executable (and its program): the deleter
    // knows only the process-wide driver and NCCL.
    bool spmd = program_.hasCollectives();
    // cuMemFree waits for the device to finish with the memory.
    return std::shared_ptr<uint8_t>(reinterpret_cast<uint8_t *>(p), [d, spmd](uint8_t *q) {
      d->makeCurrent();
      if (!(spmd && cuda::Nccl::process().freeWindow(DevicePtr(q))))
        d->free(DevicePtr(q));
    });
  }
  bool isDeviceMemory(const void *p) const override {
    Driver &d = Driver::get();
    d.makeCurrent();
    return d.isDeviceMemory(DevicePtr(p));
  }

private:
  std::unique_ptr<Autotuner> tuner_; // before program_, which points to it
  cuda::CudaProgram program_;
};

} // namespace

std::unique_ptr<Backend> makeCudaBackend(const artifact::Artifact &a, const std::string &where,
                                         const LoadOptions &options) {
  auto backend = std::make_unique<CudaBackend>(a, where, options);
  // An SPMD program's processes meet once, at load (ncclCommInitRank).
  // Every group's communicator is split from it here too, in step order.
  try {
    for (const artifact::Step &s : a.steps)
      if (s.kind == artifact::Step::Kind::Collective)
        cuda::Nccl::process().prepare(s.collective);
  } catch (const Error &e) {
    fail(where + ": " + e.what());
  }
  return backend;
}

} // namespace tensorc::runtime
