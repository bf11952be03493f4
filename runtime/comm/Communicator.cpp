#include "runtime/comm/Communicator.h"

#include "ir/core/Error.h"
#include "ir/core/Mesh.h"
#include "runtime/host/FloatBits.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tensorc::runtime {

std::shared_ptr<Communicator> makeMpiCommunicator(); // MpiCommunicator.cpp

namespace {

// A run of one device: every group is this process alone.
class SingleProcess final : public Communicator {
public:
  int64_t rank() const override { return 0; }
  int64_t size() const override { return 1; }
  const char *name() const override { return "one process"; }
  void allReduce(const void *in, void *out, int64_t count, DType dtype, Reduction,
                 const std::vector<int64_t> &) override {
    std::memmove(out, in, size_t(count) * dtypeSize(dtype));
  }
  void allGather(const void *in, void *out, int64_t bytes, const std::vector<int64_t> &) override {
    std::memmove(out, in, size_t(bytes));
  }
  void reduceScatter(const void *in, void *out, int64_t count, DType dtype, Reduction,
                     const std::vector<int64_t> &) override {
    std::memmove(out, in, size_t(count) * dtypeSize(dtype));
  }
  void allToAll(const void *in, void *out, int64_t bytes, const std::vector<int64_t> &) override {
    std::memmove(out, in, size_t(bytes));
  }
  void broadcast(void *, int64_t, int64_t, const std::vector<int64_t> &) override {}
};

bool underMpi() {
  const char *size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size && std::atoll(size) >= 1;
}

// 16-bit floats travel as f32 (MPI and the sums have no 16-bit types).
std::vector<float> widen(const void *p, int64_t n, DType dtype) {
  std::vector<float> out(static_cast<size_t>(n));
  const uint16_t *bits = static_cast<const uint16_t *>(p);
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = float(dtype == DType::F16 ? halfBitsToDouble(bits[i]) : bfloat16BitsToDouble(bits[i]));
  return out;
}
void narrow(const std::vector<float> &v, void *p, DType dtype) {
  uint16_t *bits = static_cast<uint16_t *>(p);
  for (size_t i = 0; i < v.size(); ++i)
    bits[i] = dtype == DType::F16 ? doubleToHalfBits(v[i]) : doubleToBFloat16Bits(v[i]);
}

template <typename T> void divide(void *p, int64_t n, int64_t by) {
  T *v = static_cast<T *>(p);
  for (int64_t i = 0; i < n; ++i)
    v[i] = T(v[i] / T(by));
}

} // namespace

std::shared_ptr<Communicator> processCommunicator() {
  static std::mutex mutex;
  static std::shared_ptr<Communicator> comm;
  std::lock_guard<std::mutex> lock(mutex);
  if (!comm)
    comm = underMpi() ? makeMpiCommunicator() : std::make_shared<SingleProcess>();
  return comm;
}

void runHostCollective(Communicator &comm, const artifact::CollectiveStep &step, DType dtype, void *out,
                       const void *in, int64_t inElements, int64_t outElements, const std::string &what) {
  struct Watched {
    Communicator &comm;
    Watched(Communicator &c, const std::string &what) : comm(c) { comm.beginCollective(what); }
    ~Watched() { comm.endCollective(); }
  } watched(comm, what);
  using Op = artifact::CollectiveStep::Op;
  using Reduction = artifact::CollectiveStep::Reduction;
  Mesh mesh{step.mesh, step.meshAxes, step.meshSizes};
  check(comm.size() == mesh.numDevices(),
        "collective " + std::string(artifact::CollectiveStep::opName(step.op)) + ": the artifact's mesh \"" +
            mesh.name + "\" has " + std::to_string(mesh.numDevices()) + " devices but this run has " +
            std::to_string(comm.size()) + " (" + comm.name() + "); launch it with mpirun -np " +
            std::to_string(mesh.numDevices()));
  DeviceGroups groups(mesh, step.axes);
  int64_t me = comm.rank(), r = groups.rankOf(me), G = groups.groupSize();
  std::vector<int64_t> group = groups.groupOf(me);
  size_t elementBytes = dtypeSize(dtype);
  switch (step.op) {
  case Op::AxisIndex:
    *static_cast<int64_t *>(out) = r;
    return;
  case Op::AllSlice: {
    size_t chunk = size_t(outElements) * elementBytes;
    std::memmove(out, static_cast<const char *>(in) + size_t(r) * chunk, chunk);
    return;
  }
  case Op::Broadcast:
    std::memmove(out, in, size_t(inElements) * elementBytes);
    comm.broadcast(out, int64_t(size_t(inElements) * elementBytes), step.root, group);
    return;
  case Op::AllGather:
    comm.allGather(in, out, int64_t(size_t(inElements) * elementBytes), group);
    return;
  case Op::AllToAll:
    comm.allToAll(in, out, int64_t(size_t(inElements) * elementBytes) / G, group);
    return;
  case Op::AllReduce:
  case Op::ReduceScatter: {
    Reduction reduction = step.reduction == Reduction::Mean ? Reduction::Sum : step.reduction;
    bool scatter = step.op == Op::ReduceScatter;
    auto reduce = [&](const void *src, void *dst, DType d) {
      if (scatter)
        comm.reduceScatter(src, dst, outElements, d, reduction, group);
      else
        comm.allReduce(src, dst, outElements, d, reduction, group);
    };
    bool halfWidth = dtype == DType::F16 || dtype == DType::BF16;
    if (halfWidth) {
      std::vector<float> wideIn = widen(in, inElements, dtype), wideOut(static_cast<size_t>(outElements));
      reduce(wideIn.data(), wideOut.data(), DType::F32);
      if (step.reduction == Reduction::Mean)
        for (float &v : wideOut)
          v /= float(G);
      narrow(wideOut, out, dtype);
      return;
    }
    reduce(in, out, dtype);
    if (step.reduction == Reduction::Mean) {
      if (dtype == DType::F32)
        divide<float>(out, outElements, G);
      else
        divide<double>(out, outElements, G);
    }
    return;
  }
  }
}

} // namespace tensorc::runtime
