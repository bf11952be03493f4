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
// A float's accumulator type and value: f32 for 16-bit floats and f32, f64 for f64.
__device__ __forceinline__ float tc_widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float tc_widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float tc_widen(float v) { return v; }
__device__ __forceinline__ double tc_widen(double v) { return v; }

template <typename S, typename T> __device__ __forceinline__ S tc_store(T v) { return (S)v; }
template <> __device__ __forceinline__ __half tc_store<__half, float>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 tc_store<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ unsigned char tc_store<unsigned char, bool>(bool v) { return v ? 1 : 0; }
// Four consecutive elements, moved as one aligned vector (16 bytes for
// f32, 8 for f16/bf16): vectorized nests read and write rows this way.
template <typename T> struct alignas(4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16) tc_vec4 { T v[4]; };
template <typename T> __device__ __forceinline__ tc_vec4<T> tc_load4(const T *p) {
  return *reinterpret_cast<const tc_vec4<T> *>(p);
}
template <typename T> __device__ __forceinline__ void tc_store4(T *p, const tc_vec4<T> &x) {
  *reinterpret_cast<tc_vec4<T> *>(p) = x;
}
// Whether p can be read or written as tc_vec4 (its element offset from the
// base pointer a multiple of 4 is the caller's part).
template <typename T> __device__ __forceinline__ bool tc_aligned4(const T *p) {
  constexpr unsigned long long a = 4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16;
  return (reinterpret_cast<unsigned long long>(p) & (a - 1)) == 0;
}
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
// Every exp here is of a difference <= 0 (x - m with m the largest), so
// the fast exp's error (~2 ulp plus ~|v| * 2^-24 from scaling v by log2 e)
// is largest only where exp(v), the term's share of s, is tiny: s and the
// log-sum-exp keep ~1e-7 relative accuracy, at a third of expf's cost.
__device__ __forceinline__ float tc_exp_of(float v) { return __expf(v); }
__device__ __forceinline__ double tc_exp_of(double v) { return exp(v); }
template <typename T> __device__ __forceinline__ void tc_lse_combine(T &m, T &s, T x) {
  if (x > m) { s = s * tc_exp_of(m - x) + (T)1; m = x; }
  else if (x != x) m = x;
  else if (x > -(T)TC_INFINITY) s += tc_exp_of(x - m);
}
// N values at once (the vector loops' chunks): one compare and at most one
// rescale per chunk, then one exp and add per value, no branch per value
// (tc_lse_combine's three per value made the online pass of a
// [4096, 50304] cross-entropy issue ~12 instructions per element). The
// chunk's largest value comes from fmax, which skips nan: a nan shows in s
// instead (exp(nan) is nan) and then poisons m. Exps are taken relative to
// m only where m is finite (relative to 0 where it is +-inf: never inf - inf).
template <typename T> __device__ __forceinline__ T tc_lse_fmax(T a, T b) { return fmax(a, b); }
__device__ __forceinline__ float tc_lse_fmax(float a, float b) { return fmaxf(a, b); }
template <typename T, int N> __device__ __forceinline__ void tc_lse_combine_n(T &m, T &s, const T (&x)[N]) {
  T c = x[0];
#pragma unroll
  for (int i = 1; i < N; ++i) c = tc_lse_fmax(c, x[i]);
  if (c > m) { s = s * tc_exp_of(m - c); m = c; }
  const T base = (m > -(T)TC_INFINITY && m < (T)TC_INFINITY) ? m : (T)0;
  T e[N];
#pragma unroll
  for (int i = 0; i < N; ++i) e[i] = tc_exp_of(x[i] - base);
#pragma unroll
  for (int w = 1; w < N; w *= 2) // pairwise: independent adds
#pragma unroll
    for (int i = 0; i + w < N; i += 2 * w) e[i] += e[i + w];
  s += e[0];
  if (s != s) m = s;
}
template <typename T, int N>
__device__ __forceinline__ void tc_lse_combine_n(T &m, T &s, const T (&a)[N], const T (&b)[N]) {
  T x[2 * N];
#pragma unroll
  for (int i = 0; i < N; ++i) { x[i] = a[i]; x[N + i] = b[i]; }
  tc_lse_combine_n(m, s, x);
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
// Thread-block clusters (sm_90+; chain kernel variants that split a row
// across the blocks of a cluster). Declared on every architecture: the row
// templates name them in code instantiated only for clusters.
// [lo, hi): block `rank`'s part of n iterations split across `cluster`
// blocks, in multiples of 4 (vector loads stay aligned).
__device__ __forceinline__ long long tc_split_chunk(long long n, int cluster) {
  return ((n + cluster - 1) / cluster + 3) / 4 * 4;
}
__device__ __forceinline__ void tc_split_range(long long n, unsigned rank, int cluster, long long &lo,
                                               long long &hi) {
  const long long chunk = tc_split_chunk(n, cluster);
  lo = (long long)rank * chunk < n ? (long long)rank * chunk : n;
  hi = lo + chunk < n ? lo + chunk : n;
}
// Every thread of the cluster's blocks arrives, then waits: writes before
// it (device and shared memory) are visible to every block after it.
__device__ __forceinline__ void tc_cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();
#endif
}
// A split row's partial results exchanged without a cluster-wide memory
// fence (barrier.cluster.arrive.release waits for every store in flight:
// on an H100 the cross-entropy chain spent a quarter of its samples in its
// two): each block's thread 0 opens its exchange barrier (an mbarrier
// expecting `bytes` from the other blocks) and every thread arrives at the
// cluster barrier, relaxed; after its own part of the row the block waits
// there (by then the others have long arrived: every barrier is ready),
// thread 0 stores its partials into each other block's slots
// (st.async, counted on that block's barrier) and waits for theirs.
__device__ __forceinline__ void tc_exchange_open(unsigned long long *barrier, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  const unsigned bar = (unsigned)__cvta_generic_to_shared(barrier);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // The compiler may issue the init once for the warp (a uniform
  // instruction): the warp converges before thread 0 arrives on it.
  __syncwarp();
  if (threadIdx.x == 0)
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#else
  (void)barrier, (void)bytes;
  __trap();
#endif
}
// Every block's exchange barrier is open (all threads of the block).
__device__ __forceinline__ void tc_exchange_ready() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#else
  __trap();
