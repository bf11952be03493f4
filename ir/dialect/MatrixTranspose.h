// Whether an op is tc.transpose of the last two dims: a GEMM reads it as its
// transpose flag, not a copy (fusion's grouping and codegen's schedule both
// ask).
#pragma once

namespace mlir {
class Operation;
}

namespace tensorc {

bool isMatrixTranspose(mlir::Operation *op);

} // namespace tensorc
