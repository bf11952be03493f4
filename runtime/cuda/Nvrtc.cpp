#include "runtime/cuda/Nvrtc.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cstdlib>
#include "runtime/host/DynamicLibrary.h"
#include <memory>
#include <mutex>

namespace tensorc::cuda {

// The NVRTC entry points tensorc uses, with nvrtc.h's signatures (the
// opaque program handle as void*, results as int).
struct Nvrtc::Api {
  using Program = void *;
  const char *(*getErrorString)(int);
  int (*version)(int *, int *);
  int (*getNumSupportedArchs)(int *);
  int (*getSupportedArchs)(int *);
  int (*createProgram)(Program *, const char *, const char *, int, const char *const *,
                       const char *const *);
  int (*destroyProgram)(Program *);
  int (*compileProgram)(Program, int, const char *const *);
  int (*getCUBINSize)(Program, size_t *);
  int (*getCUBIN)(Program, char *);
  int (*getProgramLogSize)(Program, size_t *);
  int (*getProgramLog)(Program, char *);
};

namespace {

std::vector<std::string> candidates() {
  std::vector<std::string> libs = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  std::string home = Nvrtc::cudaHome();
  for (const char *l : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
    libs.push_back(home + "/lib64/" + l);
  return libs;
}

struct Loaded {
  std::unique_ptr<Nvrtc::Api> api;
  std::string library;
  std::string error;
};

const Loaded &load() {
  static const Loaded loaded = [] {
    Loaded l;
    std::string tried, failures;
    for (const std::string &name : candidates()) {
      DynamicLibrary lib = DynamicLibrary::open({name}, false, tried);
      if (!lib) {
        // A library that is there but does not load (no address space left
        // to map it, a broken file) says why; one that is absent does not.
        if (lib.error().find("No such file") == std::string::npos && !lib.error().empty())
          failures += "; " + lib.error();
        continue;
      }
      auto api = std::make_unique<Nvrtc::Api>();
      auto sym = [&](auto &fn, const char *symbol) { lib.bind(fn, symbol); };
      sym(api->getErrorString, "nvrtcGetErrorString");
      sym(api->version, "nvrtcVersion");
      sym(api->getNumSupportedArchs, "nvrtcGetNumSupportedArchs");
      sym(api->getSupportedArchs, "nvrtcGetSupportedArchs");
      sym(api->createProgram, "nvrtcCreateProgram");
      sym(api->destroyProgram, "nvrtcDestroyProgram");
      sym(api->compileProgram, "nvrtcCompileProgram");
      sym(api->getCUBINSize, "nvrtcGetCUBINSize");
      sym(api->getCUBIN, "nvrtcGetCUBIN");
      sym(api->getProgramLogSize, "nvrtcGetProgramLogSize");
      sym(api->getProgramLog, "nvrtcGetProgramLog");
      if (!lib.missing().empty()) { // another library of the name: try the next
        lib.close();
        continue;
      }
      l.api = std::move(api);
      l.library = name;
      return l;
    }
    l.error = failures.empty() ? "NVRTC is not available (tried " + tried +
                                     "): install the CUDA toolkit or set CUDA_HOME"
                               : "NVRTC did not load (tried " + tried + failures + ")";
    return l;
  }();
  return loaded;
}

} // namespace

std::string Nvrtc::cudaHome() {
  const char *h = std::getenv("CUDA_HOME");
  return h && *h ? h : "/usr/local/cuda";
}

bool Nvrtc::available() { return load().api != nullptr; }

const Nvrtc &Nvrtc::get() {
  static std::once_flag once;
  static std::unique_ptr<Nvrtc> instance;
  std::call_once(once, [] {
    if (load().api)
      instance.reset(new Nvrtc());
  });
  check(instance != nullptr, load().error);
  return *instance;
}

Nvrtc::Nvrtc() : api_(load().api.get()), library_(load().library) {}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->version(&major, &minor);
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> Nvrtc::supportedArchs() const {
  int n = 0;
  api_->getNumSupportedArchs(&n);
  std::vector<int> archs(size_t(std::max(n, 0)));
  if (n > 0)
    api_->getSupportedArchs(archs.data());
  return archs;
}

Nvrtc::Output Nvrtc::compile(const std::string &source, const std::string &name,
                             const std::string &arch, const std::vector<std::string> &options,
                             int splitThreads) const {
  Api::Program prog = nullptr;
  int rc = api_->createProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  check(rc == 0, name + ": nvrtcCreateProgram failed: " + api_->getErrorString(rc));
  std::vector<std::string> all = {"--gpu-architecture=" + arch, "-I" + cudaHome() + "/include",
                                  "--std=c++17",
                                  "--split-compile=" + std::to_string(std::max(0, splitThreads))};
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char *> argv;
  for (const std::string &o : all)
    argv.push_back(o.c_str());
  rc = api_->compileProgram(prog, int(argv.size()), argv.data());
  size_t logSize = 0;
  api_->getProgramLogSize(prog, &logSize);
  std::string log(logSize, '\0');
  if (logSize)
    api_->getProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  if (rc != 0) {
    api_->destroyProgram(&prog);
    fail(name + ": NVRTC could not compile it for " + arch + " (" + api_->getErrorString(rc) +
         "):\n" + log);
  }
  size_t size = 0;
  api_->getCUBINSize(prog, &size);
  std::string cubin(size, '\0');
  api_->getCUBIN(prog, cubin.data());
  api_->destroyProgram(&prog);
  return {cubin, log};
}

} // namespace tensorc::cuda
