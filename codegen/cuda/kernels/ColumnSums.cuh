// Column sums out[c] = sum over r of in[r, c], one thread per column (reads
// coalesced across a warp): a linear layer's bias gradient when cuBLASLt has
// no GEMM algorithm with the bias-gradient epilogue for the shape. f16/bf16
// and f32 accumulate in f32, f64 in f64.

template <typename T>
__device__ __forceinline__ void tc_column_sums(T *__restrict__ out, const T *__restrict__ in, long long rows,
                                               long long cols) {
  const long long c = (long long)blockIdx.x * 256 + threadIdx.x;
  if (c >= cols) return;
  decltype(tc_widen(in[0])) acc = 0;
  for (long long r = 0; r < rows; ++r) acc += tc_widen(in[r * cols + c]);
  out[c] = tc_store<T>(acc);
}

// extern "C" NAME(out, in, rows, cols), launched with 256 threads per block.
#define TC_COLUMN_SUMS(NAME, T)                                                                        \
  extern "C" __global__ void __launch_bounds__(256)                                                    \
      NAME(T *__restrict__ out, const T *__restrict__ in, long long rows, long long cols) {            \
    tc_column_sums<T>(out, in, rows, cols);                                                            \
  }

