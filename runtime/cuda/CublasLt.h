// cuBLASLt, loaded with dlopen: the GPU runtime's matmul steps. Row-major
// tensors are handed to cuBLASLt's column-major GEMM as their transposes
// (C^T = B^T A^T), so no copies are made; stored transposes (a transpose
// feeding the matmul) become cuBLASLt's transpose flags. f32 runs in true
// f32 (TF32 off), f64 in f64, f16/bf16 with f32 accumulation.
#pragma once

#include "ir/core/DType.h"
#include "ir/core/Indexing.h"
#include "runtime/cuda/CudaDriver.h"

namespace tensorc::cuda {

class CublasLt {
public:
  // Throws Error when cuBLASLt cannot be loaded.
  static CublasLt &get();
  // c = op(a) @ op(b) for every batch of `dims` (device pointers).
  void matmul(DevicePtr a, bool transposeA, DevicePtr b, bool transposeB, DevicePtr c, DType dtype,
              const MatmulDims &dims) const;

  struct Api;

private:
  CublasLt();
  const Api *api_;
  void *handle_ = nullptr;
  DevicePtr workspace_ = 0;
  size_t workspaceBytes_ = size_t(32) << 20;
};

} // namespace tensorc::cuda
