// Fused scaled-dot-product attention for f16/bf16 on tensor cores
// (FlashAttention-2 style; docs/cuda-backend.md, "Attention").
//
// softmax(q k^T * scale [causal]) v without the L x S scores in memory:
// each block owns 64 query rows (4 warps x 16) and walks the keys in tiles
// of 64, keeping a running row max and sum (online softmax) and the output
// in f32 registers. mma.sync m16n8k16 with f32 accumulation; the scores'
// accumulator layout is the next GEMM's A-operand layout, so P never leaves
// registers.
//
// The backward recomputes, in two kernels:
//  - dq: per 64 query rows, the forward (O, the log-sum-exp) and
//    D = rowsum(dO * O), then dQ = sum_j dS_j K_j with dS = P (dP - D),
//    dP = dO V^T; it writes LSE and D for the other kernel;
//  - dkv: per 64 key rows, dV = sum_i P_i^T dO_i and dK = sum_i dS_i^T Q_i
//    over the query tiles (no atomics, deterministic).
//
// Tensors are [BH, rows, D] with the last dim contiguous; `ld*` are row
// strides and `bh*` batch strides in elements. D <= DP (DP a multiple of
// 16, <= 128); columns D..DP are zero in shared memory. Compiled by NVRTC
// (the artifact's source includes this file); timing harnesses compile it
// with nvcc on the GPU machine.
// Include guard, not #pragma once: the text is also pasted into sources.
#ifndef TENSORC_ATTENTION_CUH
#define TENSORC_ATTENTION_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tc_attention {

// Enumerators, not constexpr variables: NVRTC warns (#177-D) about a
// namespace-scope variable a translation unit never references (a part of
// a split source without attention kernels).
enum : int {
  kWarps = 4,
  kThreads = kWarps * 32,
  kRows = 16 * kWarps, // query (forward, dq) or key (dkv) rows per block
  kKeys = 64,          // keys per tile (forward, dq)
};

typedef unsigned int u32;

// std::is_same without <type_traits> (NVRTC compiles without the host's headers).
template <typename A, typename B> struct SameType {
  static constexpr bool value = false;
};
template <typename A> struct SameType<A, A> {
  static constexpr bool value = true;
};

__device__ __forceinline__ float infinity() { return __int_as_float(0x7f800000); }

// Two floats as one register of two 16-bit values (low half first).
template <typename T> __device__ __forceinline__ u32 pack2(float lo, float hi);
template <> __device__ __forceinline__ u32 pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<u32 *>(&v);
}
template <> __device__ __forceinline__ u32 pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<u32 *>(&v);
}
// The two values of a packed register as floats.
template <typename T> __device__ __forceinline__ void unpack2(u32 v, float &lo, float &hi);
template <> __device__ __forceinline__ void unpack2<__nv_bfloat16>(u32 v, float &lo, float &hi) {
  lo = __uint_as_float(v << 16);
  hi = __uint_as_float(v & 0xffff0000u);
}
template <> __device__ __forceinline__ void unpack2<__half>(u32 v, float &lo, float &hi) {
  lo = __half2float(__ushort_as_half((unsigned short)(v & 0xffffu)));
  hi = __half2float(__ushort_as_half((unsigned short)(v >> 16)));
}
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }

