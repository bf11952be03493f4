// Mixed precision (autocast): runs matmul, conv2d and attention in a low
// precision dtype (bf16 or f16; backends accumulate in f32), keeps
// numerically sensitive ops (reductions, softmax, norms, losses, exp/log/pow)
// in f32, and promotes mixed-dtype operands of everything else to the widest,
// inserting the casts. The policy table is docs/autocast.md.
#pragma once

#include "compiler/graph/Graph.h"

namespace tensorc::transforms {

enum class AutocastPolicy { LowPrecision, Float32, Promote };
AutocastPolicy autocastPolicy(const std::string &op);

// `lowDType` is BF16 or F16. Only f32 values are lowered; f64 stays f64. The
// graph's outputs keep their dtypes (cast back where needed), so callers see
// the same signature.
Graph autocastGraph(const Graph &graph, DType lowDType);

} // namespace tensorc::transforms
