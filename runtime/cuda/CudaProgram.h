// A CUDA artifact loaded on the GPU: its CUDA C++ compiled by NVRTC for the
// GPU found (through the on-disk kernel cache), the module loaded, every
// loop step's kernel (default variant) resolved, constants on the device.
// A precompiled binary for the GPU's architecture is loaded as is.
// Queues the launch sequence on device memory; the session's memory, stream
// and copies are the CUDA backend's (runtime/cuda/CudaBackend.cpp).
#pragma once

#include "runtime/artifact/Artifact.h"
#include "runtime/cuda/CudaDriver.h"

#include <functional>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tensorc {
struct MatmulDims;
}

namespace tensorc::runtime {
class Autotuner;
struct TuneSite;
}

namespace tensorc::cuda {

struct GemmEpilogue;
class CudnnAttention;
struct CudnnAttentionShape;
class CudnnConvolution;
struct CudnnConvolutionShape;

// A session's device scratch memory: cuBLASLt's workspace (allocated on the
// first matmul step) and cuDNN's (grown to the largest plan's need).
struct Workspace {
  DevicePtr gemm = 0;
  DevicePtr scratch = 0;
  size_t scratchBytes = 0;
  // NCCL collectives run on their own stream beside the launch's (see
  // CudaProgram::launch), with two events each (queued, done) reused by
  // every launch; made by reserve() before a graph capture, else lazily.
  Stream comm = nullptr;
  std::vector<void *> commEvents;
  size_t commIssued = 0;        // event pairs the last launch queued there
  std::vector<size_t> commFirst; // per pair: the first collective's ordinal (CudaProgram)
  // Traced runs (TENSORC_TRACE): timing events on the communication stream
  // around each pair's collectives (when they could start, when done).
  bool traceComm = false;
  std::vector<void *> commTimes;
};

// --precompile: compiles the artifact's CUDA source with NVRTC for `arch`
// ("sm_90") and stores the binary in its data section, so loading on that
// architecture needs no NVRTC. Throws Error naming `where`.
void precompile(artifact::Artifact &artifact, const std::string &arch, const std::string &where);

class CudaProgram {
public:
  // Throws Error (no driver, NVRTC missing or failing, matmul steps not
  // supported yet).
  // `variant` >= 0 runs every loop step with its variant number `variant`
  // (the step's last if it has fewer): for tests and tuning.
  CudaProgram(const artifact::Artifact &artifact, const std::string &where,
              const std::string &kernelCacheDir = "", int variant = -1);
  ~CudaProgram();

  // Waits on the host for everything queued on `stream`. With collectives
  // it polls instead, so that one another rank never joins (a rank that
  // died, hangs or runs another program) is an Error after
  // $TENSORC_NCCL_TIMEOUT seconds (default 600) naming this rank and the
  // first collective of the last launch that had not finished, and an
  // error NCCL reports is one at once; NCCL's communicators are aborted.
  void synchronize(Stream stream, const Workspace &workspace) const;

  // Called around each launch (a step, or a chain of steps first..last run
  // as one kernel): before (after = false) and after, with what ran.
  using StepMarker =
      std::function<void(size_t first, size_t last, bool after, const std::string &what)>;

  // Queues every step of the artifact on `stream`: `ptr` is each value's
  // device address; `workspace` the session's scratch (allocated or grown
  // here, between launches, where a step needs more). `mayMeasure`: the autotuner (if set)
  // may run and time candidates now, synchronizing `stream` (false while a
  // CUDA graph is captured: then only known choices apply).
  void launch(const artifact::Artifact &a, const std::vector<int64_t> &symbolValues,
              const std::map<std::string, int64_t> &bindings,
              const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
              Stream stream, Workspace &workspace, const StepMarker &mark = {}, bool mayMeasure = false) const;
  // What launch() would allocate for these shapes, allocated now, and
  // cuDNN's plans built: before a CUDA graph capture, which can do neither.
  void reserve(const artifact::Artifact &a, const std::vector<std::vector<int64_t>> &shapes, Stream stream,
               Workspace &workspace) const;