// c += a (16x16, row) * b (16x8, col); f32 accumulators.
template <typename T> __device__ __forceinline__ void mma(float c[4], const u32 a[4], const u32 b[2]);
template <> __device__ __forceinline__ void mma<__nv_bfloat16>(float c[4], const u32 a[4], const u32 b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void mma<__half>(float c[4], const u32 a[4], const u32 b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8x8 16-bit matrices from shared memory, transposed: lane l gives
// the address of row l % 8 of matrix l / 8 and receives, of matrix j,
// elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) in r[j]: the B
// operand of mma for a row-major [k][n] tile.
__device__ __forceinline__ void ldmatrixTrans(u32 r[4], const void *row) {
  u32 address = static_cast<u32>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The same four matrices, not transposed: lane l receives, of matrix j,
// elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) in r[j].
__device__ __forceinline__ void ldmatrix(u32 r[4], const void *row) {
  u32 address = static_cast<u32>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ u32 lds32(const void *p) { return *reinterpret_cast<const u32 *>(p); }

// Asynchronous copies (cp.async): issued, committed as a group, waited for.
__device__ __forceinline__ void copyAsync16(void *dst, const void *src, bool valid) {
  const u32 d = static_cast<u32>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING> __device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

// A tile in shared memory: ROWS x DP values, rows padded by 8 (16 bytes) so
// that the fragment loads of 8 rows hit distinct banks.
template <typename T, int ROWS, int DP> struct Tile {
  static constexpr int stride = DP + 8;
  T v[ROWS * stride];
  __device__ T *row(int r) { return v + r * stride; }

  // Rows first..first+ROWS of a [rows, D] matrix (row stride ld) at base;
  // rows past `rows` and columns past D are zero.
  __device__ void load(const T *base, long long first, long long rows, int D, long long ld) {
    constexpr int chunks = DP / 8; // 16-byte pieces per row
    const bool vector = (reinterpret_cast<unsigned long long>(base) & 15) == 0 && (ld & 7) == 0 && (D & 7) == 0;
    for (int i = threadIdx.x; i < ROWS * chunks; i += kThreads) {
      const int r = i / chunks, c = (i % chunks) * 8;
      T *dst = row(r) + c;
      const long long gr = first + r;
      if (gr < rows && vector && c < D) {
        *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(base + gr * ld + c);
      } else {
        for (int e = 0; e < 8; ++e)
          dst[e] = (gr < rows && c + e < D) ? base[gr * ld + c + e] : fromFloat<T>(0.0f);
      }
    }
  }

  // The same rows with asynchronous 16-byte copies (zero-filled past the
  // edges) when the layout allows, so the next tile loads while this one is
  // used; otherwise synchronously. Complete after commitCopies/waitCopies.
  __device__ void loadAsync(const T *base, long long first, long long rows, int D, long long ld) {
    constexpr int chunks = DP / 8;
    const bool vector = (reinterpret_cast<unsigned long long>(base) & 15) == 0 && (ld & 7) == 0 && (D & 7) == 0;
    if (!vector) {
      load(base, first, rows, D, ld);
      return;
    }
    for (int i = threadIdx.x; i < ROWS * chunks; i += kThreads) {
      const int r = i / chunks, c = (i % chunks) * 8;
      const long long gr = first + r;
      const bool valid = gr < rows && c < D;
      copyAsync16(row(r) + c, valid ? base + gr * ld + c : base, valid);
    }
  }
};

// Shared-memory stages of the key/value tiles: two (the next tile loads
// while this one is used) where they fit the 48 KiB of static shared memory.
template <int DP> struct KeyStages {
  static constexpr int count = DP <= 80 ? 2 : 1;
};

// The A fragment (16x16, row-major) of rows r0..r0+15, columns k0..k0+15.
template <typename T, int ROWS, int DP>
__device__ __forceinline__ void loadA(u32 a[4], Tile<T, ROWS, DP> &t, int r0, int k0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  a[0] = lds32(t.row(r0 + g) + k0 + 2 * q);
  a[1] = lds32(t.row(r0 + g + 8) + k0 + 2 * q);
  a[2] = lds32(t.row(r0 + g) + k0 + 8 + 2 * q);
  a[3] = lds32(t.row(r0 + g + 8) + k0 + 8 + 2 * q);
}

// The B fragments of two n-tiles (n0, n0 + 8) of B = M^T for a row-major
// tile M, k-step k0 (one ldmatrix instead of four 32-bit shared loads):
// b[0..1] the first, b[2..3] the second.
template <typename T, int ROWS, int DP>
__device__ __forceinline__ void loadBt2(u32 b[4], Tile<T, ROWS, DP> &t, int n0, int k0) {
  const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
  ldmatrix(b, t.row(n0 + (j >> 1) * 8 + r) + k0 + (j & 1) * 8);
}

// The B fragments of two n-tiles (n0, n0 + 8) of B = M for a row-major
// tile M: B[k][n] = M[k0 + k][n0 + n]; b[0..1] the first, b[2..3] the second.
template <typename T, int ROWS, int DP>
__device__ __forceinline__ void loadB2(u32 b[4], Tile<T, ROWS, DP> &t, int k0, int n0) {
  const int lane = threadIdx.x & 31, j = lane >> 3, r = lane & 7;
  ldmatrixTrans(b, t.row(k0 + (j & 1) * 8 + r) + n0 + (j >> 1) * 8);
}

// The A fragment of k-step kk (columns 16 kk .. 16 kk + 15) of a 16xN
// accumulator held as N/8 C fragments (the same thread owns both).
template <typename T>
__device__ __forceinline__ void accumulatorAsA(u32 a[4], const float (*c)[4], int kk) {
  a[0] = pack2<T>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack2<T>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Zeroes N C fragments.
template <int N> __device__ __forceinline__ void zero(float (*c)[4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
}

// The same fragment split in two, hi + lo, each of type T: hi the values
// rounded to T, lo what that rounding lost, also rounded (16 significant
// bits of bf16, 22 of f16, where one T keeps 8 or 11).
template <typename T>
__device__ __forceinline__ void accumulatorAsSplitA(u32 hi[4], u32 lo[4], const float (*c)[4], int kk) {
  accumulatorAsA<T>(hi, c, kk);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float h0, h1;
    unpack2<T>(hi[i], h0, h1);
    const float (&f)[4] = c[2 * kk + (i >> 1)];
    lo[i] = pack2<T>(f[2 * (i & 1)] - h0, f[2 * (i & 1) + 1] - h1);
  }
}

// out[mt] (16 x DP: DP/8 C fragments) += c[mt] (16 x K: K/8 C fragments, as
// the A operand) * the first K rows of tile m (row-major [k][n]), for MT
// m-tiles of 16 rows: each B fragment loaded once serves all of them.
// SPLIT: c is multiplied as hi + lo (accumulatorAsSplitA), two products
// where one would round it to T: the f32-result attention, whose m (V) is
// exact in T.
template <typename T, int K, int MT, int ROWS, int DP, bool SPLIT = false>
__device__ __forceinline__ void accumulateProducts(float (*out)[DP / 8][4], const float (*c)[K / 8][4],
                                                   Tile<T, ROWS, DP> &m) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    u32 a[MT][4], lo[SPLIT ? MT : 1][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (SPLIT)
        accumulatorAsSplitA<T>(a[mt], lo[mt], c[mt], kk);
      else
        accumulatorAsA<T>(a[mt], c[mt], kk);
    }
#pragma unroll
    for (int dt = 0; dt < DP / 8; dt += 2) {
      u32 b[4];
      loadB2(b, m, kk * 16, dt * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma<T>(out[mt][dt], a[mt], b);
        mma<T>(out[mt][dt + 1], a[mt], b + 2);
        if constexpr (SPLIT) {
          mma<T>(out[mt][dt], lo[mt], b);
          mma<T>(out[mt][dt + 1], lo[mt], b + 2);
        }
      }
    }
  }
}
template <typename T, int K, int ROWS, int DP, bool SPLIT = false>
__device__ __forceinline__ void accumulateProduct(float (*out)[4], const float (*c)[4], Tile<T, ROWS, DP> &m) {
  accumulateProducts<T, K, 1, ROWS, DP, SPLIT>(reinterpret_cast<float (*)[DP / 8][4]>(out),
                                               reinterpret_cast<const float (*)[K / 8][4]>(c), m);
}

// x[mt] = a[mt] m^T for MT m-tiles of 16 rows (A fragments in registers,
// DP/16 k-steps) against the first N rows of tile m: N/8 C fragments each.
template <typename T, int N, int MT, int ROWS, int DP>
__device__ __forceinline__ void productsTransposed(float (*x)[N / 8][4], const u32 (*a)[DP / 16][4],
                                                   Tile<T, ROWS, DP> &m) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    zero<N / 8>(x[mt]);
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk)
#pragma unroll
    for (int nt = 0; nt < N / 8; nt += 2) {
      u32 b[4];
      loadBt2(b, m, nt * 8, kk * 16);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma<T>(x[mt][nt], a[mt][kk], b);
        mma<T>(x[mt][nt + 1], a[mt][kk], b + 2);
      }
    }
}
template <typename T, int N, int ROWS, int DP>
__device__ __forceinline__ void productTransposed(float (*x)[4], const u32 (*a)[4], Tile<T, ROWS, DP> &m) {
  productsTransposed<T, N, 1>(reinterpret_cast<float (*)[N / 8][4]>(x),
                              reinterpret_cast<const u32 (*)[DP / 16][4]>(a), m);
}

// The lse operands hold natural-log log-sum-exps of the scaled scores (as
// cuDNN's statistics do); the kernels work in base 2 (exp2f).
// (Functions, not constants: NVRTC warns of an unused namespace-scope constant.)
__device__ __forceinline__ constexpr float ln2() { return 0.6931471805599453f; }
__device__ __forceinline__ constexpr float log2e() { return 1.4426950408889634f; }

struct Shape {
  long long L, S;               // query and key rows
  int D;                        // head dim (<= DP)
  long long ldq, ldk, ldv, ldo; // row strides (gradients: their operand's)
  long long bhq, bhk, bhv, bho; // batch strides
  float scaleLog2;              // scale * log2(e): scores in base 2
  float scale;
  // The user mask (the op's mask operand) of this block's batch entry, or
  // null; its row and column strides in bytes (0 where it broadcasts).
  const char *mask;
  long long maskRow, maskCol;
  // Dropout on the probabilities (kernels instantiated with DROP): the
  // seed, the stream and the keep threshold of the dropout op's draw
  // (dropFactor), and 1 / (1 - p).
  unsigned long long dropSeed;
  unsigned dropStream, dropThreshold;
  float dropScale;
};

// The dropout op's draw for element `i` (codegen/Program.cpp emitDropout,
// the interpreter's alike): Philox-4x32-10 of counter {lo(i), hi(i),
// stream, 0} and key {lo(seed), hi(seed)}, its first word. A probability
// is kept when (word >> 8) / 2^24 >= p, i.e. word >> 8 >= dropThreshold
// (ceil(p 2^24), the runtime's): the decomposed graph's mask bit for bit.
__device__ __forceinline__ unsigned philoxFirstWord(unsigned long long i, unsigned stream, unsigned long long seed) {
  unsigned c0 = unsigned(i), c1 = unsigned(i >> 32), c2 = stream, c3 = 0u;
  unsigned k0 = unsigned(seed), k1 = unsigned(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
  }
  return c0;
}

// What dropout multiplies the probability at (row r, key c) of this
// block's batch entry by: 1 / (1 - p) where kept, else 0 (row-major index
// over [BH, L, S]).
__device__ __forceinline__ float dropFactor(const Shape &s, long long r, long long c) {
  const unsigned long long i = ((unsigned long long)blockIdx.y * s.L + r) * s.S + c;
  return (philoxFirstWord(i, s.dropStream, s.dropSeed) >> 8) >= s.dropThreshold ? s.dropScale : 0.0f;
}

// The kinds of user mask a kernel is instantiated for: none, bool (one byte
// per value, nonzero = attend) or additive (in the operands' dtype).
enum : int { kNoMask = 0, kBoolMask = 1, kAdditiveMask = 2 };

// The bytes of one mask value of kind MASK for operands of type T.
template <int MASK, typename T> struct MaskBytes {
  static constexpr int value = MASK == kBoolMask ? 1 : MASK == kAdditiveMask ? int(sizeof(T)) : 0;
};

// The mask of batch entry blockIdx.y: batch entries are (outer, head) pairs,
// heads = maskHeads, and the mask's strides (in values) over them are
// maskOuter and maskInner (0 where it broadcasts).
__device__ __forceinline__ const char *maskOfEntry(const void *mask, long long heads, long long outer,
                                                   long long inner, int bytes) {
  if (!mask)
    return nullptr;
  const long long bh = blockIdx.y;
  return static_cast<const char *>(mask) + ((bh / heads) * outer + (bh % heads) * inner) * bytes;
}

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }

// The user mask's term for score (r, c) (r < L, c < S), base 2: 0 or -inf
// for a bool mask, the value times log2(e) for an additive one. A finite
// value that overflows there (a dtype's lowest, as Hugging Face's masks
// write) stays finite: as -inf, a row of them would be nan instead of
// uniform.
// The term of one mask value of kind MASK (bool: 0 or -inf; additive: the
// value in base 2, a finite one kept finite).
template <int MASK> __device__ __forceinline__ float maskTerm(float v) {
  if constexpr (MASK == kBoolMask) {
    return v != 0.0f ? 0.0f : -infinity();
  } else {
    const float t = v * log2e();
    return isinf(t) && !isinf(v) ? copysignf(3.402823466e38f, v) : t;
  }
}
template <int MASK, typename T> __device__ __forceinline__ float maskValue(const char *at) {
  if constexpr (MASK == kBoolMask)
    return *reinterpret_cast<const unsigned char *>(at) ? 1.0f : 0.0f;
  else
    return toFloat(*reinterpret_cast<const T *>(at));
}
template <int MASK, typename T> __device__ __forceinline__ float maskLog2(const Shape &s, long long r, long long c) {
  return maskTerm<MASK>(maskValue<MASK, T>(s.mask + r * s.maskRow + c * s.maskCol));
}

// The terms of columns c and c + 1 (c even) of the mask row at `row`: one
// load of both where the row is contiguous and pairs are aligned (`pairs`,
// PairedMask), else two.
template <int MASK, typename T>
__device__ __forceinline__ void maskPairLog2(const Shape &s, const char *row, long long c, bool pairs, float &t0,
                                             float &t1) {
  constexpr int bytes = MaskBytes<MASK, T>::value;
  if (pairs) {
    const char *at = row + c * bytes;
    if constexpr (MASK == kBoolMask) {
      const unsigned short both = *reinterpret_cast<const unsigned short *>(at);
      t0 = maskTerm<MASK>((both & 0xff) ? 1.0f : 0.0f);
      t1 = maskTerm<MASK>((both >> 8) ? 1.0f : 0.0f);
    } else if constexpr (bytes == 2) {
      float v0, v1;
      unpack2<T>(*reinterpret_cast<const u32 *>(at), v0, v1);
      t0 = maskTerm<MASK>(v0);
      t1 = maskTerm<MASK>(v1);
    } else {
      const float2 both = *reinterpret_cast<const float2 *>(at);
      t0 = maskTerm<MASK>(both.x);
      t1 = maskTerm<MASK>(both.y);
    }
    return;
  }
  t0 = maskTerm<MASK>(maskValue<MASK, T>(row + c * s.maskCol));
  t1 = maskTerm<MASK>(maskValue<MASK, T>(row + (c + 1) * s.maskCol));
}

// Whether a block's mask rows are contiguous with pairs of columns aligned
// (maskPairLog2's single loads): the columns' stride is one value and the
// entry's start and row stride are multiples of two values.
template <int MASK, typename T> __device__ __forceinline__ bool pairedMask(const Shape &s) {
  constexpr long long bytes = MaskBytes<MASK, T>::value;
  if constexpr (bytes == 0) {
    return false;
  } else {
    return s.mask && s.maskCol == bytes && (reinterpret_cast<unsigned long long>(s.mask) % (2 * bytes)) == 0 &&
           s.maskRow % (2 * bytes) == 0;
  }
}

// What a row's normalizer and log-sum-exp become when its sum is 0 (every
// key masked, or none at all): its output is 0, as PyTorch's SDPA
// (_safe_softmax, since 2.5; its fused kernels alike), and its log-sum-exp
// +inf, so a backward recomputing exp(s - lse) gives it no probability.
template <int MASK> __device__ __forceinline__ float emptyRowInverse(const Shape &) { return 0.0f; }
template <int MASK> __device__ __forceinline__ float emptyRowLse(const Shape &) { return infinity(); }

// The kernels' parameters after the tensors, in this order (every size a
// long long, then the scale as a float, then the user mask (null if none),
// the heads its batch entries are split by and its strides in values over
// (outer batch, head, row, column), then dropout's seed (a device i64;
// null without dropout), stream, keep threshold and 1 / (1 - p)): what the
// runtime passes.
#define TC_ATTENTION_SHAPE_PARAMS                                                                  \
  long long L, long long S, long long D, long long ldq, long long ldk, long long ldv,              \
      long long ldo, long long bhq, long long bhk, long long bhv, long long bho, float scale,      \
      const void *mask, long long maskHeads, long long maskOuter, long long maskInner,             \
      long long maskRow, long long maskCol, const long long *dropSeed, unsigned dropStream,        \
      unsigned dropThreshold, float dropScale
