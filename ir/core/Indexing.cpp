#include "ir/core/Indexing.h"

namespace tensorc {

std::vector<int64_t> unravel(int64_t linear, const std::vector<int64_t> &shape) {
  std::vector<int64_t> coords(shape.size());
  for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
    coords[i] = shape[i] == 0 ? 0 : linear % shape[i];
    linear = shape[i] == 0 ? 0 : linear / shape[i];
  }
  return coords;
}

int64_t broadcastOffset(const std::vector<int64_t> &coords, const std::vector<int64_t> &shape) {
  size_t lead = coords.size() - shape.size();
  int64_t offset = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    offset = offset * shape[i] + (shape[i] == 1 ? 0 : coords[lead + i]);
  return offset;
}

int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i)
    p *= dims[i];
  return p;
}

MatmulDims matmulDims(std::vector<int64_t> a, std::vector<int64_t> b, const std::vector<int64_t> &out) {
  MatmulDims d;
  d.aVector = a.size() == 1;
  d.bVector = b.size() == 1;
  if (d.aVector)
    a.insert(a.begin(), 1);
  if (d.bVector)
    b.push_back(1);
  d.M = a[a.size() - 2];
  d.K = a.back();
  d.N = b.back();
  d.aBatch.assign(a.begin(), a.end() - 2);
  d.bBatch.assign(b.begin(), b.end() - 2);
  // The result's batch dims: its shape minus M and N where present.
  d.batch = out;
  if (!d.bVector)
    d.batch.pop_back();
  if (!d.aVector)
    d.batch.pop_back();
  d.batches = product(d.batch, 0, d.batch.size());
  return d;
}

int64_t MatmulDims::aOffset(int64_t b) const { return broadcastOffset(unravel(b, batch), aBatch) * M * K; }
int64_t MatmulDims::bOffset(int64_t b) const { return broadcastOffset(unravel(b, batch), bBatch) * K * N; }

} // namespace tensorc
