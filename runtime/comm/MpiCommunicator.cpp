// The communicator of processes launched by mpirun: Open MPI (Debian's
// libopenmpi, libmpi.so.40) opened with dlopen, so the runtime needs MPI
// only where a run uses it. Open MPI's handles (MPI_COMM_WORLD, MPI_FLOAT,
// MPI_SUM, ...) are the addresses of its predefined globals, found by name;
// other MPI implementations are refused with a clear error.
#include "runtime/comm/Communicator.h"

#include "ir/core/Error.h"
#include "runtime/host/DynamicLibrary.h"
#include "runtime/host/EnvSeconds.h"

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

namespace tensorc::runtime {

namespace {

using Handle = void *;

struct MpiApi {
  DynamicLibrary library;
  int (*Initialized)(int *);
  int (*Finalized)(int *);
  int (*Init_thread)(int *, char ***, int, int *);
  int (*Finalize)();
  int (*Comm_rank)(Handle, int *);
  int (*Comm_size)(Handle, int *);
  int (*Comm_split)(Handle, int, int, Handle *);
  int (*Allreduce)(const void *, void *, int, Handle, Handle, Handle);
  int (*Allgather)(const void *, int, Handle, void *, int, Handle, Handle);
  int (*Reduce_scatter_block)(const void *, void *, int, Handle, Handle, Handle);
  int (*Alltoall)(const void *, int, Handle, void *, int, Handle, Handle);
  int (*Bcast)(void *, int, Handle, int, Handle);
  Handle world, byte, f32, f64, i32, i64, sum, max, min;
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator() {
    std::string tried;
    mpi_.library = DynamicLibrary::open({"libmpi.so.40", "libmpi.so"}, /*global=*/true, tried);
    check(bool(mpi_.library), "MPI: cannot load Open MPI (tried " + tried + "): install libopenmpi3 (" +
                                  mpi_.library.error() + ")");
    DynamicLibrary &l = mpi_.library;
    l.bind(mpi_.Initialized, "MPI_Initialized");
    l.bind(mpi_.Finalized, "MPI_Finalized");
    l.bind(mpi_.Init_thread, "MPI_Init_thread");
    l.bind(mpi_.Finalize, "MPI_Finalize");
    l.bind(mpi_.Comm_rank, "MPI_Comm_rank");
    l.bind(mpi_.Comm_size, "MPI_Comm_size");
    l.bind(mpi_.Comm_split, "MPI_Comm_split");
    l.bind(mpi_.Allreduce, "MPI_Allreduce");
    l.bind(mpi_.Allgather, "MPI_Allgather");
    l.bind(mpi_.Reduce_scatter_block, "MPI_Reduce_scatter_block");
    l.bind(mpi_.Alltoall, "MPI_Alltoall");
    l.bind(mpi_.Bcast, "MPI_Bcast");
    auto global = [&](Handle &h, const char *name) { l.bind(h, name); };
    global(mpi_.world, "ompi_mpi_comm_world");
    global(mpi_.byte, "ompi_mpi_byte");
    global(mpi_.f32, "ompi_mpi_float");
    global(mpi_.f64, "ompi_mpi_double");
    global(mpi_.i32, "ompi_mpi_int32_t");
    global(mpi_.i64, "ompi_mpi_int64_t");
    global(mpi_.sum, "ompi_mpi_op_sum");
    global(mpi_.max, "ompi_mpi_op_max");
    global(mpi_.min, "ompi_mpi_op_min");
    check(l.missing().empty(), "MPI: the loaded library is not Open MPI (missing " + l.missing() + ")");
    int initialized = 0;
    mpi_.Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      call(mpi_.Init_thread(nullptr, nullptr, /*MPI_THREAD_SERIALIZED*/ 2, &provided), "MPI_Init_thread");
      ownsInit_ = true;
    }
    int rank = 0, size = 0;
    call(mpi_.Comm_rank(mpi_.world, &rank), "MPI_Comm_rank");
    call(mpi_.Comm_size(mpi_.world, &size), "MPI_Comm_size");
    rank_ = rank;
    size_ = size;
    if (std::optional<double> timeout = secondsFromEnvironment("TENSORC_MPI_TIMEOUT", "MPI"))
      timeoutS_ = *timeout;
    if (size_ > 1)
      watchdog_ = std::thread([this] { watch(); });
  }
  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(watchMutex_);
      stopping_ = true;
    }
    watchCv_.notify_all();
    if (watchdog_.joinable())
      watchdog_.join();
    int finalized = 1;
    if (ownsInit_ && mpi_.Finalized(&finalized) == 0 && !finalized)
      mpi_.Finalize();
  }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  const char *name() const override { return "MPI"; }

  void beginCollective(const std::string &what) override {
    std::lock_guard<std::mutex> lock(watchMutex_);
    current_ = what;
    since_ = std::chrono::steady_clock::now();
  }
  void endCollective() override {
    std::lock_guard<std::mutex> lock(watchMutex_);
    current_.clear();
  }

  void allReduce(const void *in, void *out, int64_t count, DType dtype, Reduction reduction,
                 const std::vector<int64_t> &group) override {
    call(mpi_.Allreduce(in, out, checkedCount(count, "all_reduce"), type(dtype), op(reduction), comm(group)),
         "MPI_Allreduce");
  }
  void allGather(const void *in, void *out, int64_t bytes, const std::vector<int64_t> &group) override {
    int n = checkedCount(bytes, "all_gather");
    call(mpi_.Allgather(in, n, mpi_.byte, out, n, mpi_.byte, comm(group)), "MPI_Allgather");
  }
  void reduceScatter(const void *in, void *out, int64_t count, DType dtype, Reduction reduction,
                     const std::vector<int64_t> &group) override {
    call(mpi_.Reduce_scatter_block(in, out, checkedCount(count, "reduce_scatter"), type(dtype), op(reduction),
                                   comm(group)),
         "MPI_Reduce_scatter_block");
  }
  void allToAll(const void *in, void *out, int64_t bytes, const std::vector<int64_t> &group) override {
    int n = checkedCount(bytes, "all_to_all");
    call(mpi_.Alltoall(in, n, mpi_.byte, out, n, mpi_.byte, comm(group)), "MPI_Alltoall");
  }
  void broadcast(void *buffer, int64_t bytes, int64_t root, const std::vector<int64_t> &group) override {
    call(mpi_.Bcast(buffer, checkedCount(bytes, "broadcast"), mpi_.byte, int(root), comm(group)), "MPI_Bcast");
  }

