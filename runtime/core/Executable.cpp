// Loading an artifact and running its launch sequence on the CPU.
#include "tensorc/Runtime.h"

#include "ir/core/Error.h"
#include "ir/core/MemoryPlanner.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/cache/Sha256.h"
#include "runtime/core/Blas.h"
#include "runtime/core/Device.h"
#include "runtime/core/KernelLibrary.h"
#include "runtime/cuda/CudaProgram.h"
#include "runtime/host/ReadFile.h"
#include "runtime/host/ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tensorc::runtime {

using artifact::Storage;
using artifact::Step;

namespace {

// Nests with fewer iterations than this run on the calling thread: below
// it, waking workers costs more than the loop.
constexpr int64_t kParallelWork = 1 << 15;
constexpr int64_t kChunkWork = 1 << 13;

ElementType toElementType(DType d) { return ElementType(int(d)); }
DType toDType(ElementType t) { return DType(int(t)); }
static_assert(int(DType::F64) == int(ElementType::F64) && int(DType::I1) == int(ElementType::I1),
              "public element types mirror ir/core DType");

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

std::string dimsStr(const std::vector<int64_t> &s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

template <typename F> auto rethrow(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const runtime::Error &) {
    throw;
  } catch (const std::exception &e) {
    throw runtime::Error(e.what());
  }
}

} // namespace

// ------------------------------------------------------------------ Tensor

const char *elementTypeName(ElementType t) { return dtypeName(toDType(t)).data(); }
size_t elementSize(ElementType t) { return dtypeSize(toDType(t)); }

Tensor::Tensor(ElementType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  bytes_ = size_t(numel()) * elementSize(dtype);
  void *p = bytes_ ? std::aligned_alloc(64, (bytes_ + 63) / 64 * 64) : nullptr;
  if (bytes_ && !p)
    throw Error("out of memory allocating a tensor of " + std::to_string(bytes_) + " bytes");
  data_ = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), [](uint8_t *q) { std::free(q); });
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

// -------------------------------------------------------------- Executable

struct Executable::Impl {
  std::string where;
  artifact::Artifact art;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<SymbolInfo> symbols;
  std::unique_ptr<KernelLibrary> library;
  std::vector<LoopKernelFn> kernels; // per step (null for library steps)
  std::shared_ptr<uint8_t> constants; // the data section, 64-byte aligned
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Device> device;
  std::unique_ptr<cuda::CudaProgram> cuda; // for "cuda" artifacts
};

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

std::shared_ptr<Executable> Executable::load(const std::string &path, const LoadOptions &options) {
  std::string why;
  std::optional<std::string> bytes = readRegularFile(path, UINT64_MAX, &why);
  if (!bytes)
    throw Error(path + ": cannot open artifact: " + why);
  return loadFromMemory(*bytes, path, options);
}