  // Loop steps' kernel variants are chosen by `tuner` (not owned; null: the
  // heuristics alone). docs/autotune.md.
  void setTuner(runtime::Autotuner *tuner, const artifact::Artifact &a);
  // "NVIDIA H100 80GB HBM3 sm_90 132 SMs": the device part of tuning keys.
  std::string tuningDevice() const;
  // What else changes which variant is fastest or right: NVRTC's version.
  const std::string &tuningVersions() const { return compilerVersion_; }

  // The artifact's constants on the device.
  DevicePtr constants() const { return constants_; }
  int variantCount() const { return variantCount_; }
  bool hasMatmul() const { return hasMatmul_; }
  bool hasCollectives() const { return collectiveCount_ > 0; }
  // Collective `ordinal` in words ("step 63 'grad_w' (all_reduce over
  // [data])"), as Workspace::commFirst names them.
  const std::string &collectiveDescription(size_t ordinal) const { return collectives_.at(ordinal); }

  const std::string &arch() const { return arch_; }

  // The heuristic default among a loop step's variants, for `outputs`
  // outputs of `reduced` iterations each: one thread per output for
  // elementwise nests and short reductions, 8 or 32 lanes (a warp part)
  // per output for medium rows, a whole block for long ones. Returns an
  // index into `variants` (which the autotuner may override).
  static size_t defaultVariant(const std::vector<artifact::KernelVariant> &variants, int64_t outputs,
                               int64_t reduced);

