// The device half of an executable: where a run's memory lives and how its
// steps execute. runtime/core does everything that is the same on every
// device once (loading, binding sizes, the memory plan, each value's
// address, staging host tensors, run-time checks) and talks to the device
// only through this interface; the CPU backend (runtime/core/CpuBackend.cpp)
// and the CUDA backend (runtime/cuda/CudaBackend.cpp) implement it, and
// runtime/backends/Backends.cpp picks one per artifact target.
#pragma once

#include "ir/core/Error.h"
#include "runtime/artifact/Artifact.h"
#include "tensorc/Runtime.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tensorc::runtime {

// An address in a backend's memory (a host pointer for the CPU).
using Address = uintptr_t;

// One run, resolved by runtime/core.
struct RunFrame {
  const std::vector<int64_t> &symbolValues;       // in the artifact's symbol order
  const std::map<std::string, int64_t> &bindings; // the same, by name
  const std::vector<std::vector<int64_t>> &shapes; // per value
  const std::vector<Address> &values;              // per value: where it lives
};

// A session's device state: its stream, arena and staging memory. Every
// operation is queued in stream order; synchronize() waits for all of it.
class BackendSession {
public:
  virtual ~BackendSession() = default;
  // The arena with at least `bytes` (kept and grown across runs).
  virtual Address arena(size_t bytes) = 0;
  // Device memory for host tensor `slot` (inputs, then outputs), at least
  // `bytes`, kept across runs.
  virtual Address staging(size_t slot, size_t bytes) = 0;
  // Host memory is read when the call returns (the caller may reuse it).
  virtual void copyIn(Address dst, const void *src, size_t bytes) = 0;
  // Host memory is written by the time synchronize() returns.
  virtual void copyOut(void *dst, Address src, size_t bytes) = 0;
  // Between two addresses of the device, in stream order.
  virtual void copyWithin(Address dst, Address src, size_t bytes) = 0;
  // Queues every step of the artifact.
  virtual void execute(const artifact::Artifact &a, const RunFrame &frame) = 0;
  // Queues reading the i32 flags at `addresses` (run-time checks) into host
  // memory that flags() returns after synchronize().
  virtual void readFlags(const std::vector<Address> &addresses) = 0;
  virtual const int32_t *flags() const = 0;
  virtual void synchronize() = 0;
  // `own`: the session's own stream (then `stream` is ignored); else
  // `stream`, nullptr being CUDA's default stream.
  virtual void setStream(void *stream, bool own) = 0;
  virtual double lastDeviceMs() const { return -1; }
  // Replays the launch sequence as a CUDA graph (reduce-overhead).
  virtual void setGraphs(CudaGraphs mode) {
    check(mode == CudaGraphs::Off, "CUDA graphs (reduce-overhead) need a cuda executable");
  }
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual size_t arenaAlignment() const = 0;
  // The artifact's constants (the start of its data section) on the device.
  virtual Address constants() const = 0;
  virtual std::unique_ptr<BackendSession> newSession() const = 0;
  // Runtime-owned memory on the device (64-byte aligned or better), freed
  // by the deleter once nothing queued can still use it.
  virtual std::shared_ptr<uint8_t> allocate(size_t bytes) const = 0;
  virtual int kernelVariantCount() const { return 0; }
  // Whether `p` (a tensor said to be on device()) is this device's memory,
  // where that can be told (a host pointer passed as a CUDA one).
  virtual bool isDeviceMemory(const void *p) const { return true; }
};

// The backend for `a`'s target; throws Error naming `where`.
std::unique_ptr<Backend> makeBackend(const artifact::Artifact &a, const std::string &where,
                                     const LoadOptions &options);

// The CPU backend (in the runtime library itself).
std::unique_ptr<Backend> makeCpuBackend(const artifact::Artifact &a, const std::string &where,
                                        const LoadOptions &options);

} // namespace tensorc::runtime
