// The code section of a CPU artifact is a shared library; it is loaded from
// memory (an anonymous memfd, no temporary file) with dlopen, and its kernels
// are found by name. The library stays loaded while this object lives.
#pragma once

#include <string>

namespace tensorc::runtime {

// `void kernel(void **operands, const int64_t *symbols, int64_t begin, int64_t end)`
using LoopKernelFn = void (*)(void **, const int64_t *, int64_t, int64_t);

class KernelLibrary {
public:
  // Throws Error (naming `where`) if the bytes cannot be loaded.
  KernelLibrary(const std::string &bytes, const std::string &where);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  // Throws Error if the library lacks `symbol`.
  LoopKernelFn loopKernel(const std::string &symbol) const;

private:
  std::string where_;
  int fd_ = -1;
  void *handle_ = nullptr;
};

} // namespace tensorc::runtime
