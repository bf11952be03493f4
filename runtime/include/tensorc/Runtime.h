// tensorc runtime, C++ API: load a compiled model (a `.tcx` artifact written
// by `tensorc compile --target cpu`) and run it. Links nothing from MLIR or
// LLVM. See docs/runtime.md.
//
//   auto exe = tensorc::runtime::Executable::load("model.tcx");
//   tensorc::runtime::Session session(exe);          // one per thread
//   std::vector<tensorc::runtime::Tensor> out = session.run({{dtype, shape, data}, ...});
//
// An Executable is immutable and may be shared by any number of threads;
// a Session holds one run's state (bound sizes, the memory arena, reused
// across calls) and is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace tensorc::runtime {

// Element types, in the artifact's spelling: f64 f32 f16 bf16 i64 i32 i1
// (i1: one byte per element, 0 or 1).
enum class ElementType { F64, F32, F16, BF16, I64, I32, I1 };
const char *elementTypeName(ElementType t);
size_t elementSize(ElementType t);

// Every failure: bad artifacts, wrong inputs, missing libraries.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Where memory lives. The numbering is DLPack's (kDLCPU = 1, kDLCUDA = 2).
enum class DeviceType : int32_t { Host = 1, Cuda = 2 };

// When a cuda session replays its launch sequence as a CUDA graph (one
// graph per set of tensor addresses and bound sizes, the last 8 kept):
// Off; Always (reduce-overhead: from the first run); Repeated: only a run
// whose addresses and sizes one of the last 8 runs also had, so a loop on
// the same tensors (a training step's, with PyTorch's caching allocator
// handing out the same blocks each step) runs as one graph launch from its
// second step, while runs on ever new tensors never pay for a capture.
enum class CudaGraphs { Off, Always, Repeated };
struct Device {
  DeviceType type = DeviceType::Host;
  int32_t ordinal = 0;
  bool operator==(const Device &o) const { return type == o.type && ordinal == o.ordinal; }
  bool operator!=(const Device &o) const { return !(*this == o); }
};
std::string deviceName(Device d); // "cpu", "cuda:0"

// A declared input or output: dims are sizes ("784") or symbols ("B", "4*T").
struct TensorInfo {
  std::string name;
  ElementType dtype;
  std::vector<std::string> shape;
};

// Caller-owned memory on `device`: `data` aligned to the element. Row-major
// and contiguous: `strides` (in elements) may be given, as DLPack does, and
// must then describe the contiguous layout (any stride on a size-1 dim);
// empty means contiguous.
struct TensorView {
  ElementType dtype;
  std::vector<int64_t> shape;
  void *data;
  Device device = {};
  std::vector<int64_t> strides = {};
};

// A tensor the runtime allocated: host memory (64-byte aligned), or device
// memory of a session's device (Session::run(inputs, device)), freed when
// the last copy of the Tensor goes.
class Tensor {
public:
  Tensor(ElementType dtype, std::vector<int64_t> shape);
  // Adopts `data` (freed by its deleter) on `device`.
  Tensor(ElementType dtype, std::vector<int64_t> shape, Device device, std::shared_ptr<uint8_t> data);
  ElementType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  Device device() const { return device_; }
  int64_t numel() const;
  size_t nbytes() const { return bytes_; }
  void *data() { return data_.get(); }
  const void *data() const { return data_.get(); }
  TensorView view() { return {dtype_, shape_, data(), device_}; }

private:
  ElementType dtype_;
  std::vector<int64_t> shape_;
  Device device_;
  size_t bytes_ = 0;
  std::shared_ptr<uint8_t> data_;
};

// A symbolic size and its bounds (max < 0: unbounded).
struct SymbolInfo {
  std::string name;
  int64_t min;
  int64_t max;
};

