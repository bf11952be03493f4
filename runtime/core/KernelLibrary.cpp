#include "runtime/core/KernelLibrary.h"

#include "ir/core/Error.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace tensorc::runtime {

KernelLibrary::KernelLibrary(const std::string &bytes, const std::string &where) : where_(where) {
  // The fd stays open while the library is loaded: dlopen identifies
  // libraries by path, and /proc/self/fd/N must not name two libraries.
  fd_ = memfd_create("tensorc-kernels", MFD_CLOEXEC);
  check(fd_ >= 0, where + ": cannot create an in-memory file for the kernels: " +
                      std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd_);
      fail(where + ": cannot write the kernels to memory: " + std::strerror(errno));
    }
    written += size_t(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd_);
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char *why = dlerror();
    ::close(fd_);
    fail(where + ": cannot load the kernel library: " + (why ? why : "unknown dlopen error"));
  }
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    dlclose(handle_);
  if (fd_ >= 0)
    ::close(fd_);
}

void *KernelLibrary::ownSymbol(const std::string &symbol, const std::string &missing) const {
  dlerror();
  void *p = dlsym(handle_, symbol.c_str());
  check(p != nullptr, where_ + ": " + missing);
  // Only what the artifact's own library defines.
  link_map *own = nullptr, *definer = nullptr;
  Dl_info info;
  check(dlinfo(handle_, RTLD_DI_LINKMAP, &own) == 0 &&
            dladdr1(p, &info, reinterpret_cast<void **>(&definer), RTLD_DL_LINKMAP) != 0 &&
            definer == own,
        where_ + ": symbol '" + symbol + "' is not defined by the artifact's code");
  return p;
}

LoopKernelFn KernelLibrary::loopKernel(const std::string &symbol) const {
  return reinterpret_cast<LoopKernelFn>(ownSymbol(
      symbol, "the kernel library has no symbol '" + symbol + "' (artifact corrupted or built by another tensorc)"));
}

const char *KernelLibrary::constantString(const std::string &symbol, const std::string &what) const {
  return static_cast<const char *>(ownSymbol(symbol, "the kernel library has no " + what +
                                                         " (artifact corrupted or built by another tensorc)"));
}

} // namespace tensorc::runtime
