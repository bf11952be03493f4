#include "runtime/core/Blas.h"

#include "ir/core/Error.h"
#include "ir/core/Indexing.h"
#include "runtime/host/DynamicLibrary.h"
#include "runtime/host/FloatBits.h"
#include "runtime/host/ThreadPool.h"

#include <cmath>
#include <atomic>
#include <cstring>
#include <mutex>

namespace tensorc::runtime {
namespace {

// CBLAS's enum values (cblas.h), so no header is needed at build time.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);

struct Gemm {
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  void (*setThreads)(int) = nullptr; // openblas_set_num_threads, where present
  std::string provider = "built-in loops";
};

const Gemm &gemm() {
  static const Gemm g = [] {
    Gemm r;
    for (const char *name : {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"}) {
      std::string tried;
      DynamicLibrary lib = DynamicLibrary::open({name}, false, tried);
      if (!lib)
        continue;
      lib.bind(r.sgemm, "cblas_sgemm");
      lib.bind(r.dgemm, "cblas_dgemm");
      if (lib.missing().empty()) {
        lib.bind(r.setThreads, "openblas_set_num_threads"); // optional
        r.provider = name;
        return r;
      }
      r.sgemm = nullptr;
      r.dgemm = nullptr;
      lib.close();
    }
    return r;
  }();
  return g;
}

// One row-major GEMM C[M,N] = op(A) op(B), with the fallback loops.
template <typename T, typename Acc>
void loopGemm(const T *a, bool ta, const T *b, bool tb, T *c, int64_t M, int64_t N, int64_t K,
              ThreadPool &pool) {
  pool.parallelFor(M, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, N * K)),
                   [&](int64_t i0, int64_t i1) {
                     std::vector<Acc> row(static_cast<size_t>(N));
                     for (int64_t i = i0; i < i1; ++i) {
                       std::fill(row.begin(), row.end(), Acc(0));
                       for (int64_t k = 0; k < K; ++k) {
                         Acc av = Acc(ta ? a[k * M + i] : a[i * K + k]);
                         for (int64_t j = 0; j < N; ++j)
                           row[j] += av * Acc(tb ? b[j * K + k] : b[k * N + j]);
                       }
                       for (int64_t j = 0; j < N; ++j)
                         c[i * N + j] = T(row[j]);
                     }
                   });
}

template <typename T>
void gemmF(const T *a, bool ta, const T *b, bool tb, T *c, int64_t M, int64_t N, int64_t K,
           ThreadPool &pool) {
  const Gemm &g = gemm();
  if (K == 0) {
    if (M * N > 0) // c may be null for an empty result
      std::memset(c, 0, size_t(M * N) * sizeof(T));
    return;
  }
  int lda = int(ta ? M : K), ldb = int(tb ? K : N);
  // OpenBLAS's own threads follow the executable's thread count (LoadOptions
  // ::threads, else the CPUs this process may use), not the machine's. The
  // setting is process-wide: set only when it changes.
  static std::atomic<int> blasThreads{0};
  if (g.setThreads && blasThreads.exchange(int(pool.size())) != int(pool.size()))
    g.setThreads(int(pool.size()));
  if constexpr (std::is_same_v<T, float>) {
    if (g.sgemm) {
      g.sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, int(M), int(N), int(K),
              1.0f, a, std::max(lda, 1), b, std::max(ldb, 1), 0.0f, c, std::max<int>(int(N), 1));
      return;
    }
  } else {
    if (g.dgemm) {
      g.dgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, int(M), int(N), int(K),
              1.0, a, std::max(lda, 1), b, std::max(ldb, 1), 0.0, c, std::max<int>(int(N), 1));
      return;
    }
  }
  loopGemm<T, T>(a, ta, b, tb, c, M, N, K, pool);
}

// bf16 is the top half of an f32: widening is a shift.
float bf16ToF32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; nan stays a (quiet) nan.
uint16_t f32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

std::vector<float> toF32(const void *p, DType d, int64_t n, ThreadPool &pool) {
  std::vector<float> v(size_t(std::max<int64_t>(n, 0)));
  const uint16_t *bits = static_cast<const uint16_t *>(p);
  pool.parallelFor(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      v[i] = d == DType::BF16 ? bf16ToF32(bits[i]) : float(halfBitsToDouble(bits[i]));
  });
  return v;
}

} // namespace

std::string gemmProvider() { return gemm().provider; }

