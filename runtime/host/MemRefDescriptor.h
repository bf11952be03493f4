// The calling convention of generated CPU kernels: each tensor argument is a
// pointer to a memref descriptor laid out as MLIR's LLVM lowering expects,
// {allocated, aligned, offset, sizes[rank], strides[rank]}, eight bytes each
// (the `_mlir_ciface_` interface). Header-only; the runtime builds these.
#pragma once

#include "runtime/host/HostTensor.h"

#include <cstdint>
#include <vector>

namespace tensorc {

// A row-major descriptor of `t` (its storage must outlive the descriptor).
inline std::vector<int64_t> memrefDescriptor(HostTensor &t) {
  int64_t base = int64_t(reinterpret_cast<intptr_t>(t.data()));
  std::vector<int64_t> d = {base, base, 0};
  for (int64_t s : t.shape())
    d.push_back(s);
  for (int64_t s : rowMajorStrides(t.shape()))
    d.push_back(s);
  return d;
}

} // namespace tensorc
