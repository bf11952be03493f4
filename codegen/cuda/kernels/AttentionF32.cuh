// Fused scaled-dot-product attention for f32 on CUDA cores
// (FlashAttention-2's algorithm, as Attention.cuh; docs/cuda-backend.md,
// "Attention").
//
// Tensor cores keep no f32 accuracy (TF32 rounds the inputs to 10 bits), so
// these kernels are register-tiled SIMT products: 128 threads as 16 x 8
// (ty, tx), each owning a 4 x 4 block of scores (rows 4 ty + i, columns
// 4 tx + j) and 4 rows x DPF/8 columns of its output (columns
// 4 tx + 32 c + j). Operands are staged in shared memory with the reduction
// index outermost ([k][row], rows padded by 4 floats), so each step of a
// product is two 16-byte loads and 16 or 32 FMAs. Never the L x S scores in
// global memory: the forward keeps a running max and sum per row (online
// softmax); the backward recomputes P from the log-sum-exp.
//
// The same launch as Attention.cuh (64-row tiles x BH, 128 threads, the
// same parameters), plus dynamic shared memory: sharedFloats() of it, which
// runtime/cuda/CudaProgram.cpp mirrors; a kernel given less traps.
// Include guard, not #pragma once: the text is also pasted into sources
// (after Attention.cuh, whose Shape and parameter macros it uses).
#ifndef TENSORC_ATTENTION_F32_CUH
#define TENSORC_ATTENTION_F32_CUH

#ifndef TENSORC_ATTENTION_CUH
#include "Attention.cuh"
#endif