// The Shape of a kernel of operand type T and mask kind MASK.
#define TC_ATTENTION_SHAPE_FOR(MASK, T)                                                            \
  tc_attention::Shape {                                                                            \
    L, S, (int)D, ldq, ldk, ldv, ldo, bhq, bhk, bhv, bho, scale * 1.4426950408889634f, scale,      \
        tc_attention::maskOfEntry(mask, maskHeads, maskOuter, maskInner,                           \
                                  tc_attention::MaskBytes<MASK, T>::value),                        \
        maskRow * tc_attention::MaskBytes<MASK, T>::value,                                         \
        maskCol * tc_attention::MaskBytes<MASK, T>::value,                                         \
        dropSeed ? (unsigned long long)*dropSeed : 0ull, dropStream, dropThreshold, dropScale      \
  }

// Whether key column c is visible from query row r.
template <bool CAUSAL> __device__ __forceinline__ bool visible(long long r, long long c, long long S) {
  return c < S && (!CAUSAL || c <= r);
}

// Whether a query row before `rows` (and L) has a nan log-sum-exp: a nan
// score. In the reference that row's probabilities are nan at every key,
// the causally hidden ones too, so every key's dK and dV is nan; the
// causal dK/dV kernels skip the query tiles before a block's first key and
// look for such rows here instead (the whole block: a barrier).
__device__ __forceinline__ bool anyEmptyRowBefore(const float *lse, long long rows, long long L) {
  bool empty = false;
  for (long long r = threadIdx.x; r < rows && r < L; r += blockDim.x)
    empty |= isnan(lse[r]);
  return __syncthreads_or(empty);
}

// The backward's probability of score x (unscaled) at (r, c) under a user
// mask, given the row's log-sum-exp (base 2): 0 past the last key; a
// masked position is exp2(-inf - lse), 0 unless the row is nan (a nan
// score), whose nan then reaches every gradient it touches, as the
// reference's does; a row with every key masked has lse +inf and no
// probability anywhere. Rows past L (lse +inf) read no mask.
template <bool CAUSAL, int MASK, typename T>
__device__ __forceinline__ float maskedProbability(const Shape &s, float x, long long r, long long c, float lse2) {
  if (c >= s.S)
    return 0.0f;
  x *= s.scaleLog2;
  if (CAUSAL && c > r)
    x = -infinity();
  else if (r < s.L)
    x += maskLog2<MASK, T>(s, r, c);
  return exp2f(x - lse2);
}

// The key tiles a block of query rows from row0 sees (causal: those up to
// its last row).
template <bool CAUSAL, int ROWS = kRows>
__device__ __forceinline__ long long keyTiles(const Shape &s, long long row0) {
  long long tiles = (s.S + kKeys - 1) / kKeys;
  if (CAUSAL) {
    const long long last = (row0 + ROWS - 1) / kKeys + 1;
    tiles = tiles < last ? tiles : last;
  }
  return tiles;
}

// Runs body(ks, vs, n0) for key tiles 0..tiles-1, each tile of K and V in
// shared memory, the next one loading meanwhile (two stages) or after it
// (one). The stages must be free on entry; they are free again on exit.
template <typename T, int DP, typename Body>
__device__ __forceinline__ void forEachKeyTile(Tile<T, kKeys, DP> *kss, Tile<T, kKeys, DP> *vss, const T *k,
                                               const T *v, const Shape &s, long long tiles, Body body) {
  constexpr int stages = KeyStages<DP>::count;
  if (tiles > 0) {
    kss[0].loadAsync(k, 0, s.S, s.D, s.ldk);
    vss[0].loadAsync(v, 0, s.S, s.D, s.ldv);
    commitCopies();
  }
  for (long long tile = 0; tile < tiles; ++tile) {
    const long long n0 = tile * kKeys;
    const int cur = stages == 2 ? int(tile & 1) : 0;
    if (stages == 2 && tile + 1 < tiles) {
      kss[cur ^ 1].loadAsync(k, n0 + kKeys, s.S, s.D, s.ldk);
      vss[cur ^ 1].loadAsync(v, n0 + kKeys, s.S, s.D, s.ldv);
      commitCopies();
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads();
    body(kss[cur], vss[cur], n0);
    __syncthreads(); // every warp is done with this stage before it is refilled
    if (stages == 1 && tile + 1 < tiles) {
      kss[0].loadAsync(k, n0 + kKeys, s.S, s.D, s.ldk);
      vss[0].loadAsync(v, n0 + kKeys, s.S, s.D, s.ldv);
      commitCopies();
    }
  }
}

// One warp's MT x 16 query rows (from row0 + warp 16 MT) through all key
// tiles of a block of 16 MT kWarps rows: the unnormalized output o[mt]
// (DP/8 C fragments), the running max m[mt] (base 2, scaled) and the sum
// l[mt] (this thread's part; rows g and g + 8 of each m-tile). Q fragments
// qa come in registers. A warp skips the tiles past its last row.
template <typename T, int DP, bool CAUSAL, int MASK, int MT, bool SPLIT = false, bool DROP = false>
__device__ __forceinline__ void forwardRows(const u32 (*qa)[DP / 16][4], float (*o)[DP / 8][4], float (*m)[2],
                                            float (*l)[2], Tile<T, kKeys, DP> *kss, Tile<T, kKeys, DP> *vss,
                                            const T *k, const T *v, const Shape &s, long long row0) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const long long warpRow0 = row0 + warp * 16 * MT;
  const bool pairedMask = MASK != kNoMask && tc_attention::pairedMask<MASK, T>(s);
  __syncthreads(); // the tiles' space is free (Q was staged there)
  forEachKeyTile<T, DP>(kss, vss, k, v, s, keyTiles<CAUSAL, 16 * MT * kWarps>(s, row0),
                        [&](Tile<T, kKeys, DP> &ks, Tile<T, kKeys, DP> &vs, long long n0) {
    if (CAUSAL && n0 > warpRow0 + 16 * MT - 1)
      return; // every key of this tile is after every row of this warp
    float sc[MT][kKeys / 8][4];
    productsTransposed<T, kKeys, MT>(sc, qa, ks); // S = Q K^T
    // Non-causal: only the tile past the last key is masked. Causal: every
    // tile (masking only those crossing the diagonal made this loop 7%
    // slower on an H100, B*H = 96, L = 1024, D = 64: a worse schedule).
    const bool edge = CAUSAL || n0 + kKeys > s.S;
    float mx[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      mx[mt][0] = mx[mt][1] = -infinity();
      const long long r = warpRow0 + mt * 16 + g;
      // A user mask: this thread's two rows of it (rows past L read row
      // L - 1: their results are not stored), each column pair one load
      // where the layout allows.
      const char *maskRows[2] = {nullptr, nullptr};
      if constexpr (MASK != kNoMask) {
        maskRows[0] = s.mask + (r < s.L ? r : s.L - 1) * s.maskRow;
        maskRows[1] = s.mask + (r + 8 < s.L ? r + 8 : s.L - 1) * s.maskRow;
      }
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const long long row = r + 8 * h, col = n0 + nt * 8 + 2 * q;
          float m0 = 0.0f, m1 = 0.0f;
          if constexpr (MASK != kNoMask) {
            if (!edge) {
              maskPairLog2<MASK, T>(s, maskRows[h], col, pairedMask, m0, m1);
            } else { // nothing read past the last key
              if (col < s.S)
                m0 = maskTerm<MASK>(maskValue<MASK, T>(maskRows[h] + col * s.maskCol));
              if (col + 1 < s.S)
                m1 = maskTerm<MASK>(maskValue<MASK, T>(maskRows[h] + (col + 1) * s.maskCol));
            }
          }
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int e = 2 * h + i;
            float x = sc[mt][nt][e] * s.scaleLog2 + (i ? m1 : m0);
            if (edge && !visible<CAUSAL>(row, col + i, s.S))
              x = -infinity();
            sc[mt][nt][e] = x;
            mx[mt][h] = fmaxf(mx[mt][h], x);
          }
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float mNew = fmaxf(m[mt][h], quadMax(mx[mt][h]));
        const float base = mNew == -infinity() ? 0.0f : mNew; // a row with nothing visible yet
        alpha[h] = exp2f(m[mt][h] - base);
        m[mt][h] = mNew;
        mx[mt][h] = base;
        l[mt][h] *= alpha[h];
      }
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2f(sc[mt][nt][e] - mx[mt][e >> 1]);
          l[mt][e >> 1] += p; // the softmax's sum: of every probability
          // Dropout zeroes (and rescales) what reaches V, not the sum.
          sc[mt][nt][e] = DROP ? p * dropFactor(s, warpRow0 + mt * 16 + g + 8 * (e >> 1), n0 + nt * 8 + 2 * q + (e & 1))
                               : p;
        }
#pragma unroll
      for (int dt = 0; dt < DP / 8; ++dt) {
        o[mt][dt][0] *= alpha[0];
        o[mt][dt][1] *= alpha[0];
        o[mt][dt][2] *= alpha[1];
        o[mt][dt][3] *= alpha[1];
      }
    }
    accumulateProducts<T, kKeys, MT, kKeys, DP, SPLIT>(o, sc, vs);
  });
}

