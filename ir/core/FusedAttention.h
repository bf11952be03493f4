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

// Why attention with these operand types (forward: q, k, v, mask, seed;
// backward: the cotangent, q, k, v, mask, out, lse, seed; absent operands
// nullopt) cannot run
// fused, or "" when it can: f16/bf16/f32 operands of one dtype, equal batch
// dims, one static head dim <= 128 shared by q, k and v; a mask, if any,
// bool or of q's dtype, that the kernels can index
// (attentionMaskLayoutRefusal).
std::string fusedAttentionRefusal(const std::vector<std::optional<TensorSpec>> &args, bool backward);

// The kernels index a user mask broadcast to the scores' shape
// [batch..., L, S] with the batch entries (flattened) split as (outer,
// head), heads = the last batch dim: value (o, h, r, c) is at
// o * outer + h * inner + r * row + c * col of the contiguous mask
// (strides in values; 0 where the mask broadcasts).
struct AttentionMaskLayout {
  int64_t heads = 1, outer = 0, inner = 0, row = 0, col = 0;
};

// Why a contiguous mask of shape `mask` cannot be indexed that way over
// scores of shape `scores` ([batch..., L, S]): it does not broadcast to
// them, or it broadcasts along some of the batch dims before the last but
// not along others (no single outer stride); "" when it can.
std::string attentionMaskLayoutRefusal(const Shape &mask, const Shape &scores);

// The layout of a contiguous mask of these (concrete) dims over scores of
// these dims, or nullopt (with `why`) where attentionMaskLayoutRefusal
// refuses it.
std::optional<AttentionMaskLayout> attentionMaskLayout(const std::vector<int64_t> &mask,
                                                       const std::vector<int64_t> &scores, std::string &why);

// scaled_dot_product_attention, its _with_lse form and its _backward: the
// ops the fused kernels run.
bool isFusedAttentionOp(const std::string &op);

// The head dim the kernels are instantiated for: the next multiple of 16.
int64_t fusedAttentionPaddedHeadDim(int64_t headDim);

} // namespace tensorc
