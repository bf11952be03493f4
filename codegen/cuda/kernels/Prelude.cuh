// Headers and helpers every generated kernel uses (pasted first into each
// artifact's CUDA source; NVRTC compiles it at load, or at compile time with
// --precompile).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define TC_INFINITY __int_as_float(0x7f800000)

// NaN-propagating max/min (PyTorch's maximum/minimum; fmaxf drops NaN).
template <typename T> __device__ __forceinline__ T tc_maximum(T a, T b) {
  return (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b);
}
template <typename T> __device__ __forceinline__ T tc_minimum(T a, T b) {
  return (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b);
}
template <typename T> __device__ __forceinline__ T tc_lowest();
template <> __device__ __forceinline__ int tc_lowest<int>() { return -2147483647 - 1; }
template <> __device__ __forceinline__ long long tc_lowest<long long>() { return -9223372036854775807LL - 1; }
template <typename T> __device__ __forceinline__ T tc_highest();
template <> __device__ __forceinline__ int tc_highest<int>() { return 2147483647; }
template <> __device__ __forceinline__ long long tc_highest<long long>() { return 9223372036854775807LL; }
// A computed value to its storage type (one rounding for f16/bf16).
template <typename S, typename T> __device__ __forceinline__ S tc_store(T v) { return (S)v; }
template <> __device__ __forceinline__ __half tc_store<__half, float>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 tc_store<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ unsigned char tc_store<unsigned char, bool>(bool v) { return v ? 1 : 0; }
// Warp exchange for every accumulator type (bool travels as int).
template <typename T> __device__ __forceinline__ T tc_shfl_xor(T v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <> __device__ __forceinline__ bool tc_shfl_xor<bool>(bool v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, (int)v, lane_mask) != 0;
}
// argmax/argmin: keeps (best, index) of the first max/min; nan counts as
// the largest for both (the interpreter's rule); index < 0: nothing yet.
template <bool MAX, typename T>
__device__ __forceinline__ void tc_arg_combine(T &best, long long &index, T x, long long xi) {
  if (xi < 0) return;
  if (index < 0) { best = x; index = xi; return; }
  const bool bn = best != best, xn = x != x;
  const bool take = (bn || xn) ? (xn && (!bn || xi < index))
                               : ((MAX ? x > best : x < best) || (x == best && xi < index));
  if (take) { best = x; index = xi; }
}

// logsumexp in one pass (online): the accumulator is (m, s) with the sum s of
// exp(x - m) over what was seen, m the largest x so far. A larger x rescales
// s; -inf adds nothing (and never forms -inf - -inf); nan poisons m. The
// result is m + log(s), or m itself where m is infinite: -inf for a range of
// -inf only (or an empty one), +inf if any x is +inf.
__device__ __forceinline__ float tc_exp_of(float v) { return expf(v); }
__device__ __forceinline__ double tc_exp_of(double v) { return exp(v); }
template <typename T> __device__ __forceinline__ void tc_lse_combine(T &m, T &s, T x) {
  if (x > m) { s = s * tc_exp_of(m - x) + (T)1; m = x; }
  else if (x != x) m = x;
  else if (x > -(T)TC_INFINITY) s += tc_exp_of(x - m);
}
// Merges another accumulator (om, os) into (m, s).
template <typename T> __device__ __forceinline__ void tc_lse_merge(T &m, T &s, T om, T os) {
  if (om != om || m != m) { m = om + m; return; }
  if (om > m) { s = (m > -(T)TC_INFINITY ? s * tc_exp_of(m - om) : (T)0) + os; m = om; }
  else if (om > -(T)TC_INFINITY) s += os * tc_exp_of(om - m);
}
template <typename T> __device__ __forceinline__ T tc_lse_finish(T m, T s) {
  return (m == (T)TC_INFINITY || m == -(T)TC_INFINITY) ? m : m + log(s);
}
// A chain kernel's row cache: the block copies n elements from src (device
// memory) to dst (shared memory), 16 bytes per load where both are aligned,
// four loads per thread in flight before their stores.
template <int BLOCK, typename U>
__device__ __forceinline__ void tc_copy_in_rounds(U *dst, const U *src, long long n) {
  for (long long e = threadIdx.x; e < n; e += 4LL * BLOCK) {
    U v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (e + u * BLOCK < n) v[u] = src[e + u * BLOCK];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (e + u * BLOCK < n) dst[e + u * BLOCK] = v[u];
  }
}
template <int BLOCK, typename T>
__device__ __forceinline__ void tc_copy_row(T *dst, const T *src, long long n) {
  const long long bytes = n * (long long)sizeof(T);
  if (((reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(dst)) & 15) == 0 &&
      bytes % 16 == 0)
    tc_copy_in_rounds<BLOCK>(reinterpret_cast<uint4 *>(dst), reinterpret_cast<const uint4 *>(src), bytes / 16);
  else
    tc_copy_in_rounds<BLOCK>(dst, src, n);
}
