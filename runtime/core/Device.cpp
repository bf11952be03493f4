#include "runtime/core/Device.h"

#include "ir/core/Error.h"

#include <cstdlib>
#include <cstring>

namespace tensorc::runtime {
namespace {

class CpuDevice final : public Device {
public:
  std::string name() const override { return "cpu"; }
  void *allocate(size_t bytes) override {
    if (bytes == 0)
      return nullptr;
    void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    check(p != nullptr, "cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void deallocate(void *p) override { std::free(p); }
  void copyToHost(void *host, const void *device, size_t bytes) override {
    if (bytes > 0) // empty tensors may have null pointers
      std::memcpy(host, device, bytes);
  }
  void copyFromHost(void *device, const void *host, size_t bytes) override {
    if (bytes > 0)
      std::memcpy(device, host, bytes);
  }
  void synchronize() override {}
};

} // namespace

std::unique_ptr<Device> makeCpuDevice() { return std::make_unique<CpuDevice>(); }

} // namespace tensorc::runtime
