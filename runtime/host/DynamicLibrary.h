// A shared library opened at run time and its functions bound by name: the
// runtime has no link-time dependency on the CUDA libraries (driver, NVRTC,
// cuBLASLt, cuDNN), so it loads and runs on machines without them and says
// which one is missing when a GPU artifact needs it.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

namespace tensorc {

class DynamicLibrary {
public:
  DynamicLibrary() = default;
  // The first of `candidates` (names or paths) that dlopen opens, with
  // RTLD_NOW and RTLD_GLOBAL if `global` (a library whose parts open each
  // other by name) else RTLD_LOCAL; an empty library if none. `tried` gets
  // every candidate attempted appended, comma-separated, for the caller's
  // error message.
  static DynamicLibrary open(const std::vector<std::string> &candidates, bool global, std::string &tried);

  explicit operator bool() const { return handle_ != nullptr; }
  // dlerror()'s text after the last open that failed.
  const std::string &error() const { return error_; }

  // Points `fn` at the function `name`; a name not found leaves `fn` null
  // and is listed by missing().
  template <typename Fn> void bind(Fn &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<Fn>>(symbol(name));
    if (!fn)
      missing_ += (missing_.empty() ? "" : ", ") + std::string(name);
  }
  // "cuInit, cuDeviceGet": the names bind() did not find; empty if none.
  const std::string &missing() const { return missing_; }
  // Closes the library (one that lacks functions, before trying another).
  void close();

private:
  void *symbol(const char *name) const;
  void *handle_ = nullptr;
  std::string missing_, error_;
};

} // namespace tensorc
