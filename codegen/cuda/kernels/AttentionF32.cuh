// Fused scaled-dot-product attention for f32 on CUDA cores
// (FlashAttention-2's algorithm, as Attention.cuh; docs/cuda-backend.md,
// "Attention").
//
// Tensor cores keep no f32 accuracy (TF32 rounds the inputs to 10 bits), so
// these kernels are register-tiled SIMT products, as an SGEMM is: 128
// threads as 16 x 8 (ty, tx); a block's tiling (Tiles<RA, CB>) gives thread
// (ty, tx) rows 4 ty + 64 a + i (a < RA, i < 4) and columns 4 tx + 32 b + j
// (b < CB, j < 4) of each product. Operands are staged in shared memory with
// the reduction index outermost ([k][row], rows padded by 4 floats), so
// each step of a product is RA + CB 16-byte loads for 16 RA CB FMAs. Larger
// thread tiles save shared-memory bandwidth but cost registers and so blocks
// per SM; ncu on an H100 shows 8 x 8 tiles latency bound at 2 blocks per SM
// (issue slots 48%), hence the choices below. Never the
// L x S scores in global memory: the forward keeps a running max and sum
// per row (online softmax); the backward recomputes P from the log-sum-exp.
//
// Grids as Attention.cuh's (row tiles x BH, 128 threads, the same
// parameters), with each kernel's rows per block and dynamic shared memory
// in a constant beside it (NAME_launch: {rows, bytes}) that the runtime
// reads; a kernel given less shared memory traps.
// Include guard, not #pragma once: the text is also pasted into sources
// (after Attention.cuh, whose Shape and parameter macros it uses).
#ifndef TENSORC_ATTENTION_F32_CUH
#define TENSORC_ATTENTION_F32_CUH

#ifndef TENSORC_ATTENTION_CUH
#include "Attention.cuh"
#endif

