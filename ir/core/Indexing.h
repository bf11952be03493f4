// Row-major index arithmetic with NumPy broadcasting, and torch.matmul's
// shape rules, on concrete sizes: shared by the reference interpreter and
// the runtime so that both read operands the same way. MLIR-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorc {

// The coordinates of row-major element `linear` of `shape`.
std::vector<int64_t> unravel(int64_t linear, const std::vector<int64_t> &shape);
// Offset into a tensor of `shape` broadcast to the (right-aligned) coords.
int64_t broadcastOffset(const std::vector<int64_t> &coords, const std::vector<int64_t> &shape);
// The product of dims[begin, end).
int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end);

// torch.matmul on shapes `a` @ `b` (as read, after any transposition) giving
// `out`: 1-D operands become a row/column, batch dims broadcast.
struct MatmulDims {
  bool aVector = false, bVector = false;
  int64_t M = 0, K = 0, N = 0;
  std::vector<int64_t> aBatch, bBatch, batch; // batch: the result's
  int64_t batches = 1;
  // Element offsets of batch `b`'s matrices in a and b.
  int64_t aOffset(int64_t b) const;
  int64_t bOffset(int64_t b) const;
};
MatmulDims matmulDims(std::vector<int64_t> a, std::vector<int64_t> b, const std::vector<int64_t> &out);

} // namespace tensorc
