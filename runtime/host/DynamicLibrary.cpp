#include "runtime/host/DynamicLibrary.h"

#include <dlfcn.h>

namespace tensorc {

DynamicLibrary DynamicLibrary::open(const std::vector<std::string> &candidates, bool global, std::string &tried) {
  DynamicLibrary lib;
  for (const std::string &name : candidates) {
    tried += (tried.empty() ? "" : ", ") + name;
    if ((lib.handle_ = dlopen(name.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL))))
      return lib;
    const char *e = dlerror();
    lib.error_ = e ? e : "";
  }
  return lib;
}

void *DynamicLibrary::symbol(const char *name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

void DynamicLibrary::close() {
  if (handle_)
    dlclose(handle_);
  handle_ = nullptr;
}

} // namespace tensorc
