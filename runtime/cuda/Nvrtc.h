// NVRTC, loaded with dlopen at run time (the runtime has no link-time CUDA
// dependency): compiles CUDA C++ source to a cubin for one GPU
// architecture. CUDA headers (cuda_fp16.h, cuda_bf16.h) come from
// $CUDA_HOME/include, else /usr/local/cuda/include: NVRTC finds none by
// itself.
#pragma once

#include <string>
#include <vector>

namespace tensorc::cuda {

class Nvrtc {
public:
  // The process-wide instance; throws Error naming every library tried when
  // NVRTC is absent.
  static const Nvrtc &get();
  // Whether NVRTC can be loaded (without throwing).
  static bool available();

  std::string version() const; // "nvrtc 13.0"
  std::vector<int> supportedArchs() const; // e.g. {75, 80, 86, 89, 90, ...}

  struct Output {
    std::string cubin;
    std::string log; // warnings, if any
  };
  // Compiles `source` for `arch` ("sm_90"); throws Error with NVRTC's log
  // (naming `name`) when compilation fails. `splitThreads`: NVRTC's own
  // parallel optimization (--split-compile; 0: every hardware thread).
  Output compile(const std::string &source, const std::string &name, const std::string &arch,
                 const std::vector<std::string> &options = {}, int splitThreads = 0) const;

  static std::string cudaHome();

  struct Api;

private:
  Nvrtc();
  const Api *api_;
  std::string library_;
};

} // namespace tensorc::cuda
