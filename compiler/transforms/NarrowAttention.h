// Attention on 16-bit values upcast to f32 reads the 16-bit values.
//
// PyTorch's math SDPA (and Dynamo's decomposition of it) converts f16/bf16
// q, k and v to f32 before the products, as Hugging Face encoders run under
// bf16 inference whenever their mask rules out the fused kernels: the graph
// holds scaled_dot_product_attention over f32 casts (recognized from
// bmm/softmax/bmm), and the f32 kernels read and compute at f32 speed (4x the
// bf16 kernel's time on BERT, an H200). The conversion is exact, so the same
// f32 result comes from the 16-bit operands themselves: this rewrites
//
//   sdpa(c_q * view(cast(q16)), c_k * view(cast(k16)), view(cast(v16)), cast(m16))
//
// into sdpa(view(q16), view(k16), view(v16), m16) {out_dtype = f32, scale
// times c_q c_k} (views: reshape, transpose, permute; c: literal factors),
// which the CUDA backend runs on tensor cores at f32 accuracy
// (kernels/Attention.cuh, TC_ATTENTION_WIDE_FWD). The backward likewise:
// sdpa_backward(cast(g16), ...) (the cotangent of an output that was cast
// back to 16 bits, as math SDPA's is) becomes sdpa_backward(g16, q16, k16,
// v16[, m16][, seed]) {out_dtype = f32}, f32 gradients from the 16-bit
// kernels with P and dS split in two parts (TC_ATTENTION_WIDE_BWD_*); it
// recomputes the forward (a saved output is not read). Dropout (the seed)
// stays as it is: the 16-bit kernels draw the same mask. Run after autodiff:
// the narrowed forward has no gradient rule.
#pragma once

#include "compiler/graph/Graph.h"

namespace tensorc::transforms {

// `narrowed` (optional) receives how many attention ops were rewritten.
Graph narrowAttention(const Graph &graph, int *narrowed = nullptr);

} // namespace tensorc::transforms