namespace tc_attention_f32 {

using tc_attention::Shape;

constexpr int kThreads = 128;
constexpr int kRows = 64;             // query rows (forward, dq) or key rows (dkv) per block
constexpr int kCols = 32;             // keys (forward, dq) or queries (dkv) per tile
constexpr int kRowStride = kRows + 4; // [k][kRows] layouts, padded
constexpr int kColStride = kCols + 4; // [k][kCols] layouts, padded

// The head dim the products run over: DP rounded up to 32 (zero columns past D).
__host__ __device__ constexpr int paddedDim(int dp) { return (dp + 31) / 32 * 32; }
__host__ __device__ constexpr int maxOf(int a, int b) { return a > b ? a : b; }
// Regions that hold a [DPF][kCols] tile and then, after a barrier, a
// [kCols][kRows] or [kCols][DPF + 4] one (the backward reuses them: less
// shared memory, more blocks per SM).
__host__ __device__ constexpr int tileThenScores(int dp) {
  return maxOf(paddedDim(dp) * kColStride, kCols * kRowStride);
}
__host__ __device__ constexpr int tileThenRows(int dp) {
  return maxOf(paddedDim(dp) * kColStride, kCols * (paddedDim(dp) + 4));
}
// Floats of dynamic shared memory per kernel: 0 forward, 1 dq from the
// saved forward, 2 dkv, 3 dq recomputing the forward.
__host__ __device__ constexpr int sharedFloats(int kernel, int dp) {
  return kernel == 0   ? paddedDim(dp) * (kRowStride + kColStride) + kCols * (paddedDim(dp) + 4) + kCols * kRowStride
         : kernel == 2 ? 2 * paddedDim(dp) * kRowStride + 2 * tileThenScores(dp) + 2 * kCols * (paddedDim(dp) + 4) +
                             2 * kCols
                       : 2 * paddedDim(dp) * kRowStride + tileThenScores(dp) + tileThenRows(dp) +
                             (kernel == 3 ? kCols * kRowStride : 0);
}

extern __shared__ __align__(16) float tc_attention_f32_shared[];

__device__ __forceinline__ float infinity() { return __int_as_float(0x7f800000); }

// Traps unless the launch gave at least `floats` of dynamic shared memory.
__device__ __forceinline__ void requireShared(int floats) {
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  if (bytes < 4u * unsigned(floats))
    __trap();
}

// Reductions over the 8 threads (tx) of one row group (ty): lanes
// 8 (ty % 4) .. + 7 of a warp.
__device__ __forceinline__ float rowMax(float v) {
#pragma unroll
  for (int o = 1; o < 8; o <<= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float rowSum(float v) {
#pragma unroll
  for (int o = 1; o < 8; o <<= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// acc[i][4 c + j] += sum_k at[k][4 ty + i] * b[k][4 tx + 32 c + j] over
// k < K (row strides lda, ldb: multiples of 4).
template <int K, int NC>
__device__ __forceinline__ void product(float (&acc)[4][4 * NC], const float *at, int lda, const float *b,
                                        int ldb) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  at += 4 * ty;
  b += 4 * tx;
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    const float4 av = *reinterpret_cast<const float4 *>(at + k * lda);
    const float a[4] = {av.x, av.y, av.z, av.w};
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const float4 bv = *reinterpret_cast<const float4 *>(b + k * ldb + 32 * c);
      const float bb[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][4 * c + j] = fmaf(a[i], bb[j], acc[i][4 * c + j]);
    }
  }
}

template <int R, int C> __device__ __forceinline__ void zero(float (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j)
      x[i][j] = 0.0f;
}

// Four floats of row `gr` from column c of a [rows, D] matrix (row stride
// ld): zero past `rows` and D; one 16-byte load where the layout allows.
__device__ __forceinline__ void load4(float (&v)[4], const float *src, long long gr, long long rows, int c,
                                      int D, long long ld, bool vector) {
  v[0] = v[1] = v[2] = v[3] = 0.0f;
  if (gr >= rows)
    return;
  const float *p = src + gr * ld + c;
  if (vector && c < D) {
    const float4 x = *reinterpret_cast<const float4 *>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (c + e < D)
        v[e] = p[e];
  }
}

// Stages rows first..first+ROWS of a [rows, D] matrix (row stride ld) into
// shared memory, zero past `rows` and D (up to DPF columns): transposed
// (t[c][r], row stride ldt) and/or row-major (m[r][c], row stride ldm); a
// null destination is skipped. Consecutive threads read along a row
// (coalesced); a transposed copy goes through 4 x 4 blocks transposed in
// registers and stored as 16-byte columns.
template <int ROWS, int DPF>
__device__ __forceinline__ void stage(const float *src, long long first, long long rows, int D, long long ld,
                                      float *t, int ldt, float *m, int ldm) {
  const bool vector = (reinterpret_cast<unsigned long long>(src) & 15) == 0 && (ld & 3) == 0 && (D & 3) == 0;
  constexpr int chunks = DPF / 4;
  if (!t) {
    for (int i = threadIdx.x; i < ROWS * chunks; i += kThreads) {
      const int r = i / chunks, c = (i % chunks) * 4;
      float v[4];
      load4(v, src, first + r, rows, c, D, ld, vector);
      *reinterpret_cast<float4 *>(m + r * ldm + c) = make_float4(v[0], v[1], v[2], v[3]);
    }
    return;
  }
  for (int i = threadIdx.x; i < (ROWS / 4) * chunks; i += kThreads) {
    const int r = (i / chunks) * 4, c = (i % chunks) * 4;
    float v[4][4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      load4(v[q], src, first + r + q, rows, c, D, ld, vector);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      *reinterpret_cast<float4 *>(t + (c + e) * ldt + r) = make_float4(v[0][e], v[1][e], v[2][e], v[3][e]);
    if (m) {
#pragma unroll
      for (int q = 0; q < 4; ++q)
        *reinterpret_cast<float4 *>(m + (r + q) * ldm + c) = make_float4(v[q][0], v[q][1], v[q][2], v[q][3]);
    }
  }
}

// Stores x[i][0..3] (rows 4 ty + i, a column j) as column 4 tx + j of a
// [k][row] layout: t[(4 tx + j) * kRowStride + 4 ty + i].
__device__ __forceinline__ void storeTransposed(float *t, const float (&x)[4][4]) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    *reinterpret_cast<float4 *>(t + (4 * tx + j) * kRowStride + 4 * ty) = make_float4(x[0][j], x[1][j], x[2][j], x[3][j]);
}

// Writes a thread's 4 x DPF/8 accumulator times `scale` to rows row0 + 4 ty
// + i (< rows), columns < D.
template <int NC>
__device__ __forceinline__ void storeRows(float *out, const float (&acc)[4][4 * NC], long long ld, long long row0,
                                          long long rows, int D, const float (&scale)[4]) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long long r = row0 + 4 * ty + i;
    if (r >= rows)
      continue;
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = 4 * tx + 32 * c + j;
        if (col < D)
          out[r * ld + col] = acc[i][4 * c + j] * scale[i];
      }
  }
}

