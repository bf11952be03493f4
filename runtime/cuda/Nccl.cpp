#include "runtime/cuda/Nccl.h"

#include "ir/core/Error.h"
#include "ir/core/Mesh.h"
#include "runtime/host/DynamicLibrary.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <glob.h>
#include <thread>

namespace tensorc::cuda {

// NCCL's C API, as nccl.h (2.18+) declares it.
struct NcclUniqueId {
  char internal[128];
};
enum NcclType { kInt32 = 2, kInt64 = 4, kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9 };
enum NcclOp { kSum = 0, kMax = 2, kMin = 3, kAvg = 4 };

struct NcclApi {
  DynamicLibrary library;
  int (*GetUniqueId)(NcclUniqueId *);
  int (*CommInitRank)(void **, int, NcclUniqueId, int);
  int (*CommSplit)(void *, int, int, void **, void *);
  int (*CommDestroy)(void *);
  int (*AllReduce)(const void *, void *, size_t, int, int, void *, void *);
  int (*AllGather)(const void *, void *, size_t, int, void *, void *);
  int (*ReduceScatter)(const void *, void *, size_t, int, int, void *, void *);
  int (*Broadcast)(const void *, void *, size_t, int, int, void *, void *);
  int (*Send)(const void *, size_t, int, int, void *, void *);
  int (*Recv)(void *, size_t, int, int, void *, void *);
  int (*GroupStart)();
  int (*GroupEnd)();
  const char *(*GetErrorString)(int);
  int (*CommGetAsyncError)(void *, int *);
  int (*CommAbort)(void *);
  int (*GetVersion)(int *);
  // Symmetric memory (2.27+; null where the library lacks it).
  int (*MemAlloc)(void **, size_t);
  int (*MemFree)(void *);
  int (*CommWindowRegister)(void *, void *, size_t, void **, int);
  int (*CommWindowDeregister)(void *, void *);
};

namespace {

std::vector<std::string> ncclCandidates() {
  std::vector<std::string> out;
  if (const char *lib = std::getenv("TENSORC_NCCL_LIB"); lib && *lib)
    out.push_back(lib);
  out.push_back("libnccl.so.2");
  std::vector<std::string> patterns = {"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                                       "/usr/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                                       "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"};
  for (const char *env : {"VIRTUAL_ENV", "CONDA_PREFIX", "HOME"})
    if (const char *root = std::getenv(env); root && *root)
      patterns.push_back(std::string(root) + (std::string(env) == "HOME" ? "/.local" : "") +
                         "/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
  for (const std::string &p : patterns) {
    glob_t g{};
    if (::glob(p.c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        out.push_back(g.gl_pathv[i]);
    ::globfree(&g);
  }
  return out;
}

int64_t envInt(const char *name) {
  const char *v = std::getenv(name);
  check(v && *v, std::string("NCCL: ") + name +
                     " is not set; a CUDA artifact with collectives runs one process per GPU: start it "
                     "with `tensorc launch --nproc N -- tensorc run MODEL.tcx ...`");
  return std::atoll(v);
}

std::string hex(const NcclUniqueId &id) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : id.internal) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

NcclUniqueId unhex(const std::string &s) {
  NcclUniqueId id{};
  check(s.size() == 2 * sizeof id.internal, "NCCL: a malformed unique id in the rendezvous file");
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = char(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return id;
}

int typeOf(DType d) {
  switch (d) {
  case DType::F32:
    return kFloat32;
  case DType::F64:
    return kFloat64;
  case DType::F16:
    return kFloat16;
  case DType::BF16:
    return kBfloat16;
  case DType::I32:
    return kInt32;
  case DType::I64:
    return kInt64;
  default:
    fail("NCCL: no reduction of " + std::string(dtypeName(d)));
  }
}

} // namespace

Nccl &Nccl::process() {
  static std::mutex mutex;
  static std::unique_ptr<Nccl> nccl;
  std::lock_guard<std::mutex> lock(mutex);
  if (!nccl)
    nccl.reset(new Nccl());
  return *nccl;
}

Nccl::Nccl() : api_(std::make_unique<NcclApi>()) {
  rank_ = envInt("RANK");
  size_ = envInt("WORLD_SIZE");
  const char *rendezvous = std::getenv("TENSORC_RENDEZVOUS");
  check(rendezvous && *rendezvous, "NCCL: TENSORC_RENDEZVOUS is not set; start the processes with "
                                   "`tensorc launch --nproc N -- ...`");
  std::string tried;
  api_->library = DynamicLibrary::open(ncclCandidates(), /*global=*/false, tried);
  check(bool(api_->library), "NCCL: cannot load libnccl.so.2 (tried " + tried + ")");
  DynamicLibrary &l = api_->library;
  l.bind(api_->GetUniqueId, "ncclGetUniqueId");
  l.bind(api_->CommInitRank, "ncclCommInitRank");
  l.bind(api_->CommSplit, "ncclCommSplit");
  l.bind(api_->CommDestroy, "ncclCommDestroy");
  l.bind(api_->AllReduce, "ncclAllReduce");
  l.bind(api_->AllGather, "ncclAllGather");
  l.bind(api_->ReduceScatter, "ncclReduceScatter");
  l.bind(api_->Broadcast, "ncclBroadcast");
  l.bind(api_->Send, "ncclSend");
  l.bind(api_->Recv, "ncclRecv");
  l.bind(api_->GroupStart, "ncclGroupStart");
  l.bind(api_->GroupEnd, "ncclGroupEnd");
  l.bind(api_->GetErrorString, "ncclGetErrorString");
  l.bind(api_->CommGetAsyncError, "ncclCommGetAsyncError");
  l.bind(api_->CommAbort, "ncclCommAbort");
  check(l.missing().empty(), "NCCL: libnccl.so.2 lacks " + l.missing() + " (NCCL 2.18 or newer is needed)");
  // Optional: symmetric memory windows (NCCL 2.27 has the symmetric kernels).
  l.bind(api_->GetVersion, "ncclGetVersion");
  l.bind(api_->MemAlloc, "ncclMemAlloc");
  l.bind(api_->MemFree, "ncclMemFree");
  l.bind(api_->CommWindowRegister, "ncclCommWindowRegister");
  l.bind(api_->CommWindowDeregister, "ncclCommWindowDeregister");
  if (api_->GetVersion)
    api_->GetVersion(&version_);
  const char *windows = std::getenv("TENSORC_NCCL_WINDOWS");
  windows_ = version_ >= 22700 && api_->MemAlloc && api_->MemFree && api_->CommWindowRegister &&
             api_->CommWindowDeregister && !(windows && std::string(windows) == "0");
  std::filesystem::path file = std::filesystem::path(rendezvous) / "nccl-id";
  NcclUniqueId id{};
  if (rank_ == 0) {
    check(api_->GetUniqueId(&id) == 0, "NCCL: ncclGetUniqueId failed");
    std::filesystem::path tmp = file;
    tmp += ".tmp";
    std::ofstream(tmp) << hex(id);
    std::filesystem::rename(tmp, file); // atomic: the others never read half of it
  } else {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!std::filesystem::exists(file)) {
      check(std::chrono::steady_clock::now() < deadline,
            "NCCL: rank " + std::to_string(rank_) + " waited 120 s for rank 0's unique id in " + file.string() +
                " (rank 0 did not start or failed)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string text;
    std::ifstream(file) >> text;
    id = unhex(text);
  }
  int status = api_->CommInitRank(&world_, int(size_), id, int(rank_));
  check(status == 0, "NCCL: ncclCommInitRank failed on rank " + std::to_string(rank_) + ": " +
                         api_->GetErrorString(status));
}

Nccl::~Nccl() {
  // Communicators are left to the process's exit: destroying them needs the
  // other ranks at the same point, which an exiting process cannot promise.
}

void Nccl::prepare(const artifact::CollectiveStep &step) {
  Mesh mesh{step.mesh, step.meshAxes, step.meshSizes};
  if (size_ != mesh.numDevices() || step.op == artifact::CollectiveStep::Op::AxisIndex ||
      step.op == artifact::CollectiveStep::Op::AllSlice)
    return; // run() names a wrong device count; copies need no communicator
  group(DeviceGroups(mesh, step.axes).groupOf(rank_));
}

void Nccl::groupStart() {
  int status = api_->GroupStart();
  check(status == 0, "NCCL: ncclGroupStart failed on rank " + std::to_string(rank_) + ": " +
                         api_->GetErrorString(status));
}

void Nccl::groupEnd() {
  int status = api_->GroupEnd();
  check(status == 0, "NCCL: ncclGroupEnd failed on rank " + std::to_string(rank_) + ": " +
                         api_->GetErrorString(status));
}

std::string Nccl::asyncError() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<void *> comms = {world_};
  for (auto &[devices, comm] : groups_)
    comms.push_back(comm);
  for (void *comm : comms) {
    int error = 0;
    if (comm && api_->CommGetAsyncError(comm, &error) == 0 && error != 0 && error != 7) // 7: ncclInProgress
      return api_->GetErrorString(error);
  }
  return "";
}

bool Nccl::abortWithin(double seconds) {
  std::vector<void *> comms;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &[devices, comm] : groups_)
      comms.push_back(comm);
    groups_.clear();
    if (world_)
      comms.push_back(world_);
    world_ = nullptr; // later collectives are refused, windows not deregistered
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  int (*commAbort)(void *) = api_->CommAbort;
  std::thread([commAbort, comms, finished] {
    for (void *comm : comms)
      commAbort(comm);
    *finished = true;
  }).detach();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!*finished && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return *finished;
}

// NCCL_WIN_COLL_SYMMETRIC: every rank's buffer of a collective lies at the
// same offset of its window (SPMD ranks bind the same plan).
constexpr int kWindowCollSymmetric = 1;

DevicePtr Nccl::allocateWindow(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocateWindowLocked(bytes);
}

DevicePtr Nccl::allocateShared(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  constexpr size_t kAlignment = 256;
  bytes = std::max<size_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
  if (bytes > kWindowGranularity)
    return allocateWindowLocked(bytes);
  for (auto &[start, ranges] : shared_)
    if (std::optional<size_t> offset = ranges.take(bytes))
      return start + DevicePtr(*offset);
  DevicePtr start = allocateWindowLocked(kWindowGranularity);
  if (!start)
    return 0;
  auto it = shared_.emplace(start, FirstFitRanges(kWindowGranularity)).first;
  return start + DevicePtr(*it->second.take(bytes));
}

DevicePtr Nccl::allocateWindowLocked(size_t bytes) {
  if (!windows_ || !world_)
    return 0;
  bytes = std::max<size_t>(1, (bytes + kWindowGranularity - 1) / kWindowGranularity) * kWindowGranularity;
  // Where NCCL cannot give windows here (no NVLink or P2P between the
  // GPUs, a driver without virtual memory management) every rank fails
  // alike: windows are off for the process and memory is plain.
  void *p = nullptr;
  if (api_->MemAlloc(&p, bytes) != 0) {
    windows_ = false;
    return 0;
  }
  // Registration is collective over each communicator: every rank walks
  // them in one global order (the world, then groups by device list), so
  // no two ranks wait on each other crosswise.
  std::vector<std::pair<void *, void *>> handles;
  auto enroll = [&](void *comm) {
    void *window = nullptr;
    if (api_->CommWindowRegister(comm, p, bytes, &window, kWindowCollSymmetric) != 0)
      return false;
    handles.push_back({comm, window});
    return true;
  };
  bool enrolled = enroll(world_);
  for (auto it = groups_.begin(); enrolled && it != groups_.end(); ++it)
    enrolled = enroll(it->second);
  if (!enrolled) {
    release(p, handles);
    windows_ = false;
    return 0;
  }
  DevicePtr d = reinterpret_cast<DevicePtr>(p);
  windowsByStart_[d] = {bytes, std::move(handles)};
  return d;
}

void Nccl::release(void *memory, const std::vector<std::pair<void *, void *>> &registrations) {
  for (const auto &[comm, window] : registrations)
    api_->CommWindowDeregister(comm, window);
  api_->MemFree(memory);
}

bool Nccl::freeWindow(DevicePtr p) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A shared window's buffer: its range goes back to the window (merged
  // with free neighbours); the window stays for later buffers.
  auto shared = shared_.upper_bound(p);
  if (shared != shared_.begin() && p < std::prev(shared)->first + kWindowGranularity) {
    --shared;
    // As cuMemFree does: queued work may still use the buffer, and the
    // next allocation may hand its bytes out again at once.
    Driver::get().synchronize();
    shared->second.give(size_t(p - shared->first));
    return true;
  }
  auto it = windowsByStart_.find(p);
  if (it == windowsByStart_.end())
    return false;
  // After an abort the communicators are gone, and deregistering waits for
  // every rank: then the memory stays with the process.
  if (world_)
    release(reinterpret_cast<void *>(p), it->second.handles);
  windowsByStart_.erase(it);
  return true;
}

bool Nccl::inWindow(DevicePtr p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = windowsByStart_.upper_bound(p);
  if (it == windowsByStart_.begin())
    return false;
  --it;
  return p < it->first + it->second.bytes;
}

void *Nccl::group(const std::vector<int64_t> &devices) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool everyDeviceInOrder = devices.size() == size_t(size_);
  for (size_t i = 0; i < devices.size() && everyDeviceInOrder; ++i)
    everyDeviceInOrder = devices[i] == int64_t(i);
  if (everyDeviceInOrder)
    return world_;
  auto it = groups_.find(devices);
  if (it != groups_.end())
    return it->second;
  int key = 0;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == rank_)
      key = int(i);
  int color = int(*std::min_element(devices.begin(), devices.end()));
  void *comm = nullptr;
  int status = api_->CommSplit(world_, color, key, &comm, nullptr);
  check(status == 0, "NCCL: ncclCommSplit failed on rank " + std::to_string(rank_) + ": " +
                         api_->GetErrorString(status));
  groups_.emplace(devices, comm);
  return comm;
}

