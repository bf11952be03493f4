// A CUDA artifact loaded on the GPU: its CUDA C++ compiled by NVRTC for the
// GPU found (through the on-disk kernel cache), the module loaded, every
// loop step's kernel (default variant) resolved, constants on the device.
// Runs the launch sequence on device memory: inputs copied in, outputs
// copied out (a device-resident API comes later).
#pragma once

#include "runtime/artifact/Artifact.h"
#include "runtime/cuda/CudaDriver.h"

#include <map>
#include <string>
#include <vector>

namespace tensorc::cuda {

class CudaProgram {
public:
  // Throws Error (no driver, NVRTC missing or failing, matmul steps not
  // supported yet).
  CudaProgram(const artifact::Artifact &artifact, const std::string &where,
              const std::string &kernelCacheDir = "");
  ~CudaProgram();

  struct Buffers {
    DevicePtr arena = 0;
    size_t arenaBytes = 0;
    std::vector<DevicePtr> io; // inputs then outputs
    std::vector<size_t> ioBytes;
    ~Buffers();
  };

  // Runs with host inputs/outputs; `shapes` per value, `offsets` per buffer.
  void run(const artifact::Artifact &a, const std::vector<int64_t> &symbolValues,
           const std::vector<std::vector<int64_t>> &shapes, const std::vector<int64_t> &offsets,
           int64_t arenaBytes, const std::vector<const void *> &inputs,
           const std::vector<void *> &outputs, Buffers &buffers) const;

  const std::string &arch() const { return arch_; }

private:
  Driver &driver_;
  std::string arch_;
  void *module_ = nullptr;
  std::vector<void *> kernels_; // per step
  std::vector<int> blocks_;     // threads per block per step
  std::vector<int> items_;
  DevicePtr constants_ = 0;
};

} // namespace tensorc::cuda