// Key tiles the block of query rows from row0 sees (causal: up to its last row).
template <bool CAUSAL> __device__ __forceinline__ long long keyTileCount(const Shape &s, long long row0) {
  long long tiles = (s.S + kCols - 1) / kCols;
  if (CAUSAL) {
    const long long last = (row0 + kRows - 1) / kCols + 1;
    tiles = tiles < last ? tiles : last;
  }
  return tiles;
}

// The forward pass of this block's 64 query rows (staged in qt, unscaled)
// over the key tiles: o (unnormalized), m (the running max of the scaled
// scores, base 2) and l (this thread's part of each row's sum). kt, vs, pt:
// shared scratch of DPF x kColStride, kCols x (DPF + 4) and kCols x kRowStride.
template <int DPF, bool CAUSAL>
__device__ void forwardRows(const float *qt, float *kt, float *vs, float *pt, float (&o)[4][DPF / 8], float (&m)[4],
                            float (&l)[4], const float *k, const float *v, const Shape &s, long long row0) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  const long long tiles = keyTileCount<CAUSAL>(s, row0);
  for (long long tile = 0; tile < tiles; ++tile) {
    const long long n0 = tile * kCols;
    __syncthreads(); // the previous tile is used up (and qt is staged)
    stage<kCols, DPF>(k, n0, s.S, s.D, s.ldk, kt, kColStride, nullptr, 0);
    stage<kCols, DPF>(v, n0, s.S, s.D, s.ldv, nullptr, 0, vs, DPF + 4);
    __syncthreads();
    float sc[4][4];
    zero(sc);
    product<DPF, 1>(sc, qt, kRowStride, kt, kColStride); // S = Q K^T
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const long long row = row0 + 4 * ty + i;
      float mx = -infinity();
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long col = n0 + 4 * tx + j;
        const float x = tc_attention::visible<CAUSAL>(row, col, s.S) ? sc[i][j] * s.scaleLog2 : -infinity();
        sc[i][j] = x;
        mx = fmaxf(mx, x);
      }
      const float mNew = fmaxf(m[i], rowMax(mx));
      const float base = mNew == -infinity() ? 0.0f : mNew; // a row with nothing visible yet
      const float alpha = exp2f(m[i] - base);
      m[i] = mNew;
      l[i] *= alpha;
#pragma unroll
      for (int c = 0; c < DPF / 8; ++c)
        o[i][c] *= alpha;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sc[i][j] = exp2f(sc[i][j] - base);
        l[i] += sc[i][j];
      }
    }
    storeTransposed(pt, sc);
    __syncthreads();
    product<kCols, DPF / 32>(o, pt, kRowStride, vs, DPF + 4); // O += P V
  }
}

// The forward pass's state before any key: no output, max -inf, sum 0.
template <int C> __device__ __forceinline__ void startRows(float (&o)[4][C], float (&m)[4], float (&l)[4]) {
  zero(o);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    m[i] = -infinity(), l[i] = 0.0f;
}

// This block's first query row: causal grids take the longest rows first.
template <bool CAUSAL> __device__ __forceinline__ long long firstQueryRow(const Shape &s) {
  const long long tiles = (s.L + kRows - 1) / kRows;
  return (CAUSAL ? tiles - 1 - (long long)blockIdx.x : (long long)blockIdx.x) * kRows;
}

// The log-sum-exp (base 2) of a row from its max and sum; +inf for a row
// that sees no key.
__device__ __forceinline__ float logSumExp(float m, float sum) {
  return sum > 0.0f ? (m == -infinity() ? 0.0f : m) + log2f(sum) : infinity();
}