void Nccl::run(const artifact::CollectiveStep &step, DType dtype, DevicePtr out, DevicePtr in, int64_t inElements,
               int64_t outElements, const Driver &driver, Stream stream) {
  using Op = artifact::CollectiveStep::Op;
  using Reduction = artifact::CollectiveStep::Reduction;
  Mesh mesh{step.mesh, step.meshAxes, step.meshSizes};
  check(size_ == mesh.numDevices(),
        "collective " + std::string(artifact::CollectiveStep::opName(step.op)) + ": the artifact's mesh \"" +
            mesh.name + "\" has " + std::to_string(mesh.numDevices()) + " devices but this run has " +
            std::to_string(size_) + "; launch it with tensorc launch --nproc " + std::to_string(mesh.numDevices()));
  DeviceGroups groups(mesh, step.axes);
  int64_t r = groups.rankOf(rank_), G = groups.groupSize();
  std::vector<int64_t> members = groups.groupOf(rank_);
  size_t elementBytes = dtypeSize(dtype);
  auto ok = [&](int status, const char *what) {
    check(status == 0, std::string("NCCL: ") + what + " failed on rank " + std::to_string(rank_) + ": " +
                           api_->GetErrorString(status));
  };
  if (step.op == Op::AxisIndex) {
    // The rank as an i64, from host memory that outlives the copy.
    static thread_local int64_t value;
    value = r;
    driver.copyToDevice(out, &value, sizeof value, stream);
    driver.synchronize(stream);
    return;
  }
  if (step.op == Op::AllSlice) {
    size_t chunk = size_t(outElements) * elementBytes;
    driver.copyOnDevice(out, in + DevicePtr(size_t(r) * chunk), chunk, stream);
    return;
  }
  check(world_, "NCCL: rank " + std::to_string(rank_) + ": the communicators were aborted after an earlier "
                "collective failed or timed out");
  void *comm = group(members); // a group of one is NCCL's too (a copy)
  // Groups in rank order: NCCL ranks of a split communicator follow `key`.
  int op = step.reduction == Reduction::Sum ? kSum : step.reduction == Reduction::Mean ? kAvg
           : step.reduction == Reduction::Max ? kMax : kMin;
  void *src = reinterpret_cast<void *>(in), *dst = reinterpret_cast<void *>(out);
  switch (step.op) {
  case Op::AllReduce:
    ok(api_->AllReduce(src, dst, size_t(outElements), typeOf(dtype), op, comm, stream), "ncclAllReduce");
    return;
  case Op::ReduceScatter:
    ok(api_->ReduceScatter(src, dst, size_t(outElements), typeOf(dtype), op, comm, stream), "ncclReduceScatter");
    return;
  case Op::AllGather:
    ok(api_->AllGather(src, dst, size_t(inElements) * elementBytes, /*ncclUint8*/ 1, comm, stream), "ncclAllGather");
    return;
  case Op::Broadcast:
    ok(api_->Broadcast(src, dst, size_t(inElements) * elementBytes, 1, int(step.root), comm, stream), "ncclBroadcast");
    return;
  case Op::AllToAll: {
    size_t chunk = size_t(inElements) * elementBytes / size_t(G);
    ok(api_->GroupStart(), "ncclGroupStart");
    for (int64_t peer = 0; peer < G; ++peer) {
      ok(api_->Send(reinterpret_cast<const char *>(src) + size_t(peer) * chunk, chunk, 1, int(peer), comm, stream),
         "ncclSend");
      ok(api_->Recv(reinterpret_cast<char *>(dst) + size_t(peer) * chunk, chunk, 1, int(peer), comm, stream),
         "ncclRecv");
    }
    ok(api_->GroupEnd(), "ncclGroupEnd");
    return;
  }
  default:
    fail("NCCL: unknown collective");
  }
}

} // namespace tensorc::cuda