// Stores a warp's 16 x DP accumulator (rows row0 + g, + 8; columns < D).
template <typename T, int DP>
__device__ __forceinline__ void storeRows(T *out, const float (*c)[4], long long ld, long long row0,
                                          long long rows, int D, float scale0, float scale1) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int dt = 0; dt < DP / 8; ++dt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long r = row0 + g + 8 * h;
      const int col = dt * 8 + 2 * q;
      if (r >= rows)
        continue;
      const float f = h ? scale1 : scale0;
      if (col < D)
        out[r * ld + col] = fromFloat<T>(c[dt][2 * h] * f);
      if (col + 1 < D)
        out[r * ld + col + 1] = fromFloat<T>(c[dt][2 * h + 1] * f);
    }
}

// This block's first query row: causal grids take the longest rows (the
// last tiles) first, so the tail is short.
template <bool CAUSAL, int ROWS = kRows> __device__ __forceinline__ long long queryRow0(const Shape &s) {
  const long long tiles = (s.L + ROWS - 1) / ROWS;
  return (CAUSAL ? tiles - 1 - (long long)blockIdx.x : (long long)blockIdx.x) * ROWS;
}

// 16-row m-tiles per warp in the forward: two where the registers allow
// (each K/V fragment read from shared memory then serves 32 rows), unless
// causal: there the 128-row blocks' share of masked work and their lower
// occupancy (254 registers) made the H100 forward 22% slower (0.158 vs
// 0.129 ms, B*H = 96, L = 1024, D = 64), while non-causal gained 9%.
template <int DP, bool CAUSAL> struct ForwardTiling {
  static constexpr int mtiles = DP <= 64 && !CAUSAL ? 2 : 1;
  static constexpr int rows = 16 * mtiles * kWarps;
};

// O: the output's type; float with 16-bit T is the f32-result attention
// (scaled_dot_product_attention's out_dtype): scores exact products with
// f32 sums as always, and P times V in hi + lo parts (accumulateProducts).
template <typename T, int DP, bool CAUSAL, int MASK, typename O = T, bool DROP = false>
__device__ void forward(const T *q, const T *k, const T *v, O *o, float *lse, Shape s) {
  constexpr bool SPLIT = !SameType<O, T>::value;
  constexpr int MT = ForwardTiling<DP, CAUSAL>::mtiles, ROWS = ForwardTiling<DP, CAUSAL>::rows;
  constexpr int stages = KeyStages<DP>::count;
  __shared__ Tile<T, kKeys, DP> kss[stages], vss[stages];
  const long long bh = blockIdx.y, row0 = queryRow0<CAUSAL, ROWS>(s);
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  o += bh * s.bho;
  const int warp = threadIdx.x >> 5;
  // Q through shared memory (the key tiles' space, kKeys rows per tile)
  // into registers.
  static_assert(ROWS <= 2 * kKeys, "the query rows fit a key and a value tile");
  kss[0].load(q, row0, s.L, s.D, s.ldq);
  if (ROWS > kKeys)
    vss[0].load(q, row0 + kKeys, s.L, s.D, s.ldq);
  __syncthreads();
  u32 qa[MT][DP / 16][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int r = warp * 16 * MT + mt * 16;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk)
      loadA(qa[mt][kk], r < kKeys ? kss[0] : vss[0], r % kKeys, kk * 16);
  }
  float acc[MT][DP / 8][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    zero<DP / 8>(acc[mt]);
    m[mt][0] = m[mt][1] = -infinity();
    l[mt][0] = l[mt][1] = 0.0f;
  }
  forwardRows<T, DP, CAUSAL, MASK, MT, SPLIT, DROP>(qa, acc, m, l, kss, vss, k, v, s, row0);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const long long rowM = row0 + warp * 16 * MT + mt * 16;
    float inv[2];
    for (int h = 0; h < 2; ++h) {
      const float sum = quadSum(l[mt][h]);
      inv[h] = sum > 0.0f ? 1.0f / sum : (sum == sum ? emptyRowInverse<MASK>(s) : sum);
      // The log-sum-exp for a backward that reuses this forward (natural
      // log in memory: cuDNN's statistics, so either backward pairs with it).
      const long long r = rowM + (threadIdx.x & 31) / 4 + 8 * h;
      if (lse && (threadIdx.x & 3) == 0 && r < s.L)
        lse[bh * s.L + r] = sum > 0.0f ? ((m[mt][h] == -infinity() ? 0.0f : m[mt][h]) + log2f(sum)) * ln2()
                                       : (sum == sum ? emptyRowLse<MASK>(s) : sum); // nan scores stay nan
    }
    storeRows<O, DP>(o, acc[mt], s.ldo, rowM, s.L, s.D, inv[0], inv[1]);
  }
}

