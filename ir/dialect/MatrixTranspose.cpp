#include "ir/dialect/MatrixTranspose.h"

#include "ir/dialect/TCDialect.h"

#include <algorithm>

namespace tensorc {

bool isMatrixTranspose(mlir::Operation *op) {
  auto t = llvm::dyn_cast_or_null<tc::TransposeOp>(op);
  if (!t)
    return false;
  int64_t rank = int64_t(llvm::cast<tc::TcTensorType>(t.getX().getType()).getSizes().size());
  auto norm = [rank](int64_t a) { return a < 0 ? a + rank : a; };
  int64_t d0 = norm(t.getDim0()), d1 = norm(t.getDim1());
  return rank >= 2 && std::min(d0, d1) == rank - 2 && std::max(d0, d1) == rank - 1;
}

} // namespace tensorc
