// The CPU runtime's scatter-add step (artifact::Step::Kind::ScatterAdd,
// embedding_backward): out (numWeights, width) = the rows of grad
// (rows, width) summed at indices (rows), in index order (deterministic).
#pragma once

#include "ir/core/DType.h"

#include <cstdint>
#include <string>

namespace tensorc::runtime {

struct ScatterAddOperands {
  void *out;       // f32, or f64 for f64 grad
  DType outDtype;
  const void *grad; // any float dtype
  DType gradDtype;
  const void *indices; // i32 or i64
  DType indexDtype;
  int64_t rows, width, numWeights;
  int64_t skipIndex = -1; // rows at this index are left out (padding_idx)
};

// Throws Error naming `label` for an index outside [0, numWeights).
void scatterAdd(const ScatterAddOperands &op, const std::string &label);

} // namespace tensorc::runtime
