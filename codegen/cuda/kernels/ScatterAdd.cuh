// Scatter-add (artifact step ScatterAdd, embedding_backward):
// out[indices[r], c] += grad[r, c] for every row r of grad (rows, cols),
// with atomic adds into the f32 (f64 for f64 grad) result, which the runtime
// zeroes first. Rows looked up many times (a frequent token) contend on
// their table row; the order of its adds, so its last bits, varies between
// runs. A block covers up to 256 columns of one row at a time: grid.x over
// column chunks, grid.y over rows (grid-stride). An index outside
// [0, numWeights) is skipped: the run-time index check (on unless compiled
// with --no-run-checks) reports it.

template <typename Acc, typename G, typename I>
__device__ __forceinline__ void tc_scatter_add(Acc *__restrict__ out, const G *__restrict__ grad,
                                               const I *__restrict__ indices, long long rows, long long cols,
                                               long long numWeights, long long skip) {
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    const long long v = (long long)indices[r];
    if (v < 0 || v >= numWeights || v == skip) continue;
    const G *src = grad + r * cols;
    Acc *dst = out + v * cols;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
         c += (long long)gridDim.x * blockDim.x)
      atomicAdd(dst + c, (Acc)tc_widen(src[c]));
  }
}

// extern "C" NAME(out, grad, indices, rows, cols, numWeights, skip), launched
// with 256 threads per block; rows at index `skip` (padding_idx, or -1) are
// left out.
#define TC_SCATTER_ADD(NAME, ACC, G, I)                                                                 \
  extern "C" __global__ void __launch_bounds__(256)                                                     \
      NAME(ACC *__restrict__ out, const G *__restrict__ grad, const I *__restrict__ indices,            \
           long long rows, long long cols, long long numWeights, long long skip) {                      \
    tc_scatter_add<ACC, G, I>(out, grad, indices, rows, cols, numWeights, skip);                        \
  }
