#include "ir/core/FusedAttention.h"

namespace tensorc {

std::string fusedAttentionRefusal(const std::vector<std::optional<TensorSpec>> &args, bool backward) {
  size_t first = backward ? 1 : 0;
  if (args.size() < first + 3)
    return "missing operands";
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
  // The seed operand (forward: 4, backward: 7): dropout on the
  // probabilities, which the 16-bit kernels apply.
  size_t seedAt = backward ? 7 : 4;
  if (args.size() > seedAt && args[seedAt]) {
    if (q.dtype == DType::F32)
      return "dropout on f32 probabilities (the fused kernels apply it to f16 and bf16)";
    if (args[seedAt]->dtype != DType::I64 || args[seedAt]->rank() != 0)
      return "a dropout seed that is not an i64 scalar";
  }
  if (args.size() > first + 3 && args[first + 3]) {
    const TensorSpec &mask = *args[first + 3];
    if (mask.dtype != DType::I1 && mask.dtype != q.dtype)
      return "a mask of dtype " + std::string(dtypeName(mask.dtype)) + " (bool or the operands' dtype)";
    Shape scores(q.shape.begin(), q.shape.end() - 1);
    scores.push_back(k.shape[r - 2]);
    std::string why = attentionMaskLayoutRefusal(mask.shape, scores);
    if (!why.empty())
      return why;
  }
  return "";
}

namespace {

bool isOne(const Dim &d) { return d.isStatic() && d.value() == 1; }

} // namespace

std::string attentionMaskLayoutRefusal(const Shape &mask, const Shape &scores) {
  const size_t r = scores.size();
  if (mask.size() > r)
    return "a mask of rank " + std::to_string(mask.size()) + " over scores of rank " + std::to_string(r);
  const size_t pad = r - mask.size();
  // Along the batch dims before the last (those that are not 1): does the
  // mask broadcast? It must do so along all of them or none.
  std::optional<bool> outerBroadcast;
  for (size_t d = 0; d < r; ++d) {
    const Dim one = Dim::of(1);
    const Dim &m = d < pad ? one : mask[d - pad];
    if (!isOne(m) && !(m == scores[d]))
      return "a mask of shape " + shapeStr(mask) + " that does not broadcast to the scores' " + shapeStr(scores);
    if (d + 3 < r && !isOne(scores[d])) { // batch dims before the last
      if (outerBroadcast && *outerBroadcast != isOne(m))
        return "a mask of shape " + shapeStr(mask) + " broadcast along some leading batch dims of " +
               shapeStr(scores) + " but not others";
      outerBroadcast = isOne(m);
    }
  }
  return "";
}

std::optional<AttentionMaskLayout> attentionMaskLayout(const std::vector<int64_t> &mask,
                                                       const std::vector<int64_t> &scores, std::string &why) {
  const size_t r = scores.size();
  if (r < 2 || mask.size() > r) {
    why = "a mask of rank " + std::to_string(mask.size()) + " over scores of rank " + std::to_string(r);
    return std::nullopt;
  }
  // The mask's strides in values over the scores' dims (contiguous; 0 where
  // it broadcasts or the dim is 1).
  const size_t pad = r - mask.size();
  std::vector<int64_t> stride(r, 0);
  int64_t next = 1;
  for (size_t d = r; d-- > 0;) {
    const int64_t m = d < pad ? 1 : mask[d - pad];
    if (m != 1 && m != scores[d]) {
      why = "a mask dim of " + std::to_string(m) + " over a scores dim of " + std::to_string(scores[d]);
      return std::nullopt;
    }
    stride[d] = m == 1 ? 0 : next;
    next *= m;
  }
  AttentionMaskLayout layout;
  layout.row = stride[r - 2];
  layout.col = stride[r - 1];
  if (r == 2)
    return layout;
  const size_t head = r - 3; // the last batch dim
  layout.heads = scores[head];
  layout.inner = stride[head];
  // The outer index flattens dims 0..head-1; offset o * outer must equal
  // the sum of their indices times their strides.
  int64_t span = 1; // values of the outer index per step of dim d
  std::optional<int64_t> outer;
  for (size_t d = head; d-- > 0;) {
    if (scores[d] != 1) {
      if (!outer)
        outer = stride[d] / span;
      if (stride[d] != *outer * span) {
        why = "a mask broadcast along some leading batch dims but not others";
        return std::nullopt;
      }
    }
    span *= scores[d];
  }
  layout.outer = outer.value_or(0);
  return layout;
}

bool isFusedAttentionOp(const std::string &op) {
  return op == "scaled_dot_product_attention" || op == "scaled_dot_product_attention_with_lse" ||
         op == "scaled_dot_product_attention_backward";
}

int64_t fusedAttentionPaddedHeadDim(int64_t headDim) { return (headDim + 15) / 16 * 16; }

} // namespace tensorc