struct LoadOptions {
  unsigned threads = 0; // kernel (and OpenBLAS) threads; 0 = the CPUs this process may use
  // cuda artifacts: where compiled kernels are cached; empty: the default
  // ($TENSORC_CACHE_DIR, else $XDG_CACHE_HOME/tensorc/kernels, else
  // ~/.cache/tensorc/kernels).
  std::string kernelCacheDir;
  // cuda artifacts: -1 (default) runs each loop step with the variant the
  // runtime's heuristic picks for the bound sizes; N >= 0 runs every loop
  // step with its variant number N (its last if it has fewer). For tests
  // that check every variant, and for tuning.
  int kernelVariant = -1;
  // If not empty: the artifact's SHA-256 (64 hex digits). An artifact with
  // any other hash is refused before it is parsed: a cpu artifact holds
  // native code that runs when it is loaded, so deployers pin what they vetted.
  std::string expectSha256;
  // "default" or "reduce-overhead" (cuda: each session replays its launch
  // sequence as a CUDA graph, captured once per set of sizes and
  // addresses); empty: the mode the artifact was compiled with
  // (`tensorc compile --mode`), else default.
  std::string mode;
  // Autotuning (docs/autotune.md): "default" (or empty: the autotune
  // cache's choices where it has them, if the cache exists, else the
  // heuristics), "max-autotune" (measure every launch the cache does not
  // know, checked against the default, and store the winner) or "strict"
  // (a launch the cache does not know is an error).
  std::string autotune;
  // The autotune cache; empty: $TENSORC_TUNE_DB, else the XDG cache folder.
  std::string tuneDb;
};

// Tensors of a .safetensors file, e.g. a model's parameters (docs/runtime.md,
// "Weights"): the file is memory-mapped and checked when opened (header
// bounds, JSON, dtypes, shapes against byte sizes, offsets, overlaps) and
// stays mapped while the object lives.
class Weights {
public:
  // Throws Error naming the file and the problem.
  static std::shared_ptr<const Weights> open(const std::string &path);
  ~Weights();
  const std::string &path() const;
  // Every tensor in the file (names, dtypes, shapes; dims as numbers).
  const std::vector<TensorInfo> &tensors() const;
  // The tensor named `name` as a host view into the file (read-only, valid
  // while this object lives); throws Error if the file has none.
  TensorView view(const std::string &name) const;
  bool contains(const std::string &name) const;
  // The file's "__metadata__" (string to string).
  const std::map<std::string, std::string> &metadata() const;