// dQ, and D = rowsum(dO * O) per query row for dkv; the log-sum-exp (in
// memory natural log, in registers base 2) too, recomputed with O by a forward pass over the keys, or (SAVED)
// read with O from the forward kernel's results. dout/o: [BH, L, D] with
// strides ldo/bho; dq: q's.
// G: the gradient's type; float with 16-bit T is the backward of the
// f32-result attention (dout exact in T, as q, k and v): the forward is
// recomputed with P V in hi + lo parts (f32 O for D) and dS K likewise
// (dS, like P, has f32's digits; K is exact in T). Not SAVED: the saved
// output is f32 there.
template <typename T, int DP, bool CAUSAL, int MASK, bool SAVED, bool DROP = false, typename G = T>
__device__ void backwardQuery(const T *dout, const T *q, const T *k, const T *v, const T *o, G *dq,
                              float *lse, float *delta, Shape s) {
  constexpr bool SPLIT = !SameType<G, T>::value;
  static_assert(!(SPLIT && SAVED), "the f32-result backward recomputes the forward");
  constexpr int stages = KeyStages<DP>::count;
  __shared__ Tile<T, kKeys, DP> kss[stages], vss[stages];
  Tile<T, kKeys, DP> &ks = kss[0], &vs = vss[0];
  const long long bh = blockIdx.y, row0 = queryRow0<CAUSAL>(s);
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  dout += bh * s.bho;
  dq += bh * s.bhq;
  lse += bh * s.L;
  delta += bh * s.L;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  u32 qa[DP / 16][4], da[DP / 16][4];
  ks.load(q, row0, s.L, s.D, s.ldq);
  vs.load(dout, row0, s.L, s.D, s.ldo);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    loadA(qa[kk], ks, warp * 16, kk * 16);
    loadA(da[kk], vs, warp * 16, kk * 16);
  }
  float acc[DP / 8][4];
  zero<DP / 8>(acc);
  float lse2[2], d[2] = {0.0f, 0.0f};
  if constexpr (SAVED) {
    // O's A fragments (through shared memory) beside dO's: the same positions.
    o += bh * s.bho;
    __syncthreads();
    ks.load(o, row0, s.L, s.D, s.ldo);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      u32 oa[4];
      loadA(oa, ks, warp * 16, kk * 16);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float dlo, dhi, olo, ohi;
        unpack2<T>(da[kk][j], dlo, dhi);
        unpack2<T>(oa[j], olo, ohi);
        d[j & 1] += dlo * olo + dhi * ohi;
      }
    }
    for (int h = 0; h < 2; ++h) {
      const long long r = row0 + warp * 16 + g + 8 * h;
      lse2[h] = r < s.L ? lse[r] * log2e() : infinity();
    }
    __syncthreads(); // the stages are free for the key tiles
  } else {
    float m[2] = {-infinity(), -infinity()}, l[2] = {0.0f, 0.0f};
    forwardRows<T, DP, CAUSAL, MASK, 1, SPLIT, DROP>(reinterpret_cast<const u32 (*)[DP / 16][4]>(qa),
                                        reinterpret_cast<float (*)[DP / 8][4]>(acc),
                                        reinterpret_cast<float (*)[2]>(m), reinterpret_cast<float (*)[2]>(l), kss,
                                        vss, k, v, s, row0);
    // O = acc / l; D = rowsum(dO * O): dO's A fragments hold the same
    // (row, column) positions as O's C fragments (k-step kk = n-tiles 2kk, 2kk+1).
    for (int h = 0; h < 2; ++h) {
      const float sum = quadSum(l[h]);
      l[h] = sum > 0.0f ? 1.0f / sum : emptyRowInverse<MASK>(s);
      lse2[h] = sum > 0.0f ? (m[h] == -infinity() ? 0.0f : m[h]) + log2f(sum)
                           : (sum == sum ? emptyRowLse<MASK>(s) : sum); // nan scores stay nan
    }
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // a[j]: row g + 8 (j & 1), n-tile 2 kk + (j >> 1).
        const float *c = acc[2 * kk + (j >> 1)] + 2 * (j & 1);
        float lo, hi;
        unpack2<T>(da[kk][j], lo, hi);
        d[j & 1] += (lo * c[0] + hi * c[1]) * l[j & 1];
      }
  }
  for (int h = 0; h < 2; ++h) {
    d[h] = quadSum(d[h]);
    const long long r = row0 + warp * 16 + g + 8 * h;
    if (qd == 0 && r < s.L) {
      if (!SAVED)
        lse[r] = lse2[h] * ln2();
      delta[r] = d[h];
    }
  }
  // dQ = sum over key tiles of dS K, dS = P (dP - D), dP = dO V^T (with
  // dropout, dP = dropout(dO V^T): the gradient of P through its mask).
  zero<DP / 8>(acc);
  const long long rows[2] = {row0 + warp * 16 + g, row0 + warp * 16 + g + 8};
  // (forwardRows, or the saved path, ended with a barrier: the stages are free)
  forEachKeyTile<T, DP>(kss, vss, k, v, s, keyTiles<CAUSAL>(s, row0),
                        [&](Tile<T, kKeys, DP> &ks, Tile<T, kKeys, DP> &vs, long long n0) {
    float p[kKeys / 8][4], dp[kKeys / 8][4];
    productTransposed<T, kKeys>(p, qa, ks);  // S = Q K^T
    productTransposed<T, kKeys>(dp, da, vs); // dP = dO V^T
    // Only tiles crossing the diagonal or the last key need the mask.
    const bool edge = n0 + kKeys > s.S || (CAUSAL && n0 + kKeys - 1 > rows[0]);
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long c = n0 + nt * 8 + 2 * qd + (e & 1);
        if constexpr (DROP)
          dp[nt][e] *= dropFactor(s, rows[e >> 1], c);
        float pr;
        if constexpr (MASK != kNoMask)
          pr = maskedProbability<CAUSAL, MASK, T>(s, p[nt][e], rows[e >> 1], c, lse2[e >> 1]);
        else
          pr = !edge || visible<CAUSAL>(rows[e >> 1], c, s.S) ? exp2f(p[nt][e] * s.scaleLog2 - lse2[e >> 1])
                                                              : 0.0f;
        p[nt][e] = pr * (dp[nt][e] - d[e >> 1]); // dS
      }
    accumulateProduct<T, kKeys, kKeys, DP, SPLIT>(acc, p, ks); // dQ += dS K
  });
  storeRows<G, DP>(dq, acc, s.ldq, row0 + warp * 16, s.L, s.D, s.scale, s.scale);
}

