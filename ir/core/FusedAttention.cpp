#include "ir/core/FusedAttention.h"

namespace tensorc {

std::string fusedAttentionRefusal(const std::vector<std::optional<TensorSpec>> &args, bool backward) {
  size_t first = backward ? 1 : 0;
  if (args.size() < first + 3)
    return "missing operands";
  if (args.size() > first + 3 && args[first + 3])
    return "a mask (the fused kernels take causal masking only)";
  for (size_t i = 0; i < first + 3; ++i)
    if (!args[i])
      return "missing operands";
  const TensorSpec &q = *args[first], &k = *args[first + 1], &v = *args[first + 2];
  if (q.dtype != DType::F16 && q.dtype != DType::BF16 && q.dtype != DType::F32)
    return "dtype " + std::string(dtypeName(q.dtype)) + " (the fused kernels take f16, bf16 and f32)";
  for (size_t i = 0; i < first + 3; ++i)
    if (args[i]->dtype != q.dtype || args[i]->rank() != q.rank())
      return "operands of different dtypes or ranks";
  if (q.rank() < 2)
    return "rank below 2";
  size_t r = size_t(q.rank());
  for (size_t d = 0; d + 2 < r; ++d)
    if (!(k.shape[d] == q.shape[d]) || !(v.shape[d] == q.shape[d]))
      return "broadcast batch dims";
  const Dim &e = q.shape[r - 1];
  if (!e.isStatic() || e.value() < 1 || e.value() > kFusedAttentionMaxHeadDim)
    return "head dim " + e.str() + " (the fused kernels take a static one up to 128)";
  if (!(k.shape[r - 1] == e) || !(v.shape[r - 1] == e))
    return "q, k and v of different head dims";
  if (!(v.shape[r - 2] == k.shape[r - 2]))
    return "k and v of different lengths";
  if (backward && !(args[0]->shape == q.shape))
    return "a cotangent of another shape";
  return "";
}

bool isFusedAttentionOp(const std::string &op) {
  return op == "scaled_dot_product_attention" || op == "scaled_dot_product_attention_with_lse" ||
         op == "scaled_dot_product_attention_backward";
}

int64_t fusedAttentionPaddedHeadDim(int64_t headDim) { return (headDim + 15) / 16 * 16; }

} // namespace tensorc
