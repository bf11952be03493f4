// The interpreter's per-op kernels. Internal to compiler/interpreter.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Indexing.h"
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

// Index helpers shared by the kernel files (and the runtime).
using tensorc::broadcastOffset;
using tensorc::product;
using tensorc::unravel;

} // namespace tensorc::interp
