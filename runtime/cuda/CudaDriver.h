// The CUDA driver API, loaded with dlopen (libcuda.so.1 comes with the
// NVIDIA driver): the runtime has no link-time CUDA dependency and the same
// binary runs CPU artifacts on machines without a GPU. Every call is
// checked; failures throw Error naming the call and CUDA's message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tensorc::cuda {

using DevicePtr = unsigned long long; // CUdeviceptr
using Stream = void *;                // CUstream; nullptr: the legacy default stream

class Driver {
public:
  // Loads libcuda, initializes device 0 and makes its primary context
  // current on the calling thread. Throws Error ("no NVIDIA driver ...").
  static Driver &get();
  static bool available();

  int computeCapability() const { return major_ * 10 + minor_; } // 90 for sm_90
  std::string deviceName() const { return name_; }
  int multiprocessors() const { return multiprocessors_; }
  // Dynamic shared memory one block may opt in to (227 KiB on an H100).
  int maxSharedMemoryPerBlock() const { return maxSharedOptIn_; }
  // The L2 cache's size in bytes (50 MiB on an H100 SXM).
  int l2CacheBytes() const { return l2Bytes_; }
  // Makes the context current on the calling thread (cheap when it is):
  // every entry point that may run on another thread than the session's
  // creator calls it first.
  void makeCurrent() const;

  void *loadModule(const std::string &image) const;
  // The kernel `name` of whichever of `modules` has it (a program's kernels
  // are split over several modules: runtime/cuda/TranslationUnits.h).
  void *function(const std::vector<void *> &modules, const std::string &name) const;
  bool hasFunction(const std::vector<void *> &modules, const std::string &name) const;
  // Copies the module's __device__/__constant__ variable `name` (exactly
  // `bytes` long) to dst; throws if there is none or its size differs.
  void readGlobal(const std::vector<void *> &modules, const std::string &name, void *dst, size_t bytes) const;
  // Launches and copies are queued on `stream` (copies between device and
  // pageable host memory are staged by the driver: the host side is done
  // when the call returns, the device side in stream order).
  void launch(void *function, unsigned gridX, unsigned blockX, void **args,
              Stream stream = nullptr, unsigned gridY = 1, unsigned sharedBytes = 0) const;
  // Lets `function` be launched with up to `bytes` of dynamic shared
  // memory (beyond the default 48 KiB where the GPU has it).
  void allowSharedMemory(void *function, unsigned bytes) const;
  DevicePtr allocate(size_t bytes) const;
  void free(DevicePtr p) const;
  // Page-locked host memory (device copies into it are asynchronous).
  void *allocateHost(size_t bytes) const;
  void freeHost(void *p) const;
  // Whether `p` is device memory of this context (cudaMalloc'ed, also by
  // another library such as PyTorch): host pointers are not.
  bool isDeviceMemory(DevicePtr p) const;
  void copyToDevice(DevicePtr dst, const void *src, size_t bytes, Stream stream = nullptr) const;
  void copyToHost(void *dst, DevicePtr src, size_t bytes, Stream stream = nullptr) const;
  void copyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes, Stream stream = nullptr) const;
  void fill(DevicePtr dst, uint8_t value, size_t bytes, Stream stream = nullptr) const;
  void synchronize() const; // the whole context
  // highPriority: the GPU's block scheduler starts its kernels' blocks
  // before those of other streams that wait for a free SM.
  Stream createStream(bool highPriority = false) const;
  void destroyStream(Stream stream) const;
  void synchronize(Stream stream) const; // errors of queued work surface here
  // Without waiting: whether everything queued on `stream` (or before
  // `event`'s record) has run; errors of queued work throw.
  bool finished(Stream stream) const;
  bool eventFinished(void *event) const;
  // timing = false: an event only for ordering (cheaper to record).
  void *createEvent(bool timing = true) const;
  void destroyEvent(void *event) const;
  void record(void *event, Stream stream) const;
  // Work queued on `stream` after this waits for `event` (no host wait).
  void wait(Stream stream, void *event) const;
  float elapsedMs(void *start, void *end) const; // waits for `end`
  // CUDA graphs: work queued on `stream` between beginCapture and
  // endCapture is recorded, not run; endCapture returns it instantiated
  // (a CUgraphExec), launchGraph replays it on any stream.
  void beginCapture(Stream stream) const;
  void *endCapture(Stream stream) const;
  void launchGraph(void *exec, Stream stream) const;
  void destroyGraph(void *exec) const;

  struct Api;

private:
  Driver();
  const Api *api_;
  void *context_ = nullptr;
  int major_ = 0, minor_ = 0, multiprocessors_ = 1, maxSharedOptIn_ = 48 * 1024, l2Bytes_ = 64 << 20;
  std::string name_;
};

} // namespace tensorc::cuda
