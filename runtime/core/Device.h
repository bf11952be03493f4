// Where a run's memory lives and kernels execute. The CPU device is host
// memory; the CUDA backend adds a device with its own allocator, copies and
// streams behind the same interface, so sessions do not change.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace tensorc::runtime {

class Device {
public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // `bytes` of memory aligned to 64 bytes (nullptr for 0 bytes); throws Error.
  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *p) = 0;
  // Copies between this device's memory and the host.
  virtual void copyToHost(void *host, const void *device, size_t bytes) = 0;
  virtual void copyFromHost(void *device, const void *host, size_t bytes) = 0;
  // Waits until everything issued so far has finished.
  virtual void synchronize() = 0;
};

std::unique_ptr<Device> makeCpuDevice();

} // namespace tensorc::runtime