// Query rows per tile in dkv: fewer for wide heads (registers).
template <int DP> struct KeyTiling {
  static constexpr int queries = DP <= 64 ? 64 : 32;
};

// dK and dV of 64 key rows: over the query tiles that see them,
// S^T = K Q^T, P^T = exp2(S^T - lse), dV += P^T dO, dP^T = V dO^T,
// dS^T = P^T (dP^T - D), dK += dS^T Q.
// With dropout, dV += dropout(P)^T dO and dP^T = dropout(V dO^T).
// G: the gradients' type (float: the f32-result attention's backward; P^T
// and dS^T then multiply in hi + lo parts).
template <typename T, int DP, bool CAUSAL, int MASK, bool DROP = false, typename G = T>
__device__ void backwardKey(const T *dout, const T *q, const T *k, const T *v, const float *lse,
                            const float *delta, G *dk, G *dv, Shape s) {
  constexpr bool SPLIT = !SameType<G, T>::value;
  constexpr int BQ = KeyTiling<DP>::queries;
  __shared__ Tile<T, BQ, DP> qss[2], dss[2]; // two stages (fits: BQ is 32 for wide heads)
  __shared__ float lseSs[2][BQ], deltaSs[2][BQ];
  Tile<T, BQ, DP> &qs = qss[0], &ds = dss[0];
  const long long bh = blockIdx.y, key0 = (long long)blockIdx.x * kRows;
  q += bh * s.bhq;
  k += bh * s.bhk;
  v += bh * s.bhv;
  dout += bh * s.bho;
  dk += bh * s.bhk;
  dv += bh * s.bhv;
  lse += bh * s.L;
  delta += bh * s.L;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, qd = lane & 3;
  // K and V fragments (A operands) of this warp's 16 key rows, through
  // shared memory in BQ-row pieces.
  u32 ka[DP / 16][4], va[DP / 16][4];
#pragma unroll
  for (int piece = 0; piece < kRows / BQ; ++piece) {
    __syncthreads();
    qs.load(k, key0 + piece * BQ, s.S, s.D, s.ldk);
    ds.load(v, key0 + piece * BQ, s.S, s.D, s.ldv);
    __syncthreads();
    if (warp * 16 / BQ == piece)
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        loadA(ka[kk], qs, warp * 16 % BQ, kk * 16);
        loadA(va[kk], ds, warp * 16 % BQ, kk * 16);
      }
  }
  float dka[DP / 8][4], dva[DP / 8][4];
  zero<DP / 8>(dka);
  zero<DP / 8>(dva);
  const long long keys[2] = {key0 + warp * 16 + g, key0 + warp * 16 + g + 8};
  const long long tiles = (s.L + BQ - 1) / BQ;
  // Causal: query rows before the first key see none of these keys.
  const long long firstTile = CAUSAL ? key0 / BQ : 0;
  // Stage st gets query tile t: q, dout (asynchronously), lse and delta.
  auto fetch = [&](int st, long long t) {
    const long long m0 = t * BQ;
    qss[st].loadAsync(q, m0, s.L, s.D, s.ldq);
    dss[st].loadAsync(dout, m0, s.L, s.D, s.ldo);
    commitCopies();
    for (int i = threadIdx.x; i < BQ; i += kThreads) {
      const bool in = m0 + i < s.L;
      lseSs[st][i] = in ? lse[m0 + i] * log2e() : infinity();
      deltaSs[st][i] = in ? delta[m0 + i] : 0.0f;
    }
  };
  __syncthreads(); // the K/V staging above is done with qss[0], dss[0]
  if (firstTile < tiles)
    fetch(0, firstTile);
  for (long long t = firstTile; t < tiles; ++t) {
    const long long m0 = t * BQ;
    const int cur = int((t - firstTile) & 1);
    if (t + 1 < tiles) {
      fetch(cur ^ 1, t + 1);
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads();
    Tile<T, BQ, DP> &qs = qss[cur], &ds = dss[cur];
    const float *lseS = lseSs[cur], *deltaS = deltaSs[cur];
    float p[BQ / 8][4], dp[BQ / 8][4];
    productTransposed<T, BQ>(p, ka, qs);  // S^T = K Q^T
    productTransposed<T, BQ>(dp, va, ds); // dP^T = V dO^T
    // p: P^T (rows: keys; columns: queries); dp becomes dS^T. (Masking
    // only the tiles that cross the diagonal, as the other kernels do, made
    // this one 40% slower on an H100: 246 registers and a worse schedule.)
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * qd + (e & 1);
        const long long key = keys[e >> 1];
        float pr;
        if constexpr (MASK != kNoMask)
          pr = maskedProbability<CAUSAL, MASK, T>(s, p[nt][e], m0 + col, key, lseS[col]);
        else
          pr = key < s.S && (!CAUSAL || key <= m0 + col) ? exp2f(p[nt][e] * s.scaleLog2 - lseS[col]) : 0.0f;
        if constexpr (DROP) {
          const float f = dropFactor(s, m0 + col, key);
          p[nt][e] = pr * f;
          dp[nt][e] = pr * (dp[nt][e] * f - deltaS[col]);
        } else {
          p[nt][e] = pr;
          dp[nt][e] = pr * (dp[nt][e] - deltaS[col]);
        }
      }
    accumulateProduct<T, BQ, BQ, DP, SPLIT>(dva, p, ds);  // dV += P^T dO
    accumulateProduct<T, BQ, BQ, DP, SPLIT>(dka, dp, qs); // dK += dS^T Q
    __syncthreads(); // every warp is done with this stage before it is refilled
  }
  if constexpr (CAUSAL && MASK != kNoMask) {
    if (anyEmptyRowBefore(lse, firstTile * BQ, s.L))
#pragma unroll
      for (int dt = 0; dt < DP / 8; ++dt)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          dka[dt][j] = dva[dt][j] = __int_as_float(0x7fffffff);
  }
  storeRows<G, DP>(dk, dka, s.ldk, key0 + warp * 16, s.S, s.D, s.scale, s.scale);
  storeRows<G, DP>(dv, dva, s.ldv, key0 + warp * 16, s.S, s.D, 1.0f, 1.0f);
}

} // namespace tc_attention

