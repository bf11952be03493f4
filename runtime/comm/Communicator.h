// The processes of an SPMD run, one per device of the artifact's mesh: the
// runtime runs collective steps (artifact::CollectiveStep) through this.
// Device-agnostic; the CPU backend passes host buffers. Implementations: one
// process (a mesh of one device), MPI (MpiCommunicator.cpp: Debian's
// OpenMPI, loaded with dlopen, when the program runs under mpirun).
#pragma once

#include "ir/core/DType.h"
#include "runtime/artifact/Artifact.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tensorc::runtime {

class Communicator {
public:
  using Reduction = artifact::CollectiveStep::Reduction;
  virtual ~Communicator() = default;
  virtual int64_t rank() const = 0; // this process's device index in the mesh
  virtual int64_t size() const = 0; // devices (processes) in the run
  virtual const char *name() const = 0;

  // `group`: the device indices of this process's group, by rank in the
  // group (this process among them). Every member calls with the same
  // sizes. Sum, max and min of f32, f64, i32 and i64 (the caller widens
  // 16-bit floats); `count` elements per member.
  virtual void allReduce(const void *in, void *out, int64_t count, DType dtype, Reduction reduction,
                         const std::vector<int64_t> &group) = 0;
  // Every member's `bytes` concatenated by rank.
  virtual void allGather(const void *in, void *out, int64_t bytes, const std::vector<int64_t> &group) = 0;
  // The reduction of every member's `in` (G chunks of `count`), chunk r to rank r.
  virtual void reduceScatter(const void *in, void *out, int64_t count, DType dtype, Reduction reduction,
                             const std::vector<int64_t> &group) = 0;
  // Chunk r (of `bytes`) of every member's `in` to rank r, stacked by sender.
  virtual void allToAll(const void *in, void *out, int64_t bytes, const std::vector<int64_t> &group) = 0;
  // `bytes` of the member of rank `root` into every member's `buffer`.
  virtual void broadcast(void *buffer, int64_t bytes, int64_t root, const std::vector<int64_t> &group) = 0;

  // Around each collective step (`what` names it): a communicator whose
  // collectives can wait for other processes ends the run when one lasts
  // too long, naming this rank and `what` (MPI: $TENSORC_MPI_TIMEOUT).
  virtual void beginCollective(const std::string &what) { (void)what; }
  virtual void endCollective() {}
};

// The communicator of this process: MPI when it runs under mpirun (the
// launcher sets OMPI_COMM_WORLD_SIZE), else a run of one device. Created
// once per process; throws Error when MPI is needed and cannot be loaded.
std::shared_ptr<Communicator> processCommunicator();

// Runs one collective step on host memory: `out` and `in` the step's
// operands, `elements` the elements of `in` (of `out` for axis_index);
// `what` names the step (for timeouts).
void runHostCollective(Communicator &comm, const artifact::CollectiveStep &step, DType dtype,
                       void *out, const void *in, int64_t inElements, int64_t outElements,
                       const std::string &what);

} // namespace tensorc::runtime