namespace tc_attention_f32 {

using tc_attention::Shape;

// An enumerator, not a constexpr variable: NVRTC warns (#177-D) about a
// namespace-scope variable a translation unit never references (a part of
// a split source without an f32 attention kernel).
enum : int { kThreads = 128 };

// The head dim the products run over: DP rounded up to 32 (zero columns past D).
__host__ __device__ constexpr int paddedDim(int dp) { return (dp + 31) / 32 * 32; }
__host__ __device__ constexpr int maxOf(int a, int b) { return a > b ? a : b; }

// A block's tiling: 64 RA rows (queries; keys in the dK/dV kernel) per
// block, tiles of 32 CB columns (keys; queries) per step.
template <int RA, int CB> struct Tiles {
  static constexpr int ra = RA, cb = CB;
  static constexpr int rows = 64 * RA, cols = 32 * CB;
  static constexpr int rowStride = rows + 4; // [k][rows] layouts, padded
  static constexpr int colStride = cols + 4; // [k][cols] layouts, padded
  // Regions that hold a [DPF][cols] tile and then, after a barrier, a
  // [cols][rows] or [cols][DPF + 4] one (the backward reuses them: less
  // shared memory, more blocks per SM).
  __host__ __device__ static constexpr int tileThenScores(int dpf) { return maxOf(dpf * colStride, cols * rowStride); }
  __host__ __device__ static constexpr int tileThenRows(int dpf) { return maxOf(dpf * colStride, cols * (dpf + 4)); }
};

// Each kernel's tiling by padded head dim. Accumulators per thread: the
// forward 16 RA CB scores + 4 RA DPF/32 outputs; dQ two score tiles + the
// dQ rows; dK/dV two score tiles + dK and dV rows.
// Measured (H100, B x H = 96, L = S = 1024, causal): at head dim 64, 64 x 64
// tiles (4 x 8 per thread) beat 64 x 32 by 4-7% and 128-row tiles lose
// (fewer blocks per SM: register and shared-memory bound); at 128, 64 x 32
// (wider tiles need up to 203 KB of shared memory: more than an A100 has).
template <int DPF> using ForwardTiles = Tiles<1, DPF <= 64 ? 2 : 1>;
template <int DPF> using QueryTiles = Tiles<1, DPF <= 64 ? 2 : 1>;
template <int DPF> using KeyTiles = Tiles<1, DPF <= 64 ? 2 : 1>;

// Floats of dynamic shared memory: the forward, dQ (SAVED: from the saved
// forward; else recomputing it), dK/dV.
template <class TL> __host__ __device__ constexpr int forwardFloats(int dpf) {
  return dpf * (TL::rowStride + TL::colStride) + TL::cols * (dpf + 4) + TL::cols * TL::rowStride;
}
template <class TL> __host__ __device__ constexpr int queryFloats(int dpf, bool saved) {
  return 2 * dpf * TL::rowStride + TL::tileThenScores(dpf) + TL::tileThenRows(dpf) +
         (saved ? 0 : TL::cols * TL::rowStride);
}
template <class TL> __host__ __device__ constexpr int keyFloats(int dpf) {
  return 2 * dpf * TL::rowStride + 2 * TL::tileThenScores(dpf) + 2 * TL::cols * (dpf + 4) + 2 * TL::cols;
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

// This thread's row i (< 4 RA) and column j (< 4 CB) within a tile.
__device__ __forceinline__ int rowOf(int i) { return 4 * (threadIdx.x >> 3) + 64 * (i >> 2) + (i & 3); }
__device__ __forceinline__ int colOf(int j) { return 4 * (threadIdx.x & 7) + 32 * (j >> 2) + (j & 3); }

// Reductions over the 8 threads (tx) that share rows: lanes 8 (ty % 4) ..
// + 7 of a warp.
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

// acc[i][j] += sum_k at[k][rowOf(i)] * b[k][colOf(j)] over k < K (row
// strides lda, ldb: multiples of 4).
template <int K, int RA, int CB>
__device__ __forceinline__ void product(float (&acc)[4 * RA][4 * CB], const float *at, int lda, const float *b,
                                        int ldb) {
  at += 4 * (threadIdx.x >> 3);
  b += 4 * (threadIdx.x & 7);
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    float a[4 * RA], bb[4 * CB];
#pragma unroll
    for (int r = 0; r < RA; ++r) {
      const float4 v = *reinterpret_cast<const float4 *>(at + k * lda + 64 * r);
      a[4 * r] = v.x, a[4 * r + 1] = v.y, a[4 * r + 2] = v.z, a[4 * r + 3] = v.w;
    }
#pragma unroll
    for (int c = 0; c < CB; ++c) {
      const float4 v = *reinterpret_cast<const float4 *>(b + k * ldb + 32 * c);
      bb[4 * c] = v.x, bb[4 * c + 1] = v.y, bb[4 * c + 2] = v.z, bb[4 * c + 3] = v.w;
    }
#pragma unroll
    for (int i = 0; i < 4 * RA; ++i)
#pragma unroll
      for (int j = 0; j < 4 * CB; ++j)
        acc[i][j] = fmaf(a[i], bb[j], acc[i][j]);
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

// Stores a thread's tile x (rows rowOf(i), columns colOf(j)) transposed:
// t[colOf(j) * ldt + rowOf(i)], 16 bytes at a time.
template <int RA, int CB>
__device__ __forceinline__ void storeTransposed(float *t, int ldt, const float (&x)[4 * RA][4 * CB]) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
#pragma unroll
  for (int j = 0; j < 4 * CB; ++j)
#pragma unroll
    for (int r = 0; r < RA; ++r)
      *reinterpret_cast<float4 *>(t + (4 * tx + 32 * (j >> 2) + (j & 3)) * ldt + 4 * ty + 64 * r) =
          make_float4(x[4 * r][j], x[4 * r + 1][j], x[4 * r + 2][j], x[4 * r + 3][j]);
}

// Writes a thread's rows of a [rows, D] result times scale[i] (rows row0 +
// rowOf(i) < rows, columns colOf(j) < D).
template <int RA, int NC>
__device__ __forceinline__ void storeRows(float *out, const float (&acc)[4 * RA][4 * NC], long long ld,
                                          long long row0, long long rows, int D, const float (&scale)[4 * RA]) {
#pragma unroll
  for (int i = 0; i < 4 * RA; ++i) {
    const long long r = row0 + rowOf(i);
    if (r >= rows)
      continue;
#pragma unroll
    for (int j = 0; j < 4 * NC; ++j) {
      const int col = colOf(j);
      if (col < D)
        out[r * ld + col] = acc[i][j] * scale[i];
    }
  }
}

// Key tiles the block of query rows from row0 sees (causal: up to its last row).
template <class TL, bool CAUSAL> __device__ __forceinline__ long long keyTileCount(const Shape &s, long long row0) {
  long long tiles = (s.S + TL::cols - 1) / TL::cols;
  if (CAUSAL) {
    const long long last = (row0 + TL::rows - 1) / TL::cols + 1;
    tiles = tiles < last ? tiles : last;
  }
  return tiles;
}

// The forward pass of this block's query rows (staged in qt, unscaled) over
// the key tiles: o (unnormalized), m (the running max of the scaled scores,
// base 2) and l (this thread's part of each row's sum). kt, vs, pt: shared
// scratch of DPF x colStride, cols x (DPF + 4) and cols x rowStride.
template <class TL, int DPF, bool CAUSAL, int MASK>
__device__ void forwardRows(const float *qt, float *kt, float *vs, float *pt, float (&o)[4 * TL::ra][DPF / 8],
                            float (&m)[4 * TL::ra], float (&l)[4 * TL::ra], const float *k, const float *v,
                            const Shape &s, long long row0) {
  constexpr int RA = TL::ra, CB = TL::cb;
  const long long tiles = keyTileCount<TL, CAUSAL>(s, row0);
  for (long long tile = 0; tile < tiles; ++tile) {
    const long long n0 = tile * TL::cols;
    __syncthreads(); // the previous tile is used up (and qt is staged)
    stage<TL::cols, DPF>(k, n0, s.S, s.D, s.ldk, kt, TL::colStride, nullptr, 0);
    stage<TL::cols, DPF>(v, n0, s.S, s.D, s.ldv, nullptr, 0, vs, DPF + 4);
    __syncthreads();
    float sc[4 * RA][4 * CB];
    zero(sc);
    product<DPF, RA, CB>(sc, qt, TL::rowStride, kt, TL::colStride); // S = Q K^T
    // Whole tiles left of the diagonal need no mask (unless a user mask).
    const bool masked =
        MASK != tc_attention::kNoMask || n0 + TL::cols > s.S || (CAUSAL && n0 + TL::cols - 1 > row0);
#pragma unroll
    for (int i = 0; i < 4 * RA; ++i) {
      const long long row = row0 + rowOf(i);
      float mx = -infinity();
#pragma unroll
      for (int j = 0; j < 4 * CB; ++j) {
        float x = sc[i][j] * s.scaleLog2;
        if (masked && !tc_attention::visible<CAUSAL>(row, n0 + colOf(j), s.S))
          x = -infinity();
        else if (MASK != tc_attention::kNoMask && row < s.L)
          x += tc_attention::maskLog2<MASK, float>(s, row, n0 + colOf(j));
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
      for (int j = 0; j < 4 * CB; ++j) {
        sc[i][j] = exp2f(sc[i][j] - base);
        l[i] += sc[i][j];
      }
    }
    storeTransposed<RA, CB>(pt, TL::rowStride, sc);
    __syncthreads();
    product<TL::cols, RA, DPF / 32>(o, pt, TL::rowStride, vs, DPF + 4); // O += P V
  }
}

// The forward pass's state before any key: no output, max -inf, sum 0.
template <int R, int C> __device__ __forceinline__ void startRows(float (&o)[R][C], float (&m)[R], float (&l)[R]) {
  zero(o);
#pragma unroll
  for (int i = 0; i < R; ++i)
    m[i] = -infinity(), l[i] = 0.0f;
}

// This block's first query row: causal grids take the longest rows first.
template <class TL, bool CAUSAL> __device__ __forceinline__ long long firstQueryRow(const Shape &s) {
  const long long tiles = (s.L + TL::rows - 1) / TL::rows;
  return (CAUSAL ? tiles - 1 - (long long)blockIdx.x : (long long)blockIdx.x) * TL::rows;
}

// The log-sum-exp (base 2, as the kernels compute; memory holds natural
// log) of a row from its max and sum; +inf for a row that sees no key,
// masked or none (tc_attention::emptyRowLse), nan for a nan score.
template <int MASK> __device__ __forceinline__ float logSumExp(const Shape &s, float m, float sum) {
  return sum > 0.0f ? (m == -infinity() ? 0.0f : m) + log2f(sum)
                    : (sum == sum ? tc_attention::emptyRowLse<MASK>(s) : sum); // nan scores stay nan
}

template <int DP, bool CAUSAL, int MASK, class TL = ForwardTiles<paddedDim(DP)>>
__device__ void forward(const float *q, const float *k, const float *v, float *o, float *lse, Shape s) {
  constexpr int DPF = paddedDim(DP), RA = TL::ra;
  requireShared(forwardFloats<TL>(DPF));
  float *qt = tc_attention_f32_shared, *kt = qt + DPF * TL::rowStride, *vs = kt + DPF * TL::colStride,
        *pt = vs + TL::cols * (DPF + 4);
  const long long bh = blockIdx.y, row0 = firstQueryRow<TL, CAUSAL>(s);
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  o += bh * s.bho;
  stage<TL::rows, DPF>(q, row0, s.L, s.D, s.ldq, qt, TL::rowStride, nullptr, 0);
  float acc[4 * RA][DPF / 8], m[4 * RA], l[4 * RA], inv[4 * RA];
  startRows(acc, m, l);
  forwardRows<TL, DPF, CAUSAL, MASK>(qt, kt, vs, pt, acc, m, l, k, v, s, row0);
  const int tx = threadIdx.x & 7;
#pragma unroll
  for (int i = 0; i < 4 * RA; ++i) {
    const float sum = rowSum(l[i]);
    inv[i] = sum > 0.0f ? 1.0f / sum : (sum == sum ? tc_attention::emptyRowInverse<MASK>(s) : sum);
    const long long r = row0 + rowOf(i);
    if (lse && tx == 0 && r < s.L)
      lse[bh * s.L + r] = logSumExp<MASK>(s, m[i], sum) * tc_attention::ln2(); // natural log in memory
  }
  storeRows<RA, DPF / 32>(o, acc, s.ldo, row0, s.L, s.D, inv);
}

// dQ, and D = rowsum(dO * O) per query row for dkv; the log-sum-exp too,
// recomputed with O by a forward pass, or (SAVED) read with O from the
// forward kernel's results.
template <int DP, bool CAUSAL, int MASK, bool SAVED, class TL = QueryTiles<paddedDim(DP)>>
__device__ void backwardQuery(const float *dout, const float *q, const float *k, const float *v, const float *o,
                              float *dq, float *lse, float *delta, Shape s) {
  constexpr int DPF = paddedDim(DP), NC = DPF / 32, RA = TL::ra, CB = TL::cb;
  requireShared(queryFloats<TL>(DPF, SAVED));
  // kt then dS^T share a region, vt then K (row-major) another: each tile
  // stages K and V transposed, computes S and dP, and after a barrier writes
  // dS^T over kt and stages K again (from L2) over vt for dQ = dS K.
  float *qt = tc_attention_f32_shared, *dot = qt + DPF * TL::rowStride, *kt = dot + DPF * TL::rowStride,
        *vt = kt + TL::tileThenScores(DPF), *dst = kt, *ks = vt;
  const long long bh = blockIdx.y, row0 = firstQueryRow<TL, CAUSAL>(s);
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  dout += bh * s.bho;
  dq += bh * s.bhq;
  lse += bh * s.L;
  delta += bh * s.L;
  const int tx = threadIdx.x & 7;
  stage<TL::rows, DPF>(q, row0, s.L, s.D, s.ldq, qt, TL::rowStride, nullptr, 0);
  stage<TL::rows, DPF>(dout, row0, s.L, s.D, s.ldo, dot, TL::rowStride, nullptr, 0);
  float lse2[4 * RA], d[4 * RA];
  if constexpr (SAVED) {
    o += bh * s.bho;
#pragma unroll
    for (int i = 0; i < 4 * RA; ++i) {
      const long long r = row0 + rowOf(i);
      float part = 0.0f;
      if (r < s.L)
        for (int col = 4 * tx; col < s.D; col += 32)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (col + j < s.D)
              part += dout[r * s.ldo + col + j] * o[r * s.ldo + col + j];
      d[i] = rowSum(part);
      lse2[i] = r < s.L ? lse[r] * tc_attention::log2e() : infinity();
    }
  } else {
    // The forward pass's scratch: kt, vt (as its row-major V) and a region
    // of its own for P (it needs K, V and P at once).
    float acc[4 * RA][DPF / 8], m[4 * RA], l[4 * RA];
    startRows(acc, m, l);
    forwardRows<TL, DPF, CAUSAL, MASK>(qt, kt, vt, vt + TL::tileThenRows(DPF), acc, m, l, k, v, s, row0);
#pragma unroll
    for (int i = 0; i < 4 * RA; ++i) {
      const float sum = rowSum(l[i]);
      const float inv = sum > 0.0f ? 1.0f / sum : tc_attention::emptyRowInverse<MASK>(s);
      lse2[i] = logSumExp<MASK>(s, m[i], sum);
      // D = rowsum(dO * O); dot is zero past D.
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < DPF / 8; ++j)
        part += acc[i][j] * inv * dot[colOf(j) * TL::rowStride + rowOf(i)];
      d[i] = rowSum(part);
    }
  }
#pragma unroll
  for (int i = 0; i < 4 * RA; ++i) {
    const long long r = row0 + rowOf(i);
    if (tx == 0 && r < s.L) {
      if (!SAVED)
        lse[r] = lse2[i] * tc_attention::ln2();
      delta[r] = d[i];
    }
  }
  // dQ = sum over key tiles of dS K, dS = P (dP - D), dP = dO V^T.
  float acc[4 * RA][DPF / 8];
  zero(acc);
  const long long tiles = keyTileCount<TL, CAUSAL>(s, row0);
  for (long long tile = 0; tile < tiles; ++tile) {
    const long long n0 = tile * TL::cols;
    __syncthreads(); // the previous tile (or the forward pass) is used up
    stage<TL::cols, DPF>(k, n0, s.S, s.D, s.ldk, kt, TL::colStride, nullptr, 0);
    stage<TL::cols, DPF>(v, n0, s.S, s.D, s.ldv, vt, TL::colStride, nullptr, 0);
    __syncthreads();
    float p[4 * RA][4 * CB], dp[4 * RA][4 * CB];
    zero(p);
    zero(dp);
    product<DPF, RA, CB>(p, qt, TL::rowStride, kt, TL::colStride);   // S = Q K^T
    product<DPF, RA, CB>(dp, dot, TL::rowStride, vt, TL::colStride); // dP = dO V^T
#pragma unroll
    for (int i = 0; i < 4 * RA; ++i)
#pragma unroll
      for (int j = 0; j < 4 * CB; ++j) {
        const long long row = row0 + rowOf(i), col = n0 + colOf(j);
        float pr;
        if constexpr (MASK != tc_attention::kNoMask)
          pr = tc_attention::maskedProbability<CAUSAL, MASK, float>(s, p[i][j], row, col, lse2[i]);
        else
          pr = tc_attention::visible<CAUSAL>(row, col, s.S) ? exp2f(p[i][j] * s.scaleLog2 - lse2[i]) : 0.0f;
        p[i][j] = pr * (dp[i][j] - d[i]); // dS
      }
    __syncthreads(); // kt and vt are read: dS^T and K take their places
    storeTransposed<RA, CB>(dst, TL::rowStride, p);
    stage<TL::cols, DPF>(k, n0, s.S, s.D, s.ldk, nullptr, 0, ks, DPF + 4);
    __syncthreads();
    product<TL::cols, RA, NC>(acc, dst, TL::rowStride, ks, DPF + 4); // dQ += dS K
  }
  float scale[4 * RA];
#pragma unroll
  for (int i = 0; i < 4 * RA; ++i)
    scale[i] = s.scale;
  storeRows<RA, NC>(dq, acc, s.ldq, row0, s.L, s.D, scale);
}

// dK and dV of a block of key rows over the query tiles that see them:
// S^T = K Q^T, P^T = exp2(S^T - lse), dV += P^T dO, dP^T = V dO^T,
// dS^T = P^T (dP^T - D), dK += dS^T Q.
template <int DP, bool CAUSAL, int MASK, class TL = KeyTiles<paddedDim(DP)>>
__device__ void backwardKey(const float *dout, const float *q, const float *k, const float *v, const float *lse,
                            const float *delta, float *dk, float *dv, Shape s) {
  constexpr int DPF = paddedDim(DP), NC = DPF / 32, RA = TL::ra, CB = TL::cb;
  static_assert(TL::cols <= kThreads, "one thread per query row of a tile stages its lse and D");
  requireShared(keyFloats<TL>(DPF));
  // qt then P^T share a region, dot then dS^T another (after a barrier).
  float *kt = tc_attention_f32_shared, *vt = kt + DPF * TL::rowStride, *qt = vt + DPF * TL::rowStride,
        *dot = qt + TL::tileThenScores(DPF), *qs = dot + TL::tileThenScores(DPF), *dos = qs + TL::cols * (DPF + 4),
        *ps = qt, *dss = dot, *lseS = dos + TL::cols * (DPF + 4), *deltaS = lseS + TL::cols;
  const long long bh = blockIdx.y, key0 = (long long)blockIdx.x * TL::rows;
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  dout += bh * s.bho;
  dk += bh * s.bhk;
  dv += bh * s.bhv;
  lse += bh * s.L;
  delta += bh * s.L;
  stage<TL::rows, DPF>(k, key0, s.S, s.D, s.ldk, kt, TL::rowStride, nullptr, 0);
  stage<TL::rows, DPF>(v, key0, s.S, s.D, s.ldv, vt, TL::rowStride, nullptr, 0);
  float dka[4 * RA][DPF / 8], dva[4 * RA][DPF / 8];
  zero(dka);
  zero(dva);
  const long long tiles = (s.L + TL::cols - 1) / TL::cols;
  // Causal: query rows before the first key see none of these keys.
  const long long firstTile = CAUSAL ? key0 / TL::cols : 0;
  for (long long tile = firstTile; tile < tiles; ++tile) {
    const long long m0 = tile * TL::cols;
    __syncthreads(); // the previous tile is used up
    stage<TL::cols, DPF>(q, m0, s.L, s.D, s.ldq, qt, TL::colStride, qs, DPF + 4);
    stage<TL::cols, DPF>(dout, m0, s.L, s.D, s.ldo, dot, TL::colStride, dos, DPF + 4);
    if (threadIdx.x < TL::cols) {
      const bool in = m0 + threadIdx.x < s.L;
      lseS[threadIdx.x] = in ? lse[m0 + threadIdx.x] * tc_attention::log2e() : infinity();
      deltaS[threadIdx.x] = in ? delta[m0 + threadIdx.x] : 0.0f;
    }
    __syncthreads();
    float p[4 * RA][4 * CB], dp[4 * RA][4 * CB];
    zero(p);
    zero(dp);
    product<DPF, RA, CB>(p, kt, TL::rowStride, qt, TL::colStride);   // S^T = K Q^T (rows: keys)
    product<DPF, RA, CB>(dp, vt, TL::rowStride, dot, TL::colStride); // dP^T = V dO^T
#pragma unroll
    for (int i = 0; i < 4 * RA; ++i)
#pragma unroll
      for (int j = 0; j < 4 * CB; ++j) {
        const long long key = key0 + rowOf(i), query = m0 + colOf(j);
        float pr = 0.0f;
        if constexpr (MASK != tc_attention::kNoMask) {
          if (query < s.L)
            pr = tc_attention::maskedProbability<CAUSAL, MASK, float>(s, p[i][j], query, key, lseS[colOf(j)]);
        } else if (key < s.S && query < s.L && (!CAUSAL || key <= query)) {
          pr = exp2f(p[i][j] * s.scaleLog2 - lseS[colOf(j)]);
        }
        p[i][j] = pr;
        dp[i][j] = pr * (dp[i][j] - deltaS[colOf(j)]);
      }
    __syncthreads();                                  // qt and dot are read: P^T and dS^T take their places
    storeTransposed<RA, CB>(ps, TL::rowStride, p);   // ps[query][key]
    storeTransposed<RA, CB>(dss, TL::rowStride, dp); // dss[query][key]
    __syncthreads();
    product<TL::cols, RA, NC>(dva, ps, TL::rowStride, dos, DPF + 4); // dV += P^T dO
    product<TL::cols, RA, NC>(dka, dss, TL::rowStride, qs, DPF + 4); // dK += dS^T Q
  }
  if constexpr (CAUSAL && MASK != tc_attention::kNoMask) {
    if (tc_attention::anyEmptyRowBefore(lse, firstTile * TL::cols, s.L))
#pragma unroll
      for (int i = 0; i < 4 * RA; ++i)
#pragma unroll
        for (int c = 0; c < DPF / 8; ++c)
          dka[i][c] = dva[i][c] = __int_as_float(0x7fffffff);
  }
  float one[4 * RA], scale[4 * RA];
#pragma unroll
  for (int i = 0; i < 4 * RA; ++i)
    one[i] = 1.0f, scale[i] = s.scale;
  storeRows<RA, NC>(dk, dka, s.ldk, key0, s.S, s.D, scale);
  storeRows<RA, NC>(dv, dva, s.ldv, key0, s.S, s.D, one);
}

} // namespace tc_attention_f32

// The kernels of one f32 attention configuration, named and launched as
// Attention.cuh's (NAME_fwd, NAME_bwd_q, NAME_bwd_q_saved, NAME_bwd_kv),
// each with its launch constant NAME_..._launch = {rows per block, bytes of
// dynamic shared memory}.
#define TC_ATTENTION_F32_LAUNCH(KERNEL, TILES, FLOATS)                                             \
  extern "C" __constant__ int KERNEL##_launch[2] = {TILES::rows, 4 * (FLOATS)};
#define TC_ATTENTION_F32_FWD(NAME, DP, CAUSAL, MASK)                                               \
  TC_ATTENTION_F32_LAUNCH(NAME##_fwd, tc_attention_f32::ForwardTiles<tc_attention_f32::paddedDim(DP)>, \
                          tc_attention_f32::forwardFloats<                                        \
                              tc_attention_f32::ForwardTiles<tc_attention_f32::paddedDim(DP)>>(   \
                              tc_attention_f32::paddedDim(DP)))                                    \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_fwd(const float *q, const float *k, const float *v, float *o, float *lse,            \
                 TC_ATTENTION_SHAPE_PARAMS) {                                                      \
    tc_attention_f32::forward<DP, CAUSAL, MASK>(q, k, v, o, lse, TC_ATTENTION_SHAPE_FOR(MASK, float)); \
  }
#define TC_ATTENTION_F32_BWD_Q(NAME, DP, CAUSAL, MASK)                                             \
  TC_ATTENTION_F32_LAUNCH(NAME##_bwd_q, tc_attention_f32::QueryTiles<tc_attention_f32::paddedDim(DP)>, \
                          tc_attention_f32::queryFloats<                                          \
                              tc_attention_f32::QueryTiles<tc_attention_f32::paddedDim(DP)>>(     \
                              tc_attention_f32::paddedDim(DP), false))                             \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_bwd_q(const float *dout, const float *q, const float *k, const float *v, float *dq,   \
                   float *lse, float *delta, TC_ATTENTION_SHAPE_PARAMS) {                          \
    tc_attention_f32::backwardQuery<DP, CAUSAL, MASK, false>(dout, q, k, v, nullptr, dq, lse, delta, \
                                                             TC_ATTENTION_SHAPE_FOR(MASK, float));  \
  }
#define TC_ATTENTION_F32_BWD_Q_SAVED(NAME, DP, CAUSAL, MASK)                                       \
  TC_ATTENTION_F32_LAUNCH(NAME##_bwd_q_saved, tc_attention_f32::QueryTiles<tc_attention_f32::paddedDim(DP)>, \
                          tc_attention_f32::queryFloats<                                          \
                              tc_attention_f32::QueryTiles<tc_attention_f32::paddedDim(DP)>>(     \
                              tc_attention_f32::paddedDim(DP), true))                              \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_bwd_q_saved(const float *dout, const float *q, const float *k, const float *v,        \
                         const float *o, const float *lse, float *dq, float *delta,                \
                         TC_ATTENTION_SHAPE_PARAMS) {                                              \
    tc_attention_f32::backwardQuery<DP, CAUSAL, MASK, true>(dout, q, k, v, o, dq,                  \
                                                            const_cast<float *>(lse), delta,       \
                                                            TC_ATTENTION_SHAPE_FOR(MASK, float));  \
  }
#define TC_ATTENTION_F32_BWD_KV(NAME, DP, CAUSAL, MASK)                                            \
  TC_ATTENTION_F32_LAUNCH(NAME##_bwd_kv, tc_attention_f32::KeyTiles<tc_attention_f32::paddedDim(DP)>, \
                          tc_attention_f32::keyFloats<                                            \
                              tc_attention_f32::KeyTiles<tc_attention_f32::paddedDim(DP)>>(       \
                              tc_attention_f32::paddedDim(DP)))                                    \
  extern "C" __global__ void __launch_bounds__(tc_attention_f32::kThreads)                        \
      NAME##_bwd_kv(const float *dout, const float *q, const float *k, const float *v,             \
                    const float *lse, const float *delta, float *dk, float *dv,                    \
                    TC_ATTENTION_SHAPE_PARAMS) {                                                   \
    tc_attention_f32::backwardKey<DP, CAUSAL, MASK>(dout, q, k, v, lse, delta, dk, dv,             \
                                                    TC_ATTENTION_SHAPE_FOR(MASK, float));          \
  }
// All of them (tests).
#define TC_ATTENTION_F32_KERNELS(NAME, DP, CAUSAL, MASK)                                           \
  TC_ATTENTION_F32_FWD(NAME, DP, CAUSAL, MASK)                                                     \
  TC_ATTENTION_F32_BWD_Q(NAME, DP, CAUSAL, MASK)                                                   \
  TC_ATTENTION_F32_BWD_Q_SAVED(NAME, DP, CAUSAL, MASK)                                             \
  TC_ATTENTION_F32_BWD_KV(NAME, DP, CAUSAL, MASK)

#endif // TENSORC_ATTENTION_F32_CUH
