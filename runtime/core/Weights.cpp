// Weights: a .safetensors file behind the public API (runtime/host/Safetensors.h
// does the mapping and checking).
#include "tensorc/Runtime.h"

#include "runtime/core/ExecutableImpl.h"
#include "runtime/host/Safetensors.h"

namespace tensorc::runtime {

struct Weights::Impl {
  std::shared_ptr<const SafetensorsFile> file;
  std::vector<TensorInfo> tensors;
};

Weights::Weights(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Weights::~Weights() = default;

std::shared_ptr<const Weights> Weights::open(const std::string &path) {
  return rethrow([&] {
    auto impl = std::make_unique<Impl>();
    impl->file = SafetensorsFile::open(path);
    for (const SafetensorsEntry &e : impl->file->entries()) {
      TensorInfo info{e.name, toElementType(e.dtype), {}};
      for (int64_t d : e.shape)
        info.shape.push_back(std::to_string(d));
      impl->tensors.push_back(std::move(info));
    }
    return std::shared_ptr<const Weights>(new Weights(std::move(impl)));
  });
}

const std::string &Weights::path() const { return impl_->file->path(); }
const std::vector<TensorInfo> &Weights::tensors() const { return impl_->tensors; }
const std::map<std::string, std::string> &Weights::metadata() const { return impl_->file->metadata(); }
bool Weights::contains(const std::string &name) const { return impl_->file->find(name) != nullptr; }

TensorView Weights::view(const std::string &name) const {
  const SafetensorsEntry *e = impl_->file->find(name);
  if (!e)
    throw Error(path() + ": no tensor named '" + name + "'");
  return {toElementType(e->dtype), e->shape, const_cast<void *>(impl_->file->data(*e))};
}

} // namespace tensorc::runtime
