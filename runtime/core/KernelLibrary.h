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
  // A NUL-terminated string the library exports (a kernel's signature);
  // Throws Error naming `what` if the library does not define it.
  const char *constantString(const std::string &symbol, const std::string &what) const;

private:
  // `symbol` as defined by this library itself (dlsym also searches its
  // dependencies: a manifest naming `system` must not reach libc).
  void *ownSymbol(const std::string &symbol, const std::string &missing) const;

  std::string where_;
  int fd_ = -1;
  void *handle_ = nullptr;
};

} // namespace tensorc::runtime