void matmul(const MatmulOperand &a, const MatmulOperand &b, void *out, DType outDtype,
            const std::vector<int64_t> &outShape, ThreadPool &pool) {
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (a.transposed && as.size() >= 2)
    std::swap(as[as.size() - 1], as[as.size() - 2]);
  if (b.transposed && bs.size() >= 2)
    std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  MatmulDims d = matmulDims(as, bs, outShape);
  // A weight shared by every batch with a's batches stacked rows (a linear
  // layer over [batch, sequence, features]): one GEMM of batches x M rows,
  // the result's batches stacked the same way (as the CUDA runtime's
  // CublasLt::matmul).
  if (d.batches > 1 && !a.transposed && !d.aVector && !d.bVector) {
    bool stacked = true;
    for (int64_t bi = 0; bi < d.batches && stacked; ++bi)
      stacked = d.bOffset(bi) == 0 && d.aOffset(bi) == bi * d.M * d.K;
    if (stacked) {
      d.M *= d.batches;
      d.batches = 1;
      d.batch.clear();
      d.aBatch.clear();
      d.bBatch.clear();
    }
  }
  int64_t M = d.M, K = d.K, N = d.N;
  check((d.bVector ? bs[0] : bs[bs.size() - 2]) == K, "matmul: inner dims differ");
  bool half = a.dtype == DType::F16 || a.dtype == DType::BF16;
  std::vector<float> a32, b32, c32;
  if (half) {
    a32 = toF32(a.data, a.dtype, product(a.shape, 0, a.shape.size()), pool);
    b32 = toF32(b.data, b.dtype, product(b.shape, 0, b.shape.size()), pool);
    c32.resize(size_t(d.batches * M * N));
  }
  for (int64_t bi = 0; bi < d.batches; ++bi) {
    int64_t aOff = d.aOffset(bi), bOff = d.bOffset(bi);
    int64_t cOff = bi * M * N;
    bool ta = a.transposed && !d.aVector, tb = b.transposed && !d.bVector;
    switch (a.dtype) {
    case DType::F32:
      gemmF(static_cast<const float *>(a.data) + aOff, ta, static_cast<const float *>(b.data) + bOff,
            tb, static_cast<float *>(out) + cOff, M, N, K, pool);
      break;
    case DType::F64:
      gemmF(static_cast<const double *>(a.data) + aOff, ta,
            static_cast<const double *>(b.data) + bOff, tb, static_cast<double *>(out) + cOff, M, N,
            K, pool);
      break;
    case DType::F16:
    case DType::BF16:
      gemmF(a32.data() + aOff, ta, b32.data() + bOff, tb, c32.data() + cOff, M, N, K, pool);
      break;
    case DType::I64:
      loopGemm<int64_t, int64_t>(static_cast<const int64_t *>(a.data) + aOff, ta,
                                 static_cast<const int64_t *>(b.data) + bOff, tb,
                                 static_cast<int64_t *>(out) + cOff, M, N, K, pool);
      break;
    case DType::I32: {
      // i64 accumulation, wrapped to i32 on store (as the interpreter).
      const int32_t *pa = static_cast<const int32_t *>(a.data) + aOff;
      const int32_t *pb = static_cast<const int32_t *>(b.data) + bOff;
      int32_t *pc = static_cast<int32_t *>(out) + cOff;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += int64_t(ta ? pa[k * M + i] : pa[i * K + k]) *
                   int64_t(tb ? pb[j * K + k] : pb[k * N + j]);
          pc[i * N + j] = int32_t(uint32_t(uint64_t(acc)));
        }
      break;
    }
    default:
      fail("matmul: unsupported dtype " + std::string(dtypeName(a.dtype)));
    }
  }
  if (half) {
    uint16_t *o = static_cast<uint16_t *>(out);
    pool.parallelFor(int64_t(c32.size()), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        o[i] = outDtype == DType::F16 ? doubleToHalfBits(c32[i]) : f32ToBf16(c32[i]);
    });
  }

}

} // namespace tensorc::runtime

namespace tensorc::runtime {

void applyEpilogue(void *out, DType dtype, const std::vector<int64_t> &shape, const artifact::MatmulEpilogue &epilogue,
                   void *extra, const MatmulOperand &summed) {
  if (epilogue.empty())
    return;
  check(isFloat(dtype), "matmul epilogue on a non-float result");
  const void *bias = extra;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  int64_t columns = shape.empty() ? 1 : shape.back();
  bool addBias = epilogue.bias;
  bool relu = epilogue.activation == artifact::MatmulEpilogue::Activation::Relu;
  bool gelu = epilogue.activation == artifact::MatmulEpilogue::Activation::GeluTanh;
  auto get = [dtype](const void *p, int64_t i) -> double {
    switch (dtype) {
    case DType::F32: return static_cast<const float *>(p)[i];
    case DType::F64: return static_cast<const double *>(p)[i];
    case DType::F16: return halfBitsToDouble(static_cast<const uint16_t *>(p)[i]);
    default: return bfloat16BitsToDouble(static_cast<const uint16_t *>(p)[i]);
    }
  };
  auto set = [dtype](void *p, int64_t i, double v) {
    switch (dtype) {
    case DType::F32: static_cast<float *>(p)[i] = float(v); break;
    case DType::F64: static_cast<double *>(p)[i] = v; break;
    case DType::F16: static_cast<uint16_t *>(p)[i] = doubleToHalfBits(v); break;
    default: static_cast<uint16_t *>(p)[i] = doubleToBFloat16Bits(v); break;
    }
  };
  if (epilogue.biasGradient) {
    check(summed.shape.size() == 2 && summed.transposed == epilogue.biasGradientOfA && summed.dtype == dtype,
          "bias-gradient epilogue: the summed operand must be a stored 2-D matrix");
    int64_t rows = summed.shape[0], cols = summed.shape[1];
    std::vector<double> sums(size_t(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        sums[size_t(c)] += get(summed.data, r * cols + c);
    for (int64_t c = 0; c < cols; ++c)
      set(extra, c, sums[size_t(c)]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    double v = get(out, i);
    if (addBias)
      v += get(bias, i % columns);
    if (relu)
      v = v > 0 || v != v ? v : 0.0;
    if (gelu)
      v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    set(out, i, v);
  }
}

} // namespace tensorc::runtime