template <int DP, bool CAUSAL>
__device__ void forward(const float *q, const float *k, const float *v, float *o, float *lse, Shape s) {
  constexpr int DPF = paddedDim(DP);
  requireShared(sharedFloats(0, DP));
  float *qt = tc_attention_f32_shared, *kt = qt + DPF * kRowStride, *vs = kt + DPF * kColStride,
        *pt = vs + kCols * (DPF + 4);
  const long long bh = blockIdx.y, row0 = firstQueryRow<CAUSAL>(s);
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  o += bh * s.bho;
  stage<kRows, DPF>(q, row0, s.L, s.D, s.ldq, qt, kRowStride, nullptr, 0);
  float acc[4][DPF / 8], m[4], l[4], inv[4];
  startRows(acc, m, l);
  forwardRows<DPF, CAUSAL>(qt, kt, vs, pt, acc, m, l, k, v, s, row0);
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float sum = rowSum(l[i]);
    inv[i] = sum > 0.0f ? 1.0f / sum : (sum == sum ? 0.0f : sum); // no keys: 0 (an empty sum)
    const long long r = row0 + 4 * ty + i;
    if (lse && tx == 0 && r < s.L)
      lse[bh * s.L + r] = logSumExp(m[i], sum);
  }
  storeRows<DPF / 32>(o, acc, s.ldo, row0, s.L, s.D, inv);
}

// dQ, and D = rowsum(dO * O) per query row for dkv; the log-sum-exp too,
// recomputed with O by a forward pass, or (SAVED) read with O from the
// forward kernel's results.
template <int DP, bool CAUSAL, bool SAVED>
__device__ void backwardQuery(const float *dout, const float *q, const float *k, const float *v, const float *o,
                              float *dq, float *lse, float *delta, Shape s) {
  constexpr int DPF = paddedDim(DP), NC = DPF / 32;
  requireShared(sharedFloats(SAVED ? 1 : 3, DP));
  // kt then dS^T share a region, vt then K (row-major) another: each tile
  // stages K and V transposed, computes S and dP, and after a barrier writes
  // dS^T over kt and stages K again (from L2) over vt for dQ = dS K.
  float *qt = tc_attention_f32_shared, *dot = qt + DPF * kRowStride, *kt = dot + DPF * kRowStride,
        *vt = kt + tileThenScores(DP), *dst = kt, *ks = vt;
  const long long bh = blockIdx.y, row0 = firstQueryRow<CAUSAL>(s);
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  dout += bh * s.bho;
  dq += bh * s.bhq;
  lse += bh * s.L;
  delta += bh * s.L;
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  stage<kRows, DPF>(q, row0, s.L, s.D, s.ldq, qt, kRowStride, nullptr, 0);
  stage<kRows, DPF>(dout, row0, s.L, s.D, s.ldo, dot, kRowStride, nullptr, 0);
  float lse2[4], d[4];
  if constexpr (SAVED) {
    o += bh * s.bho;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const long long r = row0 + 4 * ty + i;
      float part = 0.0f;
      if (r < s.L)
        for (int col = 4 * tx; col < s.D; col += 32)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (col + j < s.D)
              part += dout[r * s.ldo + col + j] * o[r * s.ldo + col + j];
      d[i] = rowSum(part);
      lse2[i] = r < s.L ? lse[r] : infinity();
    }
  } else {
    // The forward pass's scratch: kt, vt (as its row-major V) and a region
    // of its own for P (it needs K, V and P at once).
    float acc[4][DPF / 8], m[4], l[4];
    startRows(acc, m, l);
    forwardRows<DPF, CAUSAL>(qt, kt, vt, vt + tileThenRows(DP), acc, m, l, k, v, s, row0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float sum = rowSum(l[i]);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      lse2[i] = logSumExp(m[i], sum);
      // D = rowsum(dO * O); dot is zero past D.
      float part = 0.0f;
#pragma unroll
      for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          part += acc[i][4 * c + j] * inv * dot[(4 * tx + 32 * c + j) * kRowStride + 4 * ty + i];
      d[i] = rowSum(part);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long long r = row0 + 4 * ty + i;
    if (tx == 0 && r < s.L) {
      if (!SAVED)
        lse[r] = lse2[i];
      delta[r] = d[i];
    }
  }
  // dQ = sum over key tiles of dS K, dS = P (dP - D), dP = dO V^T.
  float acc[4][DPF / 8];
  zero(acc);
  const long long tiles = keyTileCount<CAUSAL>(s, row0);
  for (long long tile = 0; tile < tiles; ++tile) {
    const long long n0 = tile * kCols;
    __syncthreads(); // the previous tile (or the forward pass) is used up
    stage<kCols, DPF>(k, n0, s.S, s.D, s.ldk, kt, kColStride, nullptr, 0);
    stage<kCols, DPF>(v, n0, s.S, s.D, s.ldv, vt, kColStride, nullptr, 0);
    __syncthreads();
    float p[4][4], dp[4][4];
    zero(p);
    zero(dp);
    product<DPF, 1>(p, qt, kRowStride, kt, kColStride);   // S = Q K^T
    product<DPF, 1>(dp, dot, kRowStride, vt, kColStride); // dP = dO V^T
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long row = row0 + 4 * ty + i, col = n0 + 4 * tx + j;
        const float pr =
            tc_attention::visible<CAUSAL>(row, col, s.S) ? exp2f(p[i][j] * s.scaleLog2 - lse2[i]) : 0.0f;
        p[i][j] = pr * (dp[i][j] - d[i]); // dS
      }
    __syncthreads(); // kt and vt are read: dS^T and K take their places
    storeTransposed(dst, p);
    stage<kCols, DPF>(k, n0, s.S, s.D, s.ldk, nullptr, 0, ks, DPF + 4);
    __syncthreads();
    product<kCols, NC>(acc, dst, kRowStride, ks, DPF + 4); // dQ += dS K
  }
  const float scale[4] = {s.scale, s.scale, s.scale, s.scale};
  storeRows<NC>(dq, acc, s.ldq, row0, s.L, s.D, scale);
}

