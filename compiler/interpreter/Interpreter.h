// The reference interpreter: evaluates a graph op by op on the host in plain,
// obviously correct C++ (f64/i64 accumulation, one rounding per op). It is the
// oracle every pass, backend and gradient is tested against, so it is never
// optimized.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "runtime/host/HostTensor.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace tensorc {

struct InterpreterResult {
  std::vector<HostTensor> outputs;         // in the graph's output order
  std::map<std::string, int64_t> bindings; // symbol -> size, from the inputs
};

// Binds every symbolic dim from the inputs' shapes (checking static dims,
// compound dims and bounds), then runs every node. Throws Error naming the
// input or node at fault.
InterpreterResult interpret(const Graph &graph, const GraphAnalysis &analysis,
                            const std::map<std::string, HostTensor> &inputs);

// Runs `graph` as an SPMD program on simulated devices: every device runs
// every node on its own values, in lockstep, and a collective exchanges
// values among its group as docs/sharding.md defines. `inputs` holds one
// map per device; a collective's mesh must have exactly that many devices.
// interpret() is this on one device.
std::vector<InterpreterResult>
interpretSpmd(const Graph &graph, const GraphAnalysis &analysis,
              const std::vector<std::map<std::string, HostTensor>> &inputs);
// The device count of the graph's meshes (they must agree); 1 without meshes.
int64_t spmdDevices(const Graph &graph);

// Concrete sizes of `shape` under `bindings`; throws if a symbol is unbound.
std::vector<int64_t> concreteShape(const Shape &shape,
                                   const std::map<std::string, int64_t> &bindings);

// Whether the interpreter has a kernel for `op` (for `tensorc ops`).
bool interpreterSupports(const std::string &op);

// Philox4x32-10 (Salmon et al., SC'11), the counter-based generator of dropout.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

} // namespace tensorc
