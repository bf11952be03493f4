// Loading an artifact: checks, the signature, and its backend
// (runtime/core/Backend.h). Sessions are in Session.cpp.
#include "tensorc/Runtime.h"

#include "ir/core/Error.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/cache/Sha256.h"
#include "runtime/core/Backend.h"
#include "runtime/core/ExecutableImpl.h"
#include "runtime/host/ReadFile.h"
#include "runtime/host/Trace.h"

#include <algorithm>
#include <cstring>

namespace tensorc::runtime {

// ------------------------------------------------------------------ Tensor

const char *elementTypeName(ElementType t) { return dtypeName(toDType(t)).data(); }
size_t elementSize(ElementType t) { return dtypeSize(toDType(t)); }

std::string deviceName(Device d) {
  return d.type == DeviceType::Host ? "cpu" : "cuda:" + std::to_string(d.ordinal);
}

Tensor::Tensor(ElementType dtype, std::vector<int64_t> shape, Device device,
               std::shared_ptr<uint8_t> data)
    : dtype_(dtype), shape_(std::move(shape)), device_(device), data_(std::move(data)) {
  bytes_ = size_t(numel()) * elementSize(dtype);
}

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
    double startUs = trace::nowUs();
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
    auto compiled = a.options.find("mode");
    impl->mode = !options.mode.empty()         ? options.mode
                 : compiled != a.options.end() ? compiled->second
                                               : "default";
    check(impl->mode == "default" || impl->mode == "reduce-overhead",
          name + ": unknown mode '" + impl->mode + "' (default or reduce-overhead)");
    check(impl->mode == "default" || a.target.kind == "cuda",
          name + ": mode reduce-overhead (CUDA graphs) needs a cuda artifact");
    // The autotune mode: the caller's, else the one compiled in.
    LoadOptions effective = options;
    if (auto at = a.options.find("autotune"); effective.autotune.empty() && at != a.options.end())
      effective.autotune = at->second;
    try {
      impl->backend = makeBackend(a, name, effective);
    } catch (const tensorc::Error &e) {
      std::string m = e.what();
      fail(m.rfind(name, 0) == 0 ? m : name + ": " + m);
    }
    trace::add({"load " + name, "load", startUs, trace::nowUs() - startUs, 0,
                {{"target", a.target.kind}, {"mode", impl->mode}}});
    return std::shared_ptr<Executable>(new Executable(std::move(impl)));
  });
}

const std::string &Executable::function() const { return impl_->art.function; }
const std::string &Executable::target() const { return impl_->art.target.kind; }
const std::vector<TensorInfo> &Executable::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo> &Executable::outputs() const { return impl_->outputs; }
const std::vector<SymbolInfo> &Executable::symbols() const { return impl_->symbols; }
int64_t Executable::numSteps() const { return int64_t(impl_->art.steps.size()); }

int Executable::kernelVariantCount() const { return impl_->backend->kernelVariantCount(); }
Device Executable::device() const { return impl_->backend->device(); }
const std::string &Executable::mode() const { return impl_->mode; }

Tensor Executable::newTensor(ElementType dtype, std::vector<int64_t> shape) const {
  return rethrow([&] {
    int64_t n = 1;
    for (int64_t d : shape) {
      check(d >= 0, "newTensor: negative size");
      n = checkedMul(n, d, "tensor size");
    }
    size_t bytes = size_t(checkedMul(n, int64_t(elementSize(dtype)), "tensor bytes"));
    return Tensor(dtype, std::move(shape), impl_->backend->device(), impl_->backend->allocate(bytes));
  });
}

} // namespace tensorc::runtime
