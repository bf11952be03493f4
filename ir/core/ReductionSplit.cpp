#include "ir/core/ReductionSplit.h"

namespace tensorc {

size_t fullReductionKeptDims(const Shape &shape) {
  if (shape.size() < 2 || shape[0] == Dim::of(1))
    return 0;
  size_t lead = 1;
  int64_t partials = shape[0].isStatic() ? shape[0].value() : 1024;
  while (partials < 1024 && lead + 1 < shape.size()) {
    const Dim &d = shape[lead++];
    partials = d.isStatic() ? partials * d.value() : 1024;
  }
  return lead;
}

} // namespace tensorc
