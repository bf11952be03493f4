// The CUDA driver API, loaded with dlopen (libcuda.so.1 comes with the
// NVIDIA driver): the runtime has no link-time CUDA dependency and the same
// binary runs CPU artifacts on machines without a GPU. Every call is
// checked; failures throw Error naming the call and CUDA's message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensorc::cuda {

using DevicePtr = unsigned long long; // CUdeviceptr

class Driver {
public:
  // Loads libcuda, initializes device 0 and makes its primary context
  // current on the calling thread. Throws Error ("no NVIDIA driver ...").
  static Driver &get();
  static bool available();

  int computeCapability() const { return major_ * 10 + minor_; } // 90 for sm_90
  std::string deviceName() const { return name_; }
  void makeCurrent() const; // on the calling thread

  void *loadModule(const std::string &image) const;
  void *function(void *module, const std::string &name) const;
  void launch(void *function, unsigned gridX, unsigned blockX, void **args) const;
  DevicePtr allocate(size_t bytes) const;
  void free(DevicePtr p) const;
  void copyToDevice(DevicePtr dst, const void *src, size_t bytes) const;
  void copyToHost(void *dst, DevicePtr src, size_t bytes) const;
  void copyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) const;
  void fill(DevicePtr dst, uint8_t value, size_t bytes) const;
  void synchronize() const;

  struct Api;

private:
  Driver();
  const Api *api_;
  void *context_ = nullptr;
  int major_ = 0, minor_ = 0;
  std::string name_;
};

} // namespace tensorc::cuda
