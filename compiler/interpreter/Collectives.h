// The interpreter's collectives. Internal to compiler/interpreter.
#pragma once

#include "compiler/interpreter/Kernels.h"
#include "ir/core/Mesh.h"

namespace tensorc::interp {

struct CollectiveCall {
  const TypedNode &node;
  const Mesh &mesh;
  std::vector<const HostTensor *> x; // per device; empty for axis_index
  std::vector<int64_t> resultShape;
  DType resultDType;
};

// Every device's result, by device index.
std::vector<HostTensor> runCollective(const CollectiveCall &call);

} // namespace tensorc::interp