std::shared_ptr<Executable> Executable::loadFromMemory(const std::string &bytes,
                                                       const std::string &name,
                                                       const LoadOptions &options) {
  return rethrow([&] {
    auto impl = std::make_unique<Impl>();
    impl->where = name;
    if (!options.expectSha256.empty()) {
      // The deployer's pin: nothing of an artifact that is not the one they
      // vetted is parsed or loaded (a cpu artifact's code runs when loaded).
      std::string actual = sha256Hex(bytes), expected = options.expectSha256;
      std::transform(expected.begin(), expected.end(), expected.begin(),
                     [](unsigned char c) { return char(std::tolower(c)); });
      check(actual == expected, name + ": SHA-256 is " + actual + ", not the expected " +
                                    options.expectSha256 + "; refusing to load it");
    }
    impl->art = artifact::parse(bytes, name);
    const artifact::Artifact &a = impl->art;
    check(a.target.kind == "cpu" || a.target.kind == "cuda",
          name + ": compiled for target '" + a.target.kind +
              "', but this runtime runs only 'cpu' and 'cuda' artifacts");
    if (a.target.kind == "cpu") {
      std::string arch = a.target.triple.substr(0, a.target.triple.find('-'));
      check(arch == hostArch(), name + ": compiled for " + a.target.triple +
                                    ", but this machine is " + hostArch() +
                                    "; recompile with --target cpu on (or for) it");
      for (const std::string &f : a.target.features)
        check(hostHasFeature(f), name + ": the code needs the CPU feature '" + f +
                                     "' (compiled for " + a.target.cpu +
                                     "), which this machine lacks; recompile with "
                                     "--cpu x86-64 or on this machine");
    }
    auto info = [](const artifact::TensorDecl &t) {
      TensorInfo i{t.name, toElementType(t.dtype), {}};
      for (const Dim &d : t.shape)
        i.shape.push_back(d.str());
      return i;
    };
    for (const auto &t : a.inputs)
      impl->inputs.push_back(info(t));
    for (const auto &t : a.outputs)
      impl->outputs.push_back(info(t));
    for (const artifact::SymbolDecl &s : a.symbols)
      impl->symbols.push_back({s.name, s.min, s.max.value_or(-1)});
    if (a.target.kind == "cuda") {
      try {
        impl->cuda = std::make_unique<cuda::CudaProgram>(a, name, options.kernelCacheDir,
                                                          options.kernelVariant);
      } catch (const tensorc::Error &e) {
        fail(name + ": " + e.what());
      }
    } else {
      impl->library = std::make_unique<KernelLibrary>(a.code, name);
      for (const Step &s : a.steps)
        impl->kernels.push_back(s.kind == Step::Kind::Loop ? impl->library->loopKernel(s.symbol)
                                                           : nullptr);
    }
    void *data = a.data.empty() ? nullptr : std::aligned_alloc(64, (a.data.size() + 63) / 64 * 64);
    if (data)
      std::memcpy(data, a.data.data(), a.data.size());
    impl->constants =
        std::shared_ptr<uint8_t>(static_cast<uint8_t *>(data), [](uint8_t *p) { std::free(p); });
    impl->pool = std::make_unique<ThreadPool>(options.threads);
    impl->device = makeCpuDevice();
    return std::shared_ptr<Executable>(new Executable(std::move(impl)));
  });
}

const std::string &Executable::function() const { return impl_->art.function; }
const std::string &Executable::target() const { return impl_->art.target.kind; }
const std::vector<TensorInfo> &Executable::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo> &Executable::outputs() const { return impl_->outputs; }
const std::vector<SymbolInfo> &Executable::symbols() const { return impl_->symbols; }
int64_t Executable::numSteps() const { return int64_t(impl_->art.steps.size()); }

int Executable::kernelVariantCount() const {
  size_t n = 0;
  if (impl_->art.target.kind == "cuda")
    for (const artifact::Step &st : impl_->art.steps)
      n = std::max({n, st.variants.size(), st.chainVariants.size()});
  return int(n);
}

// ----------------------------------------------------------------- Session

struct Session::State {
  std::map<std::string, int64_t> bindings;
  bool planned = false;
  std::vector<int64_t> symbolValues;           // in the artifact's symbol order
  std::vector<std::vector<int64_t>> shapes;    // per value
  std::vector<int64_t> bufferOffsets;
  int64_t arenaBytes = 0;
  void *arena = nullptr;
  size_t arenaCapacity = 0;
  Device *device = nullptr;
  std::unique_ptr<cuda::CudaProgram::Buffers> gpu; // device memory of a cuda run
  ~State() {
    if (arena)
      device->deallocate(arena);
  }
};

Session::Session(std::shared_ptr<const Executable> executable)
    : executable_(std::move(executable)), state_(std::make_unique<State>()) {
  if (!executable_)
    throw Error("Session: no executable");
  state_->device = executable_->impl().device.get();
}
Session::~Session() = default;
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;

