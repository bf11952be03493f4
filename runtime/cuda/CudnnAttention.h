// Attention by cuDNN's fused flash-attention engines, for f16/bf16 on the
// GPU: the forward (O and the per-row log-sum-exp statistics) and the
// backward (dQ, dK, dV from dO, O and those statistics), each described
// as the operation graph cuDNN recognizes (the composite SDPA graphs of
// cudnn-frontend: matmul, scale, additive mask, causal mask, softmax, matmul; for the
// backward, dO.O row sums, recomputed probabilities and three matmuls).
// Plans are built once per shape and kept; a shape cuDNN cannot run is
// remembered with the reason, and the caller runs its own kernels.
//
// Layouts: q, k, v, o, do, dq, dk, dv are [b, h, rows, d] contiguous; the
// statistics and the backward's row sums (`delta`) are [b, h, rows] f32.
// The statistics are natural-log log-sum-exps of the scaled, masked
// scores: the same numbers the generated kernels (kernels/Attention.cuh)
// write, so a forward of one kind pairs with a backward of the other.
#pragma once

#include "runtime/cuda/Cudnn.h"

#include <array>
#include <string>
#include <tuple>

namespace tensorc::cuda {

struct CudnnAttentionShape {
  int dtype = cudnn::kBfloat16; // or cudnn::kHalf
  int64_t b = 1, h = 1, L = 0, S = 0, D = 0;
  bool causal = false, backward = false, stats = false;
  float scale = 1.0f;
  // An additive mask (the operands' dtype) added to the scaled scores: its
  // dims over [b, h, L, S] (1 where it broadcasts) and strides in values.
  bool bias = false;
  std::array<int64_t, 4> biasDims{}, biasStrides{};
  auto key() const {
    return std::tie(dtype, b, h, L, S, D, causal, backward, stats, scale, bias, biasDims, biasStrides);
  }
  bool operator<(const CudnnAttentionShape &o) const { return key() < o.key(); }
};

struct CudnnAttentionTensors {
  DevicePtr q = 0, k = 0, v = 0, o = 0, lse = 0; // lse: 0 for a forward without statistics
  DevicePtr dout = 0, dq = 0, dk = 0, dv = 0, delta = 0; // the backward's
  DevicePtr bias = 0;                                    // with CudnnAttentionShape::bias
};

class CudnnAttention {
public:
  // Whether cuDNN's engines take this problem at all (dtype, head dim,
  // alignment): cheap, no cuDNN call.
  static bool eligible(const CudnnAttentionShape &s);
  // The plan for `s`, built on first use; null with `why` when cuDNN is
  // missing or declines the shape.
  const cudnn::Plan *plan(const CudnnAttentionShape &s, std::string &why);
  // Device bytes the plan needs as workspace (the backward's f32 dQ
  // accumulator included).
  static size_t workspaceBytes(const CudnnAttentionShape &s, const cudnn::Plan &p);
  static void run(const CudnnAttentionShape &s, const cudnn::Plan &p, const CudnnAttentionTensors &t,
                  DevicePtr workspace, Stream stream);

private:
  cudnn::PlanCache<CudnnAttentionShape> plans_;
};

} // namespace tensorc::cuda
