#include "runtime/cuda/CudaDriver.h"

#include "ir/core/Error.h"

#include "runtime/host/DynamicLibrary.h"
#include <memory>
#include <mutex>

namespace tensorc::cuda {

struct Driver::Api {
  int (*init)(unsigned);
  int (*deviceGet)(int *, int);
  int (*deviceGetAttribute)(int *, int, int);
  int (*deviceGetName)(char *, int, int);
  int (*primaryCtxRetain)(void **, int);
  int (*ctxSetCurrent)(void *);
  int (*ctxGetCurrent)(void **);
  int (*ctxSynchronize)();
  int (*moduleLoadData)(void **, const void *);
  int (*moduleGetFunction)(void **, void *, const char *);
  int (*moduleGetGlobal)(DevicePtr *, size_t *, void *, const char *);
  int (*funcSetAttribute)(void *, int, int);
  int (*launchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      void *, void **, void **);
  int (*memAlloc)(DevicePtr *, size_t);
  int (*memFree)(DevicePtr);
  int (*memGetInfo)(size_t *, size_t *);
  int (*memAllocHost)(void **, size_t);
  int (*memFreeHost)(void *);
  int (*pointerGetAttribute)(void *, int, DevicePtr);
  int (*memcpyHtoD)(DevicePtr, const void *, size_t, Stream);
  int (*memcpyDtoH)(void *, DevicePtr, size_t, Stream);
  int (*memcpyDtoD)(DevicePtr, DevicePtr, size_t, Stream);
  int (*memsetD8)(DevicePtr, unsigned char, size_t, Stream);
  int (*streamCreate)(Stream *, unsigned);
  int (*streamCreateWithPriority)(Stream *, unsigned, int);
  int (*ctxGetStreamPriorityRange)(int *, int *);
  int (*streamDestroy)(Stream);
  int (*streamSynchronize)(Stream);
  int (*streamQuery)(Stream);
  int (*eventQuery)(void *);
  int (*eventCreate)(void **, unsigned);
  int (*eventDestroy)(void *);
  int (*eventRecord)(void *, Stream);
  int (*streamWaitEvent)(Stream, void *, unsigned);
  int (*eventSynchronize)(void *);
  int (*eventElapsedTime)(float *, void *, void *);
  int (*getErrorString)(int, const char **);
  int (*streamBeginCapture)(Stream, int);
  int (*streamEndCapture)(Stream, void **);
  int (*graphInstantiate)(void **, void *, unsigned long long);
  int (*graphLaunch)(void *, Stream);
  int (*graphExecDestroy)(void *);
  int (*graphDestroy)(void *);
};

namespace {

struct Loaded {
  std::unique_ptr<Driver::Api> api;
  std::string error;
};

const Loaded &load() {
  static const Loaded loaded = [] {
    Loaded l;
    std::string tried;
    DynamicLibrary lib = DynamicLibrary::open({"libcuda.so.1"}, false, tried);
    if (!lib) {
      l.error = "no NVIDIA driver: libcuda.so.1 cannot be loaded (" + lib.error() + ")";
      return l;
    }
    auto api = std::make_unique<Driver::Api>();
    auto sym = [&](auto &fn, const char *name) { lib.bind(fn, name); };
    sym(api->init, "cuInit");
    sym(api->deviceGet, "cuDeviceGet");
    sym(api->deviceGetAttribute, "cuDeviceGetAttribute");
    sym(api->deviceGetName, "cuDeviceGetName");
    sym(api->primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(api->ctxSetCurrent, "cuCtxSetCurrent");
    sym(api->ctxGetCurrent, "cuCtxGetCurrent");
    sym(api->ctxSynchronize, "cuCtxSynchronize");
    sym(api->moduleLoadData, "cuModuleLoadData");
    sym(api->moduleGetFunction, "cuModuleGetFunction");
    sym(api->moduleGetGlobal, "cuModuleGetGlobal_v2");
    sym(api->launchKernel, "cuLaunchKernel");
    sym(api->funcSetAttribute, "cuFuncSetAttribute");
    sym(api->memAlloc, "cuMemAlloc_v2");
    sym(api->memFree, "cuMemFree_v2");
    sym(api->memGetInfo, "cuMemGetInfo_v2");
    sym(api->memAllocHost, "cuMemAllocHost_v2");
    sym(api->memFreeHost, "cuMemFreeHost");
    sym(api->pointerGetAttribute, "cuPointerGetAttribute");
    sym(api->memcpyHtoD, "cuMemcpyHtoDAsync_v2");
    sym(api->memcpyDtoH, "cuMemcpyDtoHAsync_v2");
    sym(api->memcpyDtoD, "cuMemcpyDtoDAsync_v2");
    sym(api->memsetD8, "cuMemsetD8Async");
    sym(api->streamCreate, "cuStreamCreate");
    sym(api->streamCreateWithPriority, "cuStreamCreateWithPriority");
    sym(api->ctxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
    sym(api->streamDestroy, "cuStreamDestroy_v2");
    sym(api->streamSynchronize, "cuStreamSynchronize");
    sym(api->streamQuery, "cuStreamQuery");
    sym(api->eventQuery, "cuEventQuery");
    sym(api->eventCreate, "cuEventCreate");
    sym(api->eventDestroy, "cuEventDestroy_v2");
    sym(api->eventRecord, "cuEventRecord");
    sym(api->eventSynchronize, "cuEventSynchronize");
    sym(api->streamWaitEvent, "cuStreamWaitEvent");
    sym(api->eventElapsedTime, "cuEventElapsedTime");
    sym(api->getErrorString, "cuGetErrorString");
    sym(api->streamBeginCapture, "cuStreamBeginCapture_v2");
    sym(api->streamEndCapture, "cuStreamEndCapture");
    sym(api->graphInstantiate, "cuGraphInstantiateWithFlags");
    sym(api->graphLaunch, "cuGraphLaunch");
    sym(api->graphExecDestroy, "cuGraphExecDestroy");
    sym(api->graphDestroy, "cuGraphDestroy");
    if (!lib.missing().empty()) {
      l.error = "libcuda.so.1 lacks " + lib.missing() + " (driver too old?)";
      return l;
    }
    l.api = std::move(api);
    return l;
  }();
  return loaded;
}

} // namespace

bool Driver::available() { return load().api != nullptr; }

Driver &Driver::get() {
  static std::once_flag once;
  static std::unique_ptr<Driver> driver;
  static std::string error;
  std::call_once(once, [] {
    if (!load().api) {
      error = load().error;
      return;
    }
    try {
      driver.reset(new Driver());
    } catch (const Error &e) {
      error = e.what();
    }
  });
  check(driver != nullptr, "cuda: " + error);
  return *driver;
}

#define TC_CU(call)                                                                               \
  do {                                                                                            \
    int rc_ = api_->call;                                                                         \
    if (rc_ != 0) {                                                                               \
      const char *msg_ = nullptr;                                                                 \
      api_->getErrorString(rc_, &msg_);                                                           \
      fail(std::string("cuda: ") + #call + " failed: " + (msg_ ? msg_ : "unknown error") +        \
           " (" + std::to_string(rc_) + ")");                                                     \
    }                                                                                             \
  } while (0)

Driver::Driver() : api_(load().api.get()) {
  TC_CU(init(0));
  int device = 0;
  TC_CU(deviceGet(&device, 0));
  TC_CU(deviceGetAttribute(&major_, 75, device)); // COMPUTE_CAPABILITY_MAJOR
  TC_CU(deviceGetAttribute(&minor_, 76, device)); // COMPUTE_CAPABILITY_MINOR
  TC_CU(deviceGetAttribute(&multiprocessors_, 16, device)); // MULTIPROCESSOR_COUNT
  TC_CU(deviceGetAttribute(&maxSharedOptIn_, 97, device)); // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
  TC_CU(deviceGetAttribute(&l2Bytes_, 38, device));        // L2_CACHE_SIZE
  char name[256] = {};
  TC_CU(deviceGetName(name, sizeof name, device));
  name_ = name;
  TC_CU(primaryCtxRetain(&context_, device));
  makeCurrent();
}

void Driver::makeCurrent() const {
  // A thread has no current context until one is set: callers may come from
  // any thread (PyTorch runs backward on its autograd thread).
  void *current = nullptr;
  if (api_->ctxGetCurrent(&current) == 0 && current == context_)
    return;
  TC_CU(ctxSetCurrent(context_));
}

void *Driver::loadModule(const std::string &image) const {
  makeCurrent();
  void *m = nullptr;
  TC_CU(moduleLoadData(&m, image.data()));
  return m;
}

bool Driver::hasFunction(const std::vector<void *> &modules, const std::string &name) const {
  for (void *m : modules) {
    void *f = nullptr;
    if (api_->moduleGetFunction(&f, m, name.c_str()) == 0)
      return true;
  }
  return false;
}

void *Driver::function(const std::vector<void *> &modules, const std::string &name) const {
  for (void *m : modules) {
    void *f = nullptr;
    if (api_->moduleGetFunction(&f, m, name.c_str()) == 0)
      return f;
  }
  fail("cuda: the kernel modules have no function '" + name + "'");
}

void Driver::readGlobal(const std::vector<void *> &modules, const std::string &name, void *dst,
                        size_t bytes) const {
  DevicePtr p = 0;
  size_t size = 0;
  int rc = -1;
  for (void *m : modules)
    if ((rc = api_->moduleGetGlobal(&p, &size, m, name.c_str())) == 0)
      break;
  check(rc == 0, "cuda: the kernel modules have no variable '" + name + "'");
  check(size == bytes, "cuda: the kernel module's variable '" + name + "' has " + std::to_string(size) +
                           " bytes, not " + std::to_string(bytes));
  copyToHost(dst, p, bytes);
  synchronize(nullptr);
}

void Driver::launch(void *f, unsigned gridX, unsigned blockX, void **args, Stream stream,
                    unsigned gridY, unsigned sharedBytes) const {
  TC_CU(launchKernel(f, gridX, gridY, 1, blockX, 1, 1, sharedBytes, stream, args, nullptr));
}

void Driver::allowSharedMemory(void *f, unsigned bytes) const {
  constexpr int kMaxDynamicSharedSizeBytes = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  TC_CU(funcSetAttribute(f, kMaxDynamicSharedSizeBytes, int(bytes)));
}

// Allocation, freeing and module loading make the context current
// themselves: a caller's thread may have none (PyTorch's autograd thread
// frees a step's tensors and loads artifacts compiled on first use there).
DevicePtr Driver::allocate(size_t bytes) const {
  makeCurrent();
  DevicePtr p = 0;
  if (!bytes)
    return p;
  constexpr int kOutOfMemory = 2; // CUDA_ERROR_OUT_OF_MEMORY
  const int rc = api_->memAlloc(&p, bytes);
  if (rc == kOutOfMemory) {
    // What a user can act on: how much was asked and what the device
    // has left (another process, or PyTorch's cached blocks, may hold it).
    size_t available = 0, total = 0;
    api_->memGetInfo(&available, &total);
    auto mib = [](size_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MiB"; };
    fail("cuda: out of device memory: " + mib(bytes) + " asked, " + mib(available) + " free of " + mib(total) +
         " (other processes and PyTorch's caching allocator hold the rest; torch.cuda.empty_cache() returns "
         "PyTorch's cached blocks)");
  }
  if (rc != 0) {
    const char *message = nullptr;
    api_->getErrorString(rc, &message);
    fail("cuda: allocating " + std::to_string(bytes) + " bytes failed: " + (message ? message : "unknown error") +
         " (" + std::to_string(rc) + ")");
  }
  return p;
}
void Driver::free(DevicePtr p) const {
  if (p && api_->ctxSetCurrent(context_) == 0)
    api_->memFree(p);
}
void *Driver::allocateHost(size_t bytes) const {
  void *p = nullptr;
  if (bytes)
    TC_CU(memAllocHost(&p, bytes));
  return p;
}
void Driver::freeHost(void *p) const {
  if (p)
    api_->memFreeHost(p);
}
bool Driver::isDeviceMemory(DevicePtr p) const {
  unsigned int type = 0; // CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2): CU_MEMORYTYPE_DEVICE is 2
  if (api_->pointerGetAttribute(&type, 2, p) != 0)
    return false; // not memory CUDA knows: pageable host memory
  return type == 2;
}
void Driver::copyToDevice(DevicePtr d, const void *s, size_t n, Stream stream) const {
  if (n)
    TC_CU(memcpyHtoD(d, s, n, stream));
}
void Driver::copyToHost(void *d, DevicePtr s, size_t n, Stream stream) const {
  if (n)
    TC_CU(memcpyDtoH(d, s, n, stream));
}
void Driver::copyOnDevice(DevicePtr d, DevicePtr s, size_t n, Stream stream) const {
  if (n)
    TC_CU(memcpyDtoD(d, s, n, stream));
}
void Driver::fill(DevicePtr d, uint8_t v, size_t n, Stream stream) const {
  if (n)
    TC_CU(memsetD8(d, v, n, stream));
}
void Driver::synchronize() const { TC_CU(ctxSynchronize()); }

Stream Driver::createStream(bool highPriority) const {
  Stream s = nullptr;
  if (highPriority) {
    int least = 0, greatest = 0;
    TC_CU(ctxGetStreamPriorityRange(&least, &greatest));
    TC_CU(streamCreateWithPriority(&s, 1, greatest));
    return s;
  }
  TC_CU(streamCreate(&s, 1)); // CU_STREAM_NON_BLOCKING: no implicit sync with stream 0
  return s;
}
void Driver::destroyStream(Stream s) const {
  if (s)
    api_->streamDestroy(s);
}
void Driver::synchronize(Stream s) const { TC_CU(streamSynchronize(s)); }
bool Driver::finished(Stream s) const {
  if (api_->streamQuery(s) == 600) // CUDA_ERROR_NOT_READY
    return false;
  TC_CU(streamQuery(s)); // success, or the error of queued work
  return true;
}
bool Driver::eventFinished(void *event) const {
  if (api_->eventQuery(event) == 600)
    return false;
  TC_CU(eventQuery(event));
  return true;
}

void *Driver::createEvent(bool timing) const {
  void *e = nullptr;
  TC_CU(eventCreate(&e, timing ? 0 : 2)); // 2: CU_EVENT_DISABLE_TIMING
  return e;
}
void Driver::destroyEvent(void *e) const {
  if (e)
    api_->eventDestroy(e);
}
void Driver::record(void *event, Stream s) const { TC_CU(eventRecord(event, s)); }
void Driver::wait(Stream s, void *event) const { TC_CU(streamWaitEvent(s, event, 0)); }
float Driver::elapsedMs(void *start, void *end) const {
  TC_CU(eventSynchronize(end));
  float ms = 0;
  TC_CU(eventElapsedTime(&ms, start, end));
  return ms;
}

void Driver::beginCapture(Stream s) const {
  TC_CU(streamBeginCapture(s, 2)); // CU_STREAM_CAPTURE_MODE_RELAXED
}
void *Driver::endCapture(Stream s) const {
  void *graph = nullptr;
  int rc = api_->streamEndCapture(s, &graph);
  if (rc != 0) {
    if (graph)
      api_->graphDestroy(graph);
    const char *msg = nullptr;
    api_->getErrorString(rc, &msg);
    fail(std::string("cuda: capturing the launch sequence as a CUDA graph failed: ") +
         (msg ? msg : "unknown error") + " (" + std::to_string(rc) + ")");
  }
  // Kernel nodes keep the priority of the stream they were captured from
  // (CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY): without it a replayed
  // graph runs every node at the launch stream's priority, and the
  // collectives captured from the high-priority communication stream wait
  // behind compute blocks as they would not without graphs.
  // TENSORC_GRAPH_NODE_PRIORITY=0 instantiates without it (for measuring).
  static const unsigned long long flags = [] {
    const char *v = std::getenv("TENSORC_GRAPH_NODE_PRIORITY");
    return v && std::string(v) == "0" ? 0ull : 8ull;
  }();
  void *exec = nullptr;
  rc = api_->graphInstantiate(&exec, graph, flags);
  api_->graphDestroy(graph);
  if (rc != 0) {
    const char *msg = nullptr;
    api_->getErrorString(rc, &msg);
    fail(std::string("cuda: instantiating the CUDA graph failed: ") + (msg ? msg : "unknown error"));
  }
  return exec;
}
void Driver::launchGraph(void *exec, Stream s) const { TC_CU(graphLaunch(exec, s)); }
void Driver::destroyGraph(void *exec) const {
  if (exec)
    api_->graphExecDestroy(exec);
}

} // namespace tensorc::cuda