const std::map<std::string, int64_t> &Session::bindings() const { return state_->bindings; }
int64_t Session::arenaBytes() const { return state_->arenaBytes; }
double Session::lastDeviceMs() const { return state_->gpu ? state_->gpu->lastDeviceMs : -1; }

namespace {

// Binds every symbol from the inputs' shapes and checks them; returns the
// bindings. Throws Error naming the input.
std::map<std::string, int64_t> bindInputs(const Executable::Impl &x,
                                          const std::vector<TensorView> &inputs) {
  const artifact::Artifact &a = x.art;
  const std::string &fn = x.where;
  check(inputs.size() == a.inputs.size(), fn + ": expected " + std::to_string(a.inputs.size()) +
                                              " inputs, got " + std::to_string(inputs.size()));
  std::map<std::string, int64_t> b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const artifact::TensorDecl &d = a.inputs[i];
    const TensorView &v = inputs[i];
    std::string what = fn + ": input '" + d.name + "'";
    check(toDType(v.dtype) == d.dtype, what + ": expected " + std::string(dtypeName(d.dtype)) +
                                           ", got " + elementTypeName(v.dtype));
    check(v.shape.size() == d.shape.size(),
          what + ": expected rank " + std::to_string(d.shape.size()) + " " + shapeStr(d.shape) +
              ", got shape " + dimsStr(v.shape));
    for (size_t k = 0; k < d.shape.size(); ++k) {
      check(v.shape[k] >= 0, what + ": negative size in shape " + dimsStr(v.shape));
      const Dim &dim = d.shape[k];
      if (dim.isStatic())
        check(dim.value() == v.shape[k], what + ": expected shape " + shapeStr(d.shape) +
                                             ", got " + dimsStr(v.shape));
      else if (dim.isPlainSymbol()) {
        auto [it, fresh] = b.emplace(dim.symbols()[0], v.shape[k]);
        check(fresh || it->second == v.shape[k],
              what + ": dim " + std::to_string(k) + " binds " + dim.str() + " = " +
                  std::to_string(v.shape[k]) + ", but an earlier input bound " + dim.str() +
                  " = " + std::to_string(it->second));
      }
    }
  }
  for (const artifact::SymbolDecl &s : a.symbols) {
    auto it = b.find(s.name);
    check(it != b.end(), fn + ": symbol " + s.name + " appears in no input as a plain dim, so " +
                             "its size cannot be bound");
    check(it->second >= s.min && (!s.max || it->second <= *s.max),
          fn + ": " + s.name + " = " + std::to_string(it->second) + " is outside its bounds [" +
              std::to_string(s.min) + ", " + (s.max ? std::to_string(*s.max) : "inf") + "]");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const artifact::TensorDecl &d = a.inputs[i];
    for (size_t k = 0; k < d.shape.size(); ++k)
      check(*d.shape[k].evaluate(b) == inputs[i].shape[k],
            fn + ": input '" + d.name + "': expected shape " + shapeStr(d.shape) + " with " +
                "the bound sizes, got " + dimsStr(inputs[i].shape));
    size_t bytes = dtypeSize(d.dtype);
    for (int64_t s : inputs[i].shape)
      bytes *= size_t(s);
    check(bytes == 0 || inputs[i].data != nullptr, fn + ": input '" + d.name + "': null data");
  }
  return b;
}

std::vector<int64_t> concrete(const Shape &s, const std::map<std::string, int64_t> &b) {
  std::vector<int64_t> r;
  for (const Dim &d : s)
    r.push_back(*d.evaluate(b));
  return r;
}

int64_t numelOf(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n = checkedMul(n, d, "tensor size");
  return n;
}

