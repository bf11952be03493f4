// The interpreter's per-op kernels. Internal to compiler/interpreter.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "runtime/host/HostTensor.h"

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tensorc::interp {

struct OpCall {
  const TypedNode &node;
  std::vector<const HostTensor *> args; // nullptr for an absent optional
  std::vector<std::vector<int64_t>> resultShapes;
  std::vector<DType> resultDTypes;

  const HostTensor &arg(size_t i) const { return *args[i]; }
  bool has(size_t i) const { return i < args.size() && args[i] != nullptr; }
  const AttrMap &attrs() const { return node.attrs; }
  HostTensor result(size_t i = 0) const { return HostTensor(resultDTypes[i], resultShapes[i]); }
};

using Kernel = std::function<std::vector<HostTensor>(const OpCall &)>;
using KernelTable = std::unordered_map<std::string, Kernel>;

void addElementwiseKernels(KernelTable &table);
void addReductionKernels(KernelTable &table);
void addLinalgKernels(KernelTable &table);
void addNNKernels(KernelTable &table);
void addShapeKernels(KernelTable &table);
void addCreationKernels(KernelTable &table);

// Helpers shared by the kernel files.
std::vector<int64_t> unravel(int64_t linear, const std::vector<int64_t> &shape);
// Offset into a tensor of `shape` broadcast to the (right-aligned) coords.
int64_t broadcastOffset(const std::vector<int64_t> &coords, const std::vector<int64_t> &shape);
int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end);

} // namespace tensorc::interp
