// Matrix multiplication for the runtime's matmul steps: OpenBLAS when it is
// installed (loaded with dlopen, so the runtime has no link-time dependency
// on it), else a blocked C++ loop. Every dtype: f32/f64 directly, f16/bf16
// converted to f32 and back (f32 accumulation), integers with i64
// accumulation. torch.matmul's shapes: 1-D operands, broadcast batch dims.
#pragma once

#include "ir/core/DType.h"
#include "runtime/artifact/Artifact.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tensorc {
class ThreadPool;
}

namespace tensorc::runtime {

struct MatmulOperand {
  const void *data;
  DType dtype;
  std::vector<int64_t> shape; // as stored
  bool transposed;            // the last two dims are swapped (not for 1-D)
};

// out = a @ b; `out` has the result's shape. Throws Error on mismatched shapes.
void matmul(const MatmulOperand &a, const MatmulOperand &b, void *out, DType outDtype,
            const std::vector<int64_t> &outShape, ThreadPool &pool);

// A matmul step's epilogue (artifact::Step::epilogue) applied after the
// GEMM: in place to `out` (a float dtype), + bias (one per column, `extra`
// of the same dtype), then relu or gelu(tanh); or a bias gradient: `extra`
// receives the column sums of `summed` (the operand the epilogue names,
// 2-D, as stored). cuBLASLt does this inside the GEMM on the GPU.
void applyEpilogue(void *out, DType dtype, const std::vector<int64_t> &shape, const artifact::MatmulEpilogue &epilogue,
                   void *extra, const MatmulOperand &summed);

// "openblas (<path>)" or "built-in loops" (for `tensorc run --bench`).
std::string gemmProvider();

} // namespace tensorc::runtime