// Shapes of every value and the arena layout for these bindings.
void plan(const Executable::Impl &x, Session::State &st,
          const std::map<std::string, int64_t> &bindings) {
  const artifact::Artifact &a = x.art;
  if (st.planned && st.bindings == bindings)
    return;
  st.bindings = bindings;
  st.symbolValues.clear();
  for (const artifact::SymbolDecl &s : a.symbols)
    st.symbolValues.push_back(bindings.at(s.name));
  st.shapes.clear();
  for (const artifact::ValueDecl &v : a.values)
    st.shapes.push_back(concrete(v.shape, bindings));
  std::vector<BufferRequest> requests;
  for (const artifact::BufferDecl &b : a.buffers)
    requests.push_back({*b.bytes.evaluate(bindings), b.first, b.last, -1});
  MemoryPlan p = planMemory(requests, 64);
  st.bufferOffsets = p.offsets;
  st.arenaBytes = p.arenaBytes;
  if (size_t(p.arenaBytes) > st.arenaCapacity) {
    if (st.arena)
      st.device->deallocate(st.arena);
    st.arena = nullptr;
    st.arenaCapacity = 0;
    st.arena = st.device->allocate(size_t(p.arenaBytes));
    st.arenaCapacity = size_t(p.arenaBytes);
  }
  st.planned = true;
}

void execute(const Executable::Impl &x, Session::State &st, const std::vector<TensorView> &inputs,
             const std::vector<TensorView> &outputs) {
  const artifact::Artifact &a = x.art;
  std::vector<void *> ptr(a.values.size(), nullptr);
  for (size_t i = 0; i < a.values.size(); ++i) {
    const Storage &s = a.values[i].storage;
    switch (s.kind) {
    case Storage::Kind::Input:
      ptr[i] = inputs[s.index].data;
      break;
    case Storage::Kind::Output:
      ptr[i] = outputs[s.index].data;
      break;
    case Storage::Kind::Buffer:
      ptr[i] = static_cast<uint8_t *>(st.arena) + st.bufferOffsets[s.index];
      break;
    case Storage::Kind::Constant:
      ptr[i] = x.constants.get() + a.constants[s.index].offset;
      break;
    case Storage::Kind::Alias:
      ptr[i] = ptr[s.index];
      break;
    }
  }
  for (size_t si = 0; si < a.steps.size(); ++si) {
    const Step &step = a.steps[si];
    switch (step.kind) {
    case Step::Kind::Loop: {
      // A chain of loops runs block by block of rows: every loop of the
      // chain on rows [r, r + block) before the next block.
      size_t last = si;
      while (a.steps[last].chainNext)
        ++last;
      int64_t extent = *step.extent.evaluate(st.bindings);
      int64_t work = 0;
      std::vector<std::vector<void *>> args;
      for (size_t k = si; k <= last; ++k) {
        work += *a.steps[k].work.evaluate(st.bindings);
        std::vector<void *> ops;
        for (int o : a.steps[k].operands)
          ops.push_back(ptr[o]);
        args.push_back(std::move(ops));
      }
      size_t first = si;
      si = last;
      if (extent == 0)
        break;
      const int64_t *syms = st.symbolValues.data();
      int64_t perRow = std::max<int64_t>(1, work / extent);
      int64_t block = last > first ? std::max<int64_t>(1, kChunkWork / perRow) : extent;
      auto runRows = [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; r += block)
          for (size_t k = first; k <= last; ++k)
            x.kernels[k](args[k - first].data(), syms, r, std::min(e, r + block));
      };
      if (step.parallel && work >= kParallelWork && x.pool->size() > 1)
        x.pool->parallelFor(extent, std::max<int64_t>(1, kChunkWork / perRow), runRows);
      else
        runRows(0, extent);
      break;
    }
    case Step::Kind::Matmul: {
      int c = step.operands[0], l = step.operands[1], r = step.operands[2];
      MatmulOperand right{ptr[r], a.values[r].dtype, st.shapes[r], step.transposeB};
      matmul({ptr[l], a.values[l].dtype, st.shapes[l], step.transposeA}, right, ptr[c], a.values[c].dtype,
             st.shapes[c], *x.pool);
      applyEpilogue(ptr[c], a.values[c].dtype, st.shapes[c], step.epilogue,
                    step.operands.size() > 3 ? ptr[step.operands[3]] : nullptr, right);
      break;
    }
    case Step::Kind::Copy: {
      int d = step.operands[0], s = step.operands[1];
      size_t bytes = size_t(numelOf(st.shapes[s])) * dtypeSize(a.values[s].dtype);
      if (bytes)
        std::memmove(ptr[d], ptr[s], bytes);
      break;
    }
    }
  }
  for (const artifact::RunCheck &c : a.checks) {
    int32_t flag;
    std::memcpy(&flag, ptr[size_t(c.value)], sizeof flag);
    check(flag == 0, x.where + ": " + c.message);
  }
}

} // namespace