private:
  void call(int status, const char *what) const {
    check(status == 0, std::string("MPI: ") + what + " failed on rank " + std::to_string(rank_) +
                           " (error " + std::to_string(status) + ")");
  }
  static int checkedCount(int64_t n, const char *what) {
    check(n >= 0 && n <= INT_MAX, std::string("MPI: ") + what + " of more than 2^31 elements per member");
    return int(n);
  }
  Handle type(DType d) const {
    switch (d) {
    case DType::F32:
      return mpi_.f32;
    case DType::F64:
      return mpi_.f64;
    case DType::I32:
      return mpi_.i32;
    case DType::I64:
      return mpi_.i64;
    default:
      fail("MPI: no reduction of " + std::string(dtypeName(d)));
    }
  }
  Handle op(Reduction r) const {
    return r == Reduction::Max ? mpi_.max : r == Reduction::Min ? mpi_.min : mpi_.sum;
  }
  // The communicator of `group` (devices by rank). Every process reaches
  // the same collective steps in the same order, so each group's split
  // happens on every process at the same step: the world splits into the
  // groups of one (mesh, axes) at once.
  Handle comm(const std::vector<int64_t> &group) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = groups_.find(group);
    if (it != groups_.end())
      return it->second;
    int key = 0;
    for (size_t i = 0; i < group.size(); ++i)
      if (group[i] == rank_)
        key = int(i);
    int64_t color = *std::min_element(group.begin(), group.end());
    Handle sub = nullptr;
    call(mpi_.Comm_split(mpi_.world, int(color), key, &sub), "MPI_Comm_split");
    groups_.emplace(group, sub);
    return sub;
  }

  // The watchdog: a collective that lasts longer than timeoutS_ means a
  // rank died, hangs or runs another program. MPI's blocking calls cannot
  // be interrupted, so it names this rank and the step on stderr and ends
  // the process (mpirun then stops every rank) instead of a hang.
  void watch() {
    std::unique_lock<std::mutex> lock(watchMutex_);
    while (!stopping_) {
      watchCv_.wait_for(lock, std::chrono::milliseconds(100));
      if (current_.empty() ||
          std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count() <= timeoutS_)
        continue;
      std::fprintf(stderr,
                   "tensorc: MPI: rank %lld of %lld: %s did not finish in %g s ($TENSORC_MPI_TIMEOUT): another "
                   "rank failed, stopped or runs a different program; aborting the run\n",
                   (long long)rank_, (long long)size_, current_.c_str(), timeoutS_);
      std::fflush(stderr);
      // Not MPI_Abort: another thread is inside MPI (the library was
      // initialized MPI_THREAD_SERIALIZED). mpirun stops the job when a
      // process exits with a failure status before MPI_Finalize.
      std::_Exit(1);
    }
  }

  MpiApi mpi_{};
  bool ownsInit_ = false;
  double timeoutS_ = 600;
  std::thread watchdog_;
  std::mutex watchMutex_;
  std::condition_variable watchCv_;
  bool stopping_ = false;
  std::string current_; // the collective under way, or ""
  std::chrono::steady_clock::time_point since_;
  int64_t rank_ = 0, size_ = 1;
  std::mutex mutex_;
  std::map<std::vector<int64_t>, Handle> groups_;
};

} // namespace

std::shared_ptr<Communicator> makeMpiCommunicator() { return std::make_shared<MpiCommunicator>(); }

} // namespace tensorc::runtime
