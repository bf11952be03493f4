// NCCL for the collective steps of CUDA artifacts (docs/sharding.md):
// libnccl.so.2 opened with dlopen (the system's, $TENSORC_NCCL_LIB, or the
// one in PyTorch's pip wheels), one process per GPU.
//
// The processes of a run are started by `tensorc launch --nproc N` (or any
// launcher that sets RANK and WORLD_SIZE as torchrun does, plus
// TENSORC_RENDEZVOUS): rank 0 creates NCCL's unique id and writes it to a
// file in the rendezvous directory; the others wait for it (a rank that
// never comes is a timeout naming it, not a hang).
#pragma once

#include "runtime/artifact/Artifact.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/FirstFitRanges.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tensorc::cuda {

struct NcclApi;

class Nccl {
public:
  // The process's communicator over every rank; throws Error when the
  // environment has no launcher's variables or NCCL cannot be loaded.
  static Nccl &process();
  ~Nccl();
  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  // Queues one collective step on `stream` (operands contiguous, device
  // memory): `out`, `in` and the element counts of the step's operands.
  void run(const artifact::CollectiveStep &step, DType dtype, DevicePtr out, DevicePtr in, int64_t inElements,
           int64_t outElements, const Driver &driver, Stream stream);

  // Makes the communicator of `step`'s group (ncclCommSplit, a collective
  // call of every rank: all ranks prepare the same steps in the same
  // order, at load), so that no split happens inside an NCCL group.
  void prepare(const artifact::CollectiveStep &step);
  // Collectives run between groupStart and groupEnd go to NCCL as one
  // group (one kernel per communicator).
  void groupStart();
  void groupEnd();
  // An error NCCL found while collectives ran (a peer's connection lost,
  // ...), or "": ncclCommGetAsyncError on every communicator.
  std::string asyncError();
  // Aborts every communicator (ncclCommAbort): collectives stuck waiting
  // for another rank return, and this process's NCCL is unusable after.
  // False where the abort did not return within `seconds`: NCCL's
  // symmetric kernels waiting for a lost rank kept ncclCommAbort spinning
  // (2x H200, NCCL 2.28.3 and 2.28.9), so it runs on a thread of its own and the
  // caller decides what to do with a GPU those kernels still hold.
  bool abortWithin(double seconds);

  // Symmetric memory (NCCL 2.27+, docs/sharding.md "Symmetric memory"):
  // `bytes` of device memory from ncclMemAlloc, registered as a symmetric
  // window with every communicator made so far. A collective whose buffers
  // lie in windows at the same offset on every rank runs NCCL's symmetric
  // kernels, which take a third of the SMs the ring kernels take from the
  // compute running beside them. Allocating and freeing are collective:
  // every rank allocates the same sizes in the same order. Returns 0 where
  // NCCL has no windows or TENSORC_NCCL_WINDOWS=0 (use plain memory then).
  DevicePtr allocateWindow(size_t bytes);
  // As allocateWindow, for small buffers (a bias's gradient): carved
  // (first fit, 256-byte aligned) from windows of kWindowGranularity shared
  // by many, since each window takes at least that much. Every rank
  // allocates and frees the same sizes in the same order, so each buffer
  // lies at the same offset of the same window everywhere.
  DevicePtr allocateShared(size_t bytes);
  // Frees a buffer of either kind; false where `p` is not in a window
  // (plain memory: the caller frees it).
  bool freeWindow(DevicePtr p);
  // Whether `p` lies in a window.
  bool inWindow(DevicePtr p);
  // Whether collectives on window buffers may go to NCCL as one group:
  // NCCL 2.28.3 sums such groups wrongly (a group of all_reduces of 1 and
  // 100352 floats, each in its own window, misses 19968 elements on two
  // H200s; 2.28.9 is right: bench/gpu/nccl_groups.cu), so before 2.28.9
  // they go one call each.
  bool groupsWindowCollectives() const { return version_ >= 22809; }

private:
  Nccl();
  void *group(const std::vector<int64_t> &devices);
  DevicePtr allocateWindowLocked(size_t bytes); // allocateWindow with mutex_ held
  // Deregisters `memory`'s windows and frees it (mutex_ held).
  void release(void *memory, const std::vector<std::pair<void *, void *>> &registrations);
  std::unique_ptr<NcclApi> api_;
  void *world_ = nullptr;
  int64_t rank_ = 0, size_ = 1;
  std::mutex mutex_;
  std::map<std::vector<int64_t>, void *> groups_;
  bool windows_ = false;
  int version_ = 0; // ncclGetVersion: 22809 for 2.28.9
  struct Window {
    size_t bytes = 0;
    std::vector<std::pair<void *, void *>> handles; // (communicator, its registration)
  };
  std::map<DevicePtr, Window> windowsByStart_;
  // Windows shared by small buffers, by start.
  std::map<DevicePtr, FirstFitRanges> shared_;
  static constexpr size_t kWindowGranularity = size_t(2) << 20; // ncclMemAlloc's unit here
};

} // namespace tensorc::cuda
