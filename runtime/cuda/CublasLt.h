// cuBLASLt, loaded with dlopen: the GPU runtime's matmul steps. Row-major
// tensors are handed to cuBLASLt's column-major GEMM as their transposes
// (C^T = B^T A^T), so no copies are made; stored transposes (a transpose
// feeding the matmul) become cuBLASLt's transpose flags. f32 runs in true
// f32 (TF32 off unless the artifact allows it), f64 in f64, f16/bf16 with
// f32 accumulation. Bias, relu and gelu(tanh) epilogues run in the GEMM.
#pragma once

#include "ir/core/DType.h"
#include "ir/core/Indexing.h"
#include "runtime/cuda/CudaDriver.h"

namespace tensorc::cuda {

// What is applied to a GEMM's product before it is stored, and how f32 runs.
struct GemmEpilogue {
  bool relu = false, geluTanh = false;
  DevicePtr bias = 0;     // 0: none; else one value per column of c (c's dtype)
  DevicePtr biasGradient = 0; // 0: none; else receives the column sums of b (2-D, not transposed)
  bool biasGradientOfA = false; // of a instead (2-D, stored [k, m], transposed)
  bool allowTf32 = false; // f32 inputs rounded to TF32 on tensor cores
};

// Which of cuBLASLt's heuristic algorithms a matmul runs: the index in its
// ranking for the problem (0: cuBLASLt's own choice; past the last: the
// last). With `count` set, nothing runs: *count receives how many the
// ranking has (at least 1; 1 where the matmul has no choice to make).
struct GemmAlgorithm {
  int rank = 0;
  int *count = nullptr;
};

class CublasLt {
public:
  // Throws Error when cuBLASLt cannot be loaded.
  static CublasLt &get();
  // Scratch memory each stream needs for itself (streams run concurrently).
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  // How many of the heuristic's algorithms are kept per problem (the
  // autotuner's candidates; cuBLASLt 13.1 returned at most 8 for every GEMM
  // of the GPT-2 block on an H100).
  static constexpr int kMaxAlgorithms = 16;
  // c = epilogue(op(a) @ op(b)) for every batch of `dims` (device pointers),
  // in stream order on `stream` with `workspace` (kWorkspaceBytes). Returns
  // false when cuBLASLt has no algorithm for a bias-gradient epilogue on
  // these shapes: then c is computed without it and the caller sums b.
  bool matmul(DevicePtr a, bool transposeA, DevicePtr b, bool transposeB, DevicePtr c, DType dtype,
              const MatmulDims &dims, const GemmEpilogue &epilogue, Stream stream,
              DevicePtr workspace, GemmAlgorithm algorithm = {}) const;
  // cublasLtGetVersion(): the rankings (and so a tuned rank) depend on it.
  size_t version() const;

  struct Api;

private:
  CublasLt();
  const Api *api_;
  void *handle_ = nullptr;
};

} // namespace tensorc::cuda