// dK and dV of 64 key rows over the query tiles (of 32) that see them:
// S^T = K Q^T, P^T = exp2(S^T - lse), dV += P^T dO, dP^T = V dO^T,
// dS^T = P^T (dP^T - D), dK += dS^T Q.
template <int DP, bool CAUSAL>
__device__ void backwardKey(const float *dout, const float *q, const float *k, const float *v, const float *lse,
                            const float *delta, float *dk, float *dv, Shape s) {
  constexpr int DPF = paddedDim(DP), NC = DPF / 32;
  requireShared(sharedFloats(2, DP));
  // qt then P^T share a region, dot then dS^T another (after a barrier).
  float *kt = tc_attention_f32_shared, *vt = kt + DPF * kRowStride, *qt = vt + DPF * kRowStride,
        *dot = qt + tileThenScores(DP), *qs = dot + tileThenScores(DP), *dos = qs + kCols * (DPF + 4),
        *ps = qt, *dss = dot, *lseS = dos + kCols * (DPF + 4), *deltaS = lseS + kCols;
  const long long bh = blockIdx.y, key0 = (long long)blockIdx.x * kRows;
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  dout += bh * s.bho;
  dk += bh * s.bhk;
  dv += bh * s.bhv;
  lse += bh * s.L;
  delta += bh * s.L;
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  stage<kRows, DPF>(k, key0, s.S, s.D, s.ldk, kt, kRowStride, nullptr, 0);
  stage<kRows, DPF>(v, key0, s.S, s.D, s.ldv, vt, kRowStride, nullptr, 0);
  float dka[4][DPF / 8], dva[4][DPF / 8];
  zero(dka);
  zero(dva);
  const long long tiles = (s.L + kCols - 1) / kCols;
  // Causal: query rows before the first key see none of these keys.
  const long long firstTile = CAUSAL ? key0 / kCols : 0;
  for (long long tile = firstTile; tile < tiles; ++tile) {
    const long long m0 = tile * kCols;
    __syncthreads(); // the previous tile is used up
    stage<kCols, DPF>(q, m0, s.L, s.D, s.ldq, qt, kColStride, qs, DPF + 4);
    stage<kCols, DPF>(dout, m0, s.L, s.D, s.ldo, dot, kColStride, dos, DPF + 4);
    if (threadIdx.x < kCols) {
      const bool in = m0 + threadIdx.x < s.L;
      lseS[threadIdx.x] = in ? lse[m0 + threadIdx.x] : infinity();
      deltaS[threadIdx.x] = in ? delta[m0 + threadIdx.x] : 0.0f;
    }
    __syncthreads();
    float p[4][4], dp[4][4];
    zero(p);
    zero(dp);
    product<DPF, 1>(p, kt, kRowStride, qt, kColStride);   // S^T = K Q^T (rows: keys)
    product<DPF, 1>(dp, vt, kRowStride, dot, kColStride); // dP^T = V dO^T
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const long long key = key0 + 4 * ty + i, query = m0 + 4 * tx + j;
        const bool seen = key < s.S && query < s.L && (!CAUSAL || key <= query);
        const float pr = seen ? exp2f(p[i][j] * s.scaleLog2 - lseS[4 * tx + j]) : 0.0f;
        p[i][j] = pr;
        dp[i][j] = pr * (dp[i][j] - deltaS[4 * tx + j]);
      }
    __syncthreads();          // qt and dot are read: P^T and dS^T take their places
    storeTransposed(ps, p);   // ps[query][key]
    storeTransposed(dss, dp); // dss[query][key]
    __syncthreads();
    product<kCols, NC>(dva, ps, kRowStride, dos, DPF + 4); // dV += P^T dO
    product<kCols, NC>(dka, dss, kRowStride, qs, DPF + 4); // dK += dS^T Q
  }
  const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f}, scale[4] = {s.scale, s.scale, s.scale, s.scale};
  storeRows<NC>(dk, dka, s.ldk, key0, s.S, s.D, scale);
  storeRows<NC>(dv, dva, s.ldv, key0, s.S, s.D, one);
}

} // namespace tc_attention_f32