  struct Impl;

private:
  explicit Weights(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Executable {
public:
  // Loads and checks an artifact; throws Error naming the file and problem
  // (truncated, corrupted, wrong version, wrong target, missing symbols).
  static std::shared_ptr<Executable> load(const std::string &path, const LoadOptions &options = {});
  static std::shared_ptr<Executable> loadFromMemory(const std::string &bytes,
                                                    const std::string &name,
                                                    const LoadOptions &options = {});
  ~Executable();

  const std::string &function() const;
  const std::string &target() const; // "cpu" or "cuda"
  Device device() const;              // where its runs compute (host for cpu artifacts)
  const std::string &mode() const;    // "default" or "reduce-overhead"
  // A runtime-owned tensor on device() (for outputs and resident state).
  Tensor newTensor(ElementType dtype, std::vector<int64_t> shape) const;
  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;
  const std::vector<SymbolInfo> &symbols() const;
  int64_t numSteps() const;
  // cuda artifacts: the most kernel variants any loop step (or chain) has,
  // so LoadOptions::kernelVariant 0..N-1 reaches every variant; 0 for cpu.
  int kernelVariantCount() const;

  struct Impl;
  const Impl &impl() const { return *impl_; }

private:
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Session {
public:
  explicit Session(std::shared_ptr<const Executable> executable);
  ~Session();
  Session(Session &&) noexcept;
  Session &operator=(Session &&) noexcept;

  // Runs with runtime-allocated outputs on `outputs` (host memory by
  // default; or the executable's device). Inputs in declaration order.
  std::vector<Tensor> run(const std::vector<TensorView> &inputs, Device outputs = {});
  // Runs into caller-owned outputs (shapes must match the bound sizes).
  // Waits for the run to finish, then raises its run-time checks.
  void run(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs);

  // Device-resident runs. Each input and output is either on the
  // executable's device (used in place: no copy) or in host memory (copied
  // in, and out, through session-owned device memory). enqueue queues the
  // run on the session's stream and returns; the caller must not free or
  // change the tensors until synchronize() returns. synchronize() waits for
  // everything queued, then raises kernel faults and the run-time checks of
  // the last run enqueued. A cpu executable runs synchronously in enqueue.
  void enqueue(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs);
  void synchronize();
  // cuda executables: the CUDA stream (a CUstream / cudaStream_t) runs are
  // queued on, e.g. PyTorch's current stream; nullptr is CUDA's default
  // (legacy) stream, as in CUDA. The stream must outlive its use by the
  // session. useOwnStream() goes back to the session's own stream (the
  // default: a non-blocking stream the session created).
  void setStream(void *stream);
  void useOwnStream();
  // cuda executables: replay the launch sequence as a CUDA graph (the
  // executable's mode() sets the default: Always for reduce-overhead, else
  // Off). A graph is captured per set of bound sizes and tensor addresses
  // (the last 8 are kept): loops that run on the same tensors replay it
  // with one launch. setCudaGraphs(bool): Always or Off.
  void setCudaGraphs(bool on);
  void setCudaGraphs(CudaGraphs mode);
  // Resident state, for training steps (`tensorc compile --train`): every
  // input X that the artifact also returns as `X.next` (parameters,
  // optimizer state, the step count) can live in the session, on the
  // executable's device, across runs. setState copies a value in (from host
  // or device memory); enqueueStep runs with the state as those inputs and
  // makes each `X.next` the new X without copying (the session keeps two
  // buffers per state tensor and swaps them); readState copies the current
  // value out. A loop of steps then moves only the batch and what the
  // caller asks for. Names are the artifact's.
  std::vector<std::string> stateNames() const;
  void setState(const std::string &name, const TensorView &value);
  void readState(const std::string &name, const TensorView &out);
  // Inputs neither in the state nor bound, and any outputs wanted, by
  // name (other outputs go to session memory; a given input overrides a
  // bound one). Queued like enqueue(); synchronize().
  void enqueueStep(const std::map<std::string, TensorView> &inputs,
                   const std::map<std::string, TensorView> &outputs = {});

  // Bound inputs: a value copied once into session memory (on the
  // executable's device) that enqueueStep uses for the input of that name
  // whenever it is not given, e.g. a model's parameters. bindInput checks
  // the dtype and the declared static sizes (symbolic ones bind at run
  // time); binding a state input sets the state. bindWeights binds every
  // input the file has a tensor for (tensors the artifact has no input for
  // are skipped) and returns the names bound; a tensor whose dtype or shape
  // does not match is an Error naming both. Binding again replaces the
  // value: new weights without recompiling.
  void bindInput(const std::string &name, const TensorView &value);
  std::vector<std::string> bindWeights(const Weights &weights);
  std::vector<std::string> boundInputNames() const;

  // Output shapes for these input shapes, without running.
  std::vector<std::vector<int64_t>> outputShapes(const std::vector<TensorView> &inputs);

  // Symbol sizes bound by the last run, and the arena it used.
  const std::map<std::string, int64_t> &bindings() const;
  int64_t arenaBytes() const;
  // cuda artifacts: milliseconds the GPU spent on the last run's launch
  // sequence (CUDA events; host<->device copies excluded); -1 for cpu.
  double lastDeviceMs() const;

  struct State; // implementation detail

private:
  std::shared_ptr<const Executable> executable_;
  std::unique_ptr<State> state_;
};

} // namespace tensorc::runtime