  // Whether to run a chain of steps as its fused kernel (one row per
  // block) and which variant: an index into `variants`, or -1 for the
  // steps' own kernels. `rowWork`: the most iterations a chained step has
  // per row. A variant with a row cache is preferred where the GPU has
  // the shared memory it needs (`maxSharedBytes` per block); where that
  // leaves one block per SM and the GPU has thread-block `clusters`
  // (sm_90+), a variant splitting each row across a cluster.
  static int chainVariant(const std::vector<artifact::KernelVariant> &variants, int64_t rows, int64_t rowWork,
                          int multiprocessors, int64_t maxSharedBytes = 0, bool clusters = false);

private:
  // Thread-block clusters (chain kernels' split variants): sm_90 and later.
  bool clusters() const { return driver_.computeCapability() >= 90; }
  // A kernel variant: its function once loaded (functionOf loads a later
  // tier's on first use), its launch shape, its name ("" where this GPU
  // cannot run it: a cluster variant without clusters).
  struct Launchable {
    mutable std::atomic<void *> function{nullptr};
    artifact::KernelVariant shape;
    std::string name;
    Launchable(void *f, artifact::KernelVariant v, std::string n) : function(f), shape(v), name(std::move(n)) {}
    Launchable(const Launchable &o) : function(o.function.load()), shape(o.shape), name(o.name) {}
    bool available() const { return !name.empty(); }
  };
  void *functionOf(const Launchable &k) const;
  // The kernels a run at the artifact's own sizes launches by default (the
  // heuristics' picks); steps with symbolic sizes keep every variant.
  std::set<std::string> expectedKernels(const artifact::Artifact &a) const;
  Driver &driver_;
  std::string arch_;
  // The kernels, split over several modules (TranslationUnits.h); a later
  // tier's modules are added under laterMutex_ when a launch first needs
  // one of its kernels.
  mutable std::vector<void *> modules_;
  mutable std::mutex laterMutex_;
  mutable std::string laterCode_; // the later tier's source until it is compiled
  std::string where_, kernelCacheDir_, tensorcVersion_;
  std::vector<std::vector<Launchable>> kernels_; // per step, per variant
  std::vector<std::vector<Launchable>> chainKernels_; // per step (first of a chain), per variant
  // An attention kernel and its launch constant (Attention.cuh's
  // KERNEL_launch): rows per block, bytes of dynamic shared memory.
  struct AttentionKernel {
    void *function;
    int rows, sharedBytes;
  };
  std::vector<std::vector<AttentionKernel>> attentionKernels_; // per step: fwd, or bwd_q and bwd_kv
  DevicePtr constants_ = 0;
  int variantCount_ = 0;
  bool hasMatmul_ = false;
  std::map<DType, void *> columnSums_; // bias-gradient fallback kernels, by dtype
  std::map<std::string, void *> scatterAdds_; // scatter-add steps' kernels, by name
  // Autotuning's timing (tuneChoice): an event pair, and a buffer of twice
  // the L2 cache's size written before each timed run so that no candidate
  // finds its operands in L2 left there by the one before; allocated the
  // first time a candidate is timed.
  mutable void *tuneStart_ = nullptr, *tuneEnd_ = nullptr;
  mutable DevicePtr l2Flush_ = 0;
  // The autotuner's choices by launch: what is tuned (a TunedSite), the step
  // and the sizes its choice depends on. A launch whose choice is known
  // skips building its tuning site (strings per candidate) and the
  // autotuner's lookup: ~2 us of host time per launch, which made tuned
  // steps of small workloads 1-1.5% slower than the heuristics' on an H200.
  enum class TunedSite : int64_t { Loop, Chain, Gemm, Attention, Convolution };
  using ChoiceKey = std::array<int64_t, 10>;
  std::optional<int> knownChoice(const ChoiceKey &key) const;
  // Keeps `choice` unless it was made while capturing (then it may be a
  // miss's heuristic); returns it.
  int rememberChoice(const ChoiceKey &key, int choice, bool mayMeasure) const;
  mutable std::mutex choicesMutex_;
  mutable std::map<ChoiceKey, int> choices_;
  // Queues an attention step (cuDNN's engines where they take it, else
  // kernels/Attention.cuh; the autotuner chooses between them where both
  // can); returns what ran.
  std::string launchAttention(const artifact::Artifact &a, size_t step,
                              const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
                              Stream stream, Workspace &workspace, bool mayMeasure) const;
  // Queues attention step `step` on the generated kernels; returns what ran.
  std::string launchGeneratedAttention(const artifact::Artifact &a, size_t step,
                                       const std::vector<std::vector<int64_t>> &shapes,
                                       const std::vector<DevicePtr> &ptr, Stream stream) const;
  // The cuDNN problem of attention step `si`, if cuDNN may run it: f16/bf16,
  // a backward with its forward's output and statistics, not disabled
  // ($TENSORC_CUDNN_ATTENTION=0) nor a forced variant >= 1 (those run the
  // generated kernels, so parity checks cover both).
  std::optional<CudnnAttentionShape> cudnnShape(const artifact::Artifact &a, size_t si,
                                                const std::vector<std::vector<int64_t>> &shapes) const;
  // Queues a convolution step on cuDNN if it runs it; returns what ran, or
  // "" for the step's own kernel (cuDNN missing, off, declining, a forced
  // variant >= 1, operands not 16-byte aligned). With a tuner, cuDNN's
  // engine is the autotuner's choice among its heuristic's first ones.
  std::string launchConvolution(const artifact::Artifact &a, size_t step,
                                const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
                                Stream stream, Workspace &workspace, bool mayMeasure) const;
  // The cuDNN problem of convolution step `si`, if cuDNN may run it.
  std::optional<CudnnConvolutionShape> convolutionShape(const artifact::Artifact &a, size_t si,
                                                        const std::vector<std::vector<int64_t>> &shapes) const;
  std::unique_ptr<CudnnConvolution> cudnnConvolution_; // plans by problem
  bool cudnnConvolutionOn_ = true;
  // Grows the scratch to `bytes` (waiting for `stream`'s work on the old).
  void growScratch(Workspace &workspace, size_t bytes, Stream stream) const;
  std::unique_ptr<CudnnAttention> cudnnAttention_; // plans by shape
  bool cudnnAttentionOn_ = true;
  int forcedVariant_ = -1;
  runtime::Autotuner *tuner_ = nullptr;
  std::string sourceHash_;      // SHA-256 of the CUDA source (tuning keys)
  // Per step, with a tuner: the tuning key of its kernel and of the chain
  // kernel it heads (SHA-256 of the source hash and the symbol), made once
  // in setTuner, not at every launch.
  std::vector<std::string> tuneKernels_, tuneChainKernels_;
  std::string compilerVersion_; // "nvrtc 13.0"
  // The variant of loop step `si` the autotuner chooses, from `heuristic`.
  // `threads`: its outputs; `params`: its kernel arguments.
  size_t tunedVariant(const artifact::Artifact &a, size_t si, size_t heuristic, int64_t threads, int64_t reduced,
                      const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
                      Stream stream, void **params, bool mayMeasure) const;
  // The chain kernel variant of steps si..last the autotuner chooses, from
  // `heuristic` (the row cache or not, block sizes); `params`: its arguments.
  // -1: the steps' own kernels (`launchUnfused` queues them) won.
  int tunedChainVariant(const artifact::Artifact &a, size_t si, size_t last, int heuristic, int64_t rows,
                        int64_t rowWork, const std::vector<std::vector<int64_t>> &shapes,
                        const std::vector<DevicePtr> &ptr, Stream stream, void **params,
                        const std::function<void()> &launchUnfused, bool mayMeasure) const;
  // The rank in cuBLASLt's heuristic ranking the autotuner chooses for
  // matmul step si (0: cuBLASLt's own choice).
  int tunedGemmRank(const artifact::Artifact &a, size_t si, const MatmulDims &dims, const GemmEpilogue &epilogue,
                    const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
                    Stream stream, DevicePtr workspace, bool mayMeasure) const;
  // The autotuner's choice among the candidates `order` (the heuristic's
  // first) of a site writing `outputs` and reading `inputs`: each trial
  // runs launchCandidate(k) and is checked against the first candidate's
  // outputs (snapshot, poison, compare, restore).
  size_t tuneChoice(const artifact::Artifact &a, runtime::TuneSite site, const std::vector<size_t> &order,
                    const std::vector<int> &outputs, const std::vector<int> &inputs,
                    const std::function<void(size_t)> &launchCandidate,
                    const std::vector<std::vector<int64_t>> &shapes, const std::vector<DevicePtr> &ptr,
                    Stream stream, bool mayMeasure) const;
  bool trace_ = false; // $TENSORC_CUDA_TRACE: one stderr line per launch
  // $TENSORC_NCCL_OVERLAP=0: collectives in order on the launch's stream
  // (to measure what the communication stream gains).
  bool overlapCollectives_ = true;
  bool commPriority_ = true; // $TENSORC_NCCL_PRIORITY=0: a normal-priority communication stream
  size_t collectiveCount_ = 0;
  // What each collective step is ("step 63 'grad_w' (all_reduce over
  // [data])"), in step order, and each collective step's place there.
  std::vector<std::string> collectives_;
  std::map<size_t, size_t> collectiveOrdinal_;
  bool groupCollectives_ = true; // $TENSORC_NCCL_GROUP=0: one NCCL call (kernel) per collective
  // $TENSORC_NCCL_DEFER=0: a collective is issued right after its operand's
  // step rather than after the next compute step (for measuring; launch()).
  bool deferIssue_ = true;
  double collectiveTimeoutS_ = 600; // $TENSORC_NCCL_TIMEOUT
  // The communication stream and `collectiveCount_` event pairs.
  void reserveCollectives(Workspace &workspace) const;
  // Whether collective `c` runs on the communication stream.
  bool overlaps(const artifact::CollectiveStep &c) const;
  bool allowTf32_ = false; // the artifact's compile option --allow-tf32
};

} // namespace tensorc::cuda