// The kernels of one attention configuration, extern "C", each defined by
// its own macro so an artifact compiles only those it launches (NVRTC takes
// ~1 s per kernel): NAME_fwd (grid: query tiles x BH; lse may be null),
// NAME_bwd_q or NAME_bwd_q_saved (query tiles x BH; the latter reads O and
// the forward's lse) and NAME_bwd_kv (key tiles x BH), 128 threads each,
// and beside each its launch constant KERNEL_launch = {rows per block,
// bytes of dynamic shared memory} that the runtime reads: tiles of 64 rows,
// static shared memory only. DROP: dropout on the probabilities (Shape's
// drop* fields).
#define TC_ATTENTION_LAUNCH_ROWS(KERNEL, ROWS) extern "C" __constant__ int KERNEL##_launch[2] = {ROWS, 0};
#define TC_ATTENTION_LAUNCH(KERNEL) TC_ATTENTION_LAUNCH_ROWS(KERNEL, tc_attention::kRows)
#define TC_ATTENTION_FWD(NAME, T, DP, CAUSAL, MASK, DROP)                                          \
  TC_ATTENTION_LAUNCH_ROWS(NAME##_fwd, (tc_attention::ForwardTiling<DP, CAUSAL>::rows))            \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_fwd(const T *q, const T *k, const T *v, T *o, float *lse, TC_ATTENTION_SHAPE_PARAMS) { \
    tc_attention::forward<T, DP, CAUSAL, MASK, T, DROP>(q, k, v, o, lse, TC_ATTENTION_SHAPE_FOR(MASK, T)); \
  }
// The f32-result forward of 16-bit operands (out_dtype f32).
#define TC_ATTENTION_WIDE_FWD(NAME, T, DP, CAUSAL, MASK, DROP)                                     \
  TC_ATTENTION_LAUNCH_ROWS(NAME##_fwd, (tc_attention::ForwardTiling<DP, CAUSAL>::rows))            \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_fwd(const T *q, const T *k, const T *v, float *o, float *lse, TC_ATTENTION_SHAPE_PARAMS) { \
    tc_attention::forward<T, DP, CAUSAL, MASK, float, DROP>(q, k, v, o, lse, TC_ATTENTION_SHAPE_FOR(MASK, T)); \
  }
#define TC_ATTENTION_BWD_Q(NAME, T, DP, CAUSAL, MASK, DROP)                                        \
  TC_ATTENTION_LAUNCH(NAME##_bwd_q)                                                                \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_bwd_q(const T *dout, const T *q, const T *k, const T *v, T *dq, float *lse,           \
                   float *delta, TC_ATTENTION_SHAPE_PARAMS) {                                      \
    tc_attention::backwardQuery<T, DP, CAUSAL, MASK, false, DROP>(dout, q, k, v, nullptr, dq, lse, delta, \
                                                            TC_ATTENTION_SHAPE_FOR(MASK, T));      \
  }
#define TC_ATTENTION_BWD_Q_SAVED(NAME, T, DP, CAUSAL, MASK, DROP)                                  \
  TC_ATTENTION_LAUNCH(NAME##_bwd_q_saved)                                                          \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_bwd_q_saved(const T *dout, const T *q, const T *k, const T *v, const T *o,            \
                         const float *lse, T *dq, float *delta, TC_ATTENTION_SHAPE_PARAMS) {       \
    tc_attention::backwardQuery<T, DP, CAUSAL, MASK, true, DROP>(dout, q, k, v, o, dq,             \
                                                           const_cast<float *>(lse), delta,        \
                                                           TC_ATTENTION_SHAPE_FOR(MASK, T));       \
  }
#define TC_ATTENTION_BWD_KV(NAME, T, DP, CAUSAL, MASK, DROP)                                       \
  TC_ATTENTION_LAUNCH(NAME##_bwd_kv)                                                               \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_bwd_kv(const T *dout, const T *q, const T *k, const T *v, const float *lse,           \
                    const float *delta, T *dk, T *dv, TC_ATTENTION_SHAPE_PARAMS) {                 \
    tc_attention::backwardKey<T, DP, CAUSAL, MASK, DROP>(dout, q, k, v, lse, delta, dk, dv,        \
                                                   TC_ATTENTION_SHAPE_FOR(MASK, T));               \
  }
// dK/dV held to 168 registers for three blocks per SM (head dims <= 64;
// 112 bytes of spills): 6% faster causal, 13% non-causal on an H100 with
// 16 x 96 blocks, 10-17% slower with fewer blocks than SMs: the runtime
// takes it for grids of at least 6 blocks per SM (kDenseBlocksPerSm in
// runtime/cuda/CudaProgram.cpp).
#define TC_ATTENTION_BWD_KV_DENSE(NAME, T, DP, CAUSAL, MASK, DROP)                                 \
  TC_ATTENTION_LAUNCH(NAME##_bwd_kv_dense)                                                         \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads, 3)                          \
      NAME##_bwd_kv_dense(const T *dout, const T *q, const T *k, const T *v, const float *lse,     \
                          const float *delta, T *dk, T *dv, TC_ATTENTION_SHAPE_PARAMS) {           \
    tc_attention::backwardKey<T, DP, CAUSAL, MASK, DROP>(dout, q, k, v, lse, delta, dk, dv,        \
                                                   TC_ATTENTION_SHAPE_FOR(MASK, T));               \
  }
// The backward of the f32-result forward: 16-bit q, k, v and dout (exact
// conversions of the f32 ones), f32 dq, dk, dv; the forward recomputed.
#define TC_ATTENTION_WIDE_BWD_Q(NAME, T, DP, CAUSAL, MASK, DROP)                                   \
  TC_ATTENTION_LAUNCH(NAME##_bwd_q)                                                                \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_bwd_q(const T *dout, const T *q, const T *k, const T *v, float *dq, float *lse,       \
                   float *delta, TC_ATTENTION_SHAPE_PARAMS) {                                      \
    tc_attention::backwardQuery<T, DP, CAUSAL, MASK, false, DROP, float>(                          \
        dout, q, k, v, nullptr, dq, lse, delta, TC_ATTENTION_SHAPE_FOR(MASK, T));                  \
  }
#define TC_ATTENTION_WIDE_BWD_KV(NAME, T, DP, CAUSAL, MASK, DROP)                                  \
  TC_ATTENTION_LAUNCH(NAME##_bwd_kv)                                                               \
  extern "C" __global__ void __launch_bounds__(tc_attention::kThreads)                             \
      NAME##_bwd_kv(const T *dout, const T *q, const T *k, const T *v, const float *lse,           \
                    const float *delta, float *dk, float *dv, TC_ATTENTION_SHAPE_PARAMS) {         \
    tc_attention::backwardKey<T, DP, CAUSAL, MASK, DROP, float>(dout, q, k, v, lse, delta, dk, dv, \
                                                          TC_ATTENTION_SHAPE_FOR(MASK, T));        \
  }
// All of them (tests).
#define TC_ATTENTION_KERNELS(NAME, T, DP, CAUSAL, MASK, DROP)                                      \
  TC_ATTENTION_FWD(NAME, T, DP, CAUSAL, MASK, DROP)                                                \
  TC_ATTENTION_BWD_Q(NAME, T, DP, CAUSAL, MASK, DROP)                                              \
  TC_ATTENTION_BWD_Q_SAVED(NAME, T, DP, CAUSAL, MASK, DROP)                                        \
  TC_ATTENTION_BWD_KV(NAME, T, DP, CAUSAL, MASK, DROP)

#endif // TENSORC_ATTENTION_CUH