#endif
}
// v into block `to`'s copy of *slot, counted on its copy of *barrier.
template <typename T>
__device__ __forceinline__ void tc_exchange_send(T *slot, T v, unsigned long long *barrier, unsigned to) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a 4- or 8-byte value");
#if __CUDA_ARCH__ >= 900
  unsigned remote, remoteBar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"((unsigned)__cvta_generic_to_shared(slot)), "r"(to));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remoteBar) : "r"((unsigned)__cvta_generic_to_shared(barrier)), "r"(to));
  if constexpr (sizeof(T) == 4) {
    union { T t; unsigned u; } b;
    b.t = v;
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote), "r"(b.u),
                 "r"(remoteBar)
                 : "memory");
  } else {
    union { T t; unsigned long long u; } b;
    b.t = v;
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(remote), "l"(b.u),
                 "r"(remoteBar)
                 : "memory");
  }
#else
  (void)slot, (void)v, (void)barrier, (void)to;
  __trap();
#endif
}
// Every other block's partials are in this block's slots.
__device__ __forceinline__ void tc_exchange_wait(unsigned long long *barrier) {
#if __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred done;\n TC_WAIT_EXCHANGE:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               " @!done bra TC_WAIT_EXCHANGE;\n}\n" ::"r"((unsigned)__cvta_generic_to_shared(barrier))
               : "memory");
#else
  (void)barrier;
  __trap();
#endif
}
// *p in the shared memory of the cluster's block `rank` (p: this block's
// address of the same variable).
template <typename T> __device__ __forceinline__ T tc_cluster_load(const T *p, unsigned rank) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a 4- or 8-byte value");
#if __CUDA_ARCH__ >= 900
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank));
  if constexpr (sizeof(T) == 4) {
    union { unsigned u; T t; } v;
    asm volatile("ld.shared::cluster.b32 %0, [%1];" : "=r"(v.u) : "r"(remote) : "memory");
    return v.t;
  } else {
    union { unsigned long long u; T t; } v;
    asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(v.u) : "r"(remote) : "memory");
    return v.t;
  }
#else
  (void)rank;
  __trap();
  return *p;
#endif
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
// A row of at least 32 KiB on sm_90+: one thread hands the copy to the
// tensor memory accelerator (cp.async.bulk, 32 KiB per request, completion
// counted on an mbarrier) and the block waits for it. Such rows leave room
// for one to three blocks per SM, whose threads could keep only 16 KiB or
// so in flight: on an H100 the cross-entropy chain (201 KB rows) ran
// 1.007 -> 0.909 ms; rows of 16 KiB (softmax, layer norm) gained nothing.
template <typename T> __device__ __forceinline__ bool tc_copy_row_in_bulk(T *dst, const T *src, long long bytes) {
#if __CUDA_ARCH__ >= 900
  if (((reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(dst)) & 15) != 0 ||
      bytes % 16 != 0 || bytes < (32LL << 10) || bytes >= (1LL << 20))
    return false;
  __shared__ __align__(8) unsigned long long barrier;
  const unsigned bar = (unsigned)__cvta_generic_to_shared(&barrier);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"((unsigned)bytes) : "memory");
    const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
    for (long long at = 0; at < bytes; at += 32768) {
      const unsigned size = (unsigned)(bytes - at < 32768 ? bytes - at : 32768);
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       to + (unsigned)at),
                   "l"(reinterpret_cast<const char *>(src) + at), "r"(size), "r"(bar)
                   : "memory");
    }
  }
  // Phase 0 completes when every byte has landed.
  asm volatile("{\n .reg .pred done;\n TC_WAIT_ROW:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               " @!done bra TC_WAIT_ROW;\n}\n" ::"r"(bar)
               : "memory");
  // Invalidated once every thread has seen it complete: another row copy of
  // the same kernel initializes it again.
  __syncthreads();
  if (threadIdx.x == 0)
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
  return true;
#else
  (void)dst, (void)src, (void)bytes;
  return false;
#endif
}
template <int BLOCK, typename T>
__device__ __forceinline__ void tc_copy_row(T *dst, const T *src, long long n) {
  const long long bytes = n * (long long)sizeof(T);
  if (tc_copy_row_in_bulk(dst, src, bytes))
    return;
  if (((reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(dst)) & 15) == 0 &&
      bytes % 16 == 0)
    tc_copy_in_rounds<BLOCK>(reinterpret_cast<uint4 *>(dst), reinterpret_cast<const uint4 *>(src), bytes / 16);
  else
    tc_copy_in_rounds<BLOCK>(dst, src, n);
}
