// Pads the dims of large GEMMs that would leave a leading dimension off a
// 16-byte boundary (a vocabulary of 50257 or 30522 rows), as Inductor's
// pad_mm does: cuBLASLt falls back to its unaligned (align1/align2, sm75)
// kernels for such operands, 3-8x slower than the aligned ones (GPT-2's LM
// head: three GEMMs of 2.2-3.4 ms each on an H200 where the aligned ones take
// 0.4). The padded operands are zero-extended (`pad`, a view the producer's
// kernel writes, through a stored transpose where the operand is one), the
// product is computed over the aligned sizes and `slice`d back (a view its
// consumers read), so the program computes the same values.
#pragma once

#include "compiler/graph/Graph.h"

namespace tensorc::transforms {

// `padded` (optional) receives how many matmuls were padded. Only f32, f16
// and bf16 matmuls with static sizes and at least `minimumWork` multiply-adds
// are padded; the dims padded are those cuBLASLt reads as a leading
// dimension: N (the product's rows), K where a is stored row-major or b
// transposed, M where a is a stored transpose.
Graph padMatmuls(const Graph &graph, int *padded = nullptr, int64_t minimumWork = int64_t(1) << 27);

} // namespace tensorc::transforms
