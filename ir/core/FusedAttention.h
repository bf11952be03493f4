// When scaled_dot_product_attention (and its backward) runs as the CUDA
// backend's fused attention kernels (codegen/cuda/kernels/Attention.cuh)
// instead of being decomposed into matmuls and a softmax: the compiler's
// decomposition and the program builder ask the same question here.
#pragma once

#include "ir/core/Dim.h"

#include <optional>
#include <string>
#include <vector>

namespace tensorc {

// The largest head dim the fused kernels take.
inline constexpr int64_t kFusedAttentionMaxHeadDim = 128;

// Why attention with these operand types (forward: q, k, v, mask;
// backward: the cotangent, then those; absent operands nullopt) cannot run
// fused, or "" when it can: f16/bf16/f32 operands of one dtype, no mask, equal
// batch dims, one static head dim <= 128 shared by q, k and v.
std::string fusedAttentionRefusal(const std::vector<std::optional<TensorSpec>> &args, bool backward);

// scaled_dot_product_attention, its _with_lse form and its _backward: the
// ops the fused kernels run.
bool isFusedAttentionOp(const std::string &op);

// The head dim the kernels are instantiated for: the next multiple of 16.
int64_t fusedAttentionPaddedHeadDim(int64_t headDim);

} // namespace tensorc