std::vector<std::vector<int64_t>> Session::outputShapes(const std::vector<TensorView> &inputs) {
  return rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    std::map<std::string, int64_t> b = bindInputs(x, inputs);
    std::vector<std::vector<int64_t>> r;
    for (const artifact::TensorDecl &o : x.art.outputs)
      r.push_back(concrete(o.shape, b));
    return r;
  });
}

void Session::run(const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs) {
  rethrow([&] {
    const Executable::Impl &x = executable_->impl();
    std::map<std::string, int64_t> b = bindInputs(x, inputs);
    const std::string &fn = x.where;
    check(outputs.size() == x.art.outputs.size(),
          fn + ": expected " + std::to_string(x.art.outputs.size()) + " outputs, got " +
              std::to_string(outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      const artifact::TensorDecl &d = x.art.outputs[i];
      std::vector<int64_t> want = concrete(d.shape, b);
      std::string what = fn + ": output '" + d.name + "'";
      check(toDType(outputs[i].dtype) == d.dtype, what + ": expected " +
                                                      std::string(dtypeName(d.dtype)) + ", got " +
                                                      elementTypeName(outputs[i].dtype));
      check(outputs[i].shape == want,
            what + ": expected shape " + dimsStr(want) + ", got " + dimsStr(outputs[i].shape));
      check(numelOf(want) == 0 || outputs[i].data != nullptr, what + ": null data");
    }
    if (x.cuda) {
      // The arena lives on the GPU: plan its offsets without host memory.
      State &st = *state_;
      if (!st.planned || st.bindings != b) {
        st.bindings = b;
        st.symbolValues.clear();
        for (const artifact::SymbolDecl &s : x.art.symbols)
          st.symbolValues.push_back(b.at(s.name));
        st.shapes.clear();
        for (const artifact::ValueDecl &v : x.art.values)
          st.shapes.push_back(concrete(v.shape, b));
        std::vector<BufferRequest> requests;
        for (const artifact::BufferDecl &bd : x.art.buffers)
          requests.push_back({*bd.bytes.evaluate(b), bd.first, bd.last, -1});
        MemoryPlan p = planMemory(requests, 256);
        st.bufferOffsets = p.offsets;
        st.arenaBytes = p.arenaBytes;
        st.planned = true;
      }
      if (!st.gpu)
        st.gpu = std::make_unique<cuda::CudaProgram::Buffers>();
      std::vector<const void *> in;
      std::vector<void *> out;
      for (const TensorView &v : inputs)
        in.push_back(v.data);
      for (const TensorView &v : outputs)
        out.push_back(v.data);
      x.cuda->run(x.art, st.symbolValues, st.shapes, st.bufferOffsets, st.arenaBytes, in, out, *st.gpu);
      return;
    }
    plan(x, *state_, b);
    execute(x, *state_, inputs, outputs);
  });
}

std::vector<Tensor> Session::run(const std::vector<TensorView> &inputs) {
  std::vector<Tensor> out;
  std::vector<TensorView> views;
  std::vector<std::vector<int64_t>> shapes = outputShapes(inputs);
  for (size_t i = 0; i < shapes.size(); ++i) {
    out.emplace_back(executable_->outputs()[i].dtype, shapes[i]);
    views.push_back(out.back().view());
  }
  run(inputs, views);
  return out;
}

} // namespace tensorc::runtime