// The kernels of one f32 attention configuration, named and launched as
// Attention.cuh's (NAME_fwd, NAME_bwd_q, NAME_bwd_q_saved, NAME_bwd_kv),
// each with sharedFloats(0 / 3 / 1 / 2, DP) floats of dynamic shared memory.
#define TC_ATTENTION_F32_FWD(NAME, DP, CAUSAL)                                                     \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_fwd(const float *q, const float *k, const float *v, float *o, float *lse,            \
                 TC_ATTENTION_SHAPE_PARAMS) {                                                      \
    tc_attention_f32::forward<DP, CAUSAL>(q, k, v, o, lse, TC_ATTENTION_SHAPE);                    \
  }
#define TC_ATTENTION_F32_BWD_Q(NAME, DP, CAUSAL)                                                   \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_bwd_q(const float *dout, const float *q, const float *k, const float *v, float *dq,   \
                   float *lse, float *delta, TC_ATTENTION_SHAPE_PARAMS) {                          \
    tc_attention_f32::backwardQuery<DP, CAUSAL, false>(dout, q, k, v, nullptr, dq, lse, delta,     \
                                                       TC_ATTENTION_SHAPE);                        \
  }
#define TC_ATTENTION_F32_BWD_Q_SAVED(NAME, DP, CAUSAL)                                             \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_bwd_q_saved(const float *dout, const float *q, const float *k, const float *v,        \
                         const float *o, const float *lse, float *dq, float *delta,                \
                         TC_ATTENTION_SHAPE_PARAMS) {                                              \
    tc_attention_f32::backwardQuery<DP, CAUSAL, true>(dout, q, k, v, o, dq, const_cast<float *>(lse), \
                                                      delta, TC_ATTENTION_SHAPE);                  \
  }
#define TC_ATTENTION_F32_BWD_KV(NAME, DP, CAUSAL)                                                  \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_bwd_kv(const float *dout, const float *q, const float *k, const float *v,             \
                    const float *lse, const float *delta, float *dk, float *dv,                    \
                    TC_ATTENTION_SHAPE_PARAMS) {                                                   \
    tc_attention_f32::backwardKey<DP, CAUSAL>(dout, q, k, v, lse, delta, dk, dv, TC_ATTENTION_SHAPE); \
  }
// All of them (tests).
#define TC_ATTENTION_F32_KERNELS(NAME, DP, CAUSAL)                                                 \
  TC_ATTENTION_F32_FWD(NAME, DP, CAUSAL)                                                           \
  TC_ATTENTION_F32_BWD_Q(NAME, DP, CAUSAL)                                                         \
  TC_ATTENTION_F32_BWD_Q_SAVED(NAME, DP, CAUSAL)                                                   \
  TC_ATTENTION_F32_BWD_KV(NAME, DP, CAUSAL)

#endif // TENSORC_ATTENTION_F32_CUH
