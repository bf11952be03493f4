#include "runtime/cuda/CublasLt.h"

#include "ir/core/Error.h"
#include "runtime/cuda/Nvrtc.h"

#include "runtime/host/DynamicLibrary.h"
#include <algorithm>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace tensorc::cuda {

struct CublasLt::Api {
  int (*create)(void **);
  int (*descCreate)(void **, int, int);
  int (*descDestroy)(void *);
  int (*descSetAttribute)(void *, int, const void *, size_t);
  int (*layoutCreate)(void **, int, uint64_t, uint64_t, int64_t);
  int (*layoutDestroy)(void *);
  int (*layoutSetAttribute)(void *, int, const void *, size_t);
  int (*prefCreate)(void **);
  int (*prefDestroy)(void *);
  int (*prefSetAttribute)(void *, int, const void *, size_t);
  int (*heuristic)(void *, void *, void *, void *, void *, void *, void *, int, void *, int *);
  int (*matmul)(void *, void *, const void *, const void *, void *, const void *, void *,
                const void *, const void *, void *, void *, void *, const void *, void *, size_t,
                void *);
  size_t (*version)();
};

namespace {

// cublasLtMatmulHeuristicResult_t's layout.
struct Heuristic {
  uint64_t algo[8];
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
};

constexpr int kTransA = 3, kTransB = 4, kMaxWorkspace = 1;
constexpr int kEpilogue = 7, kBiasPointer = 8;
constexpr int kEpilogueRelu = 2, kEpilogueBias = 4, kEpilogueGelu = 32, kEpilogueBgradA = 256, kEpilogueBgradB = 512;
constexpr int kCompute32F = 68, kCompute32FFastTf32 = 77, kCompute64F = 70;
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;

// The batches' offsets as one stride (0: a broadcast operand), if they are
// evenly spaced: then one strided-batched GEMM does every batch.
std::optional<int64_t> uniformStride(const MatmulDims &d, bool a) {
  int64_t stride = d.batches > 1 ? (a ? d.aOffset(1) - d.aOffset(0) : d.bOffset(1) - d.bOffset(0)) : 0;
  for (int64_t bi = 0; bi < d.batches; ++bi)
    if ((a ? d.aOffset(bi) : d.bOffset(bi)) != bi * stride)
      return std::nullopt;
  return stride;
}

// Heuristic answers by problem (its ranking, best first): the query costs
// tens of microseconds on the host, every run (it was the launch path's
// largest cost).
std::mutex heuristicMutex;
std::map<std::string, std::vector<Heuristic>> heuristics;

} // namespace

CublasLt &CublasLt::get() {
  static std::once_flag once;
  static std::unique_ptr<CublasLt> instance;
  static std::string error;
  std::call_once(once, [] {
    try {
      instance.reset(new CublasLt());
    } catch (const Error &e) {
      error = e.what();
    }
  });
  check(instance != nullptr, error);
  return *instance;
}

#define TC_LT(call)                                                                               \
  do {                                                                                            \
    int rc_ = api_->call;                                                                         \
    check(rc_ == 0, std::string("cuda: cublasLt ") + #call + " failed with status " +             \
                        std::to_string(rc_));                                                     \
  } while (0)

CublasLt::CublasLt() {
  std::string tried;
  DynamicLibrary lib = DynamicLibrary::open({"libcublasLt.so.13", "libcublasLt.so.12",
                                             Nvrtc::cudaHome() + "/lib64/libcublasLt.so.13",
                                             Nvrtc::cudaHome() + "/lib64/libcublasLt.so.12"},
                                            false, tried);
  check(bool(lib), "cuda: cuBLASLt is not available (tried " + tried + ")");
  static Api api;
  lib.bind(api.create, "cublasLtCreate");
  lib.bind(api.descCreate, "cublasLtMatmulDescCreate");
  lib.bind(api.descDestroy, "cublasLtMatmulDescDestroy");
  lib.bind(api.descSetAttribute, "cublasLtMatmulDescSetAttribute");
  lib.bind(api.layoutCreate, "cublasLtMatrixLayoutCreate");
  lib.bind(api.layoutDestroy, "cublasLtMatrixLayoutDestroy");
  lib.bind(api.layoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
  lib.bind(api.prefCreate, "cublasLtMatmulPreferenceCreate");
  lib.bind(api.prefDestroy, "cublasLtMatmulPreferenceDestroy");
  lib.bind(api.prefSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  lib.bind(api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
  lib.bind(api.matmul, "cublasLtMatmul");
  lib.bind(api.version, "cublasLtGetVersion");
  check(lib.missing().empty(), "cuda: cuBLASLt lacks " + lib.missing());
  api_ = &api;
  TC_LT(create(&handle_));
}

size_t CublasLt::version() const { return api_->version(); }

bool CublasLt::matmul(DevicePtr a, bool ta, DevicePtr b, bool tb, DevicePtr c, DType dtype,
                      const MatmulDims &dims, const GemmEpilogue &e, Stream stream,
                      DevicePtr workspace, GemmAlgorithm algorithm) const {
  // A weight shared by every batch (b broadcast: a linear layer over
  // [batch, sequence, features]) with a's batches stacked rows (not
  // transposed, contiguous): one GEMM of batches x M rows. The result's
  // batches stack the same way. Measured on an H100 (GPT-2 block, f32
  // 8192 x 768 @ 768 x 2304 with a bias epilogue, which ran as 8 GEMMs of
  // 1024 rows): 0.793 ms as 8 calls, torch's one addmm 0.661.
  MatmulDims d = dims;
  if (d.batches > 1 && !ta && !d.aVector && !d.bVector && uniformStride(d, false) == int64_t(0) &&
      uniformStride(d, true) == d.M * d.K) {
    d.M *= d.batches;
    d.batches = 1;
    d.batch.clear();
    d.aBatch.clear();
    d.bBatch.clear();
  }
  size_t workspaceBytes = kWorkspaceBytes;
  Driver &driver = Driver::get();
  size_t es = dtypeSize(dtype);
  if (algorithm.count)
    *algorithm.count = 1; // until the ranking is known
  if (d.M == 0 || d.N == 0 || d.batches == 0)
    return !e.biasGradient; // the caller sums b
  check(d.K > 0 || (!e.relu && !e.geluTanh && !e.bias),
        "cuda: a matmul with an epilogue over an empty inner dimension is not implemented");
  if (e.biasGradient && (d.batches != 1 || tb || d.bVector || d.aVector || (e.biasGradientOfA && !ta))) {
    GemmEpilogue plain = e; // cuBLASLt's bias gradient needs one plain 2-D b (and a^T)
    plain.biasGradient = 0;
    matmul(a, ta, b, tb, c, dtype, d, plain, stream, workspace, algorithm);
    return false;
  }
  if (d.K == 0) {
    if (algorithm.count)
      return true;
    driver.fill(c, 0, size_t(d.batches * d.M * d.N) * es, stream);
    if (e.biasGradient)
      driver.fill(e.biasGradient, 0, size_t(e.biasGradientOfA ? d.M : d.N) * es, stream);
    return true;
  }
  int type = dtype == DType::F32 ? kR32F : dtype == DType::F64 ? kR64F : dtype == DType::F16 ? kR16F : kR16BF;
  check(dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16,
        "cuda: integer matmul is not implemented yet");
  bool f64 = dtype == DType::F64;
  bool transA = ta && !d.aVector, transB = tb && !d.bVector;
  // Column-major C^T[N, M] = op(B)^T-view [N, K] x op(A)^T-view [K, M].
  uint64_t N = uint64_t(d.N), M = uint64_t(d.M), K = uint64_t(d.K);
  // The descriptors, destroyed on every way out (a failed call throws).
  struct Descriptors {
    const Api *api;
    void *desc = nullptr, *la = nullptr, *lb = nullptr, *lc = nullptr, *pref = nullptr;
    ~Descriptors() {
      if (pref)
        api->prefDestroy(pref);
      for (void *l : {la, lb, lc})
        if (l)
          api->layoutDestroy(l);
      if (desc)
        api->descDestroy(desc);
    }
  } handles{api_};
  void *&desc = handles.desc, *&la = handles.la, *&lb = handles.lb, *&lc = handles.lc, *&pref = handles.pref;
  int compute = f64 ? kCompute64F : dtype == DType::F32 && e.allowTf32 ? kCompute32FFastTf32 : kCompute32F;
  TC_LT(descCreate(&desc, compute, f64 ? kR64F : kR32F));
  // c^T is N x M column-major: a bias per column of c is one per row of
  // c^T, which is cuBLASLt's bias (broadcast along its columns).
  // The bias gradient: cuBLASLt's A is our b (N x K column-major), whose
  // sums over k (the K rows of b) are one per row of c^T: BGRADA. Its B is
  // our a (stored K x M, read transposed), whose sums over k are one per
  // column of c^T: BGRADB (apex's fused dense layer uses it so).
  int epilogue = (e.relu ? kEpilogueRelu : 0) | (e.geluTanh ? kEpilogueGelu : 0) | (e.bias ? kEpilogueBias : 0) |
                 (e.biasGradient ? (e.biasGradientOfA ? kEpilogueBgradB : kEpilogueBgradA) : 0);
  if (epilogue) {
    TC_LT(descSetAttribute(desc, kEpilogue, &epilogue, sizeof epilogue));
    DevicePtr vector = e.biasGradient ? e.biasGradient : e.bias;
    if (vector) {
      const void *p = reinterpret_cast<const void *>(vector);
      TC_LT(descSetAttribute(desc, kBiasPointer, &p, sizeof p));
    }
  }
  int opFirst = transB ? 1 : 0, opSecond = transA ? 1 : 0;
  TC_LT(descSetAttribute(desc, kTransA, &opFirst, sizeof opFirst));
  TC_LT(descSetAttribute(desc, kTransB, &opSecond, sizeof opSecond));
  // First operand: the stored b; second: the stored a.
  TC_LT(layoutCreate(&la, type, transB ? K : N, transB ? N : K, int64_t(transB ? K : N)));
  TC_LT(layoutCreate(&lb, type, transA ? M : K, transA ? K : M, int64_t(transA ? M : K)));
  TC_LT(layoutCreate(&lc, type, N, M, int64_t(N)));
  // Evenly spaced batches (attention's heads, broadcast weights) run as one
  // strided-batched GEMM instead of one call per batch. Not with a bias
  // vector (its per-batch stride would have to be set too).
  std::optional<int64_t> strideA = uniformStride(d, true), strideB = uniformStride(d, false);
  bool batched = d.batches > 1 && strideA && strideB && !e.bias && !e.biasGradient &&
                 d.batches <= 0x7fffffff;
  if (batched) {
    int32_t count = int32_t(d.batches);
    int64_t sb = *strideB, sa = *strideA, sc = int64_t(M * N);
    for (auto [layout, stride] : {std::pair{la, sb}, std::pair{lb, sa}, std::pair{lc, sc}}) {
      TC_LT(layoutSetAttribute(layout, kLayoutBatchCount, &count, sizeof count));
      TC_LT(layoutSetAttribute(layout, kLayoutBatchStride, &stride, sizeof stride));
    }
  }
  TC_LT(prefCreate(&pref));
  TC_LT(prefSetAttribute(pref, kMaxWorkspace, &workspaceBytes, sizeof workspaceBytes));
  // The chosen algorithm alone is copied out of the cache (the launch path).
  Heuristic chosen{};
  int found = 0, rc = 0;
  std::string key = std::to_string(type) + "," + std::to_string(compute) + "," + std::to_string(epilogue) +
                    "," + std::to_string(opFirst) + std::to_string(opSecond) + "," + std::to_string(N) +
                    "," + std::to_string(M) + "," + std::to_string(K) + "," +
                    (batched ? std::to_string(d.batches) + "," + std::to_string(*strideA) + "," +
                                   std::to_string(*strideB)
                             : "1");
  {
    std::lock_guard<std::mutex> lock(heuristicMutex);
    auto it = heuristics.find(key);
    if (it != heuristics.end()) {
      found = int(it->second.size());
      chosen = it->second[size_t(std::clamp(algorithm.rank, 0, found - 1))];
    }
  }
  if (!found) {
    std::vector<Heuristic> ranking(kMaxAlgorithms);
    rc = api_->heuristic(handle_, desc, la, lb, lc, lc, pref, kMaxAlgorithms, ranking.data(), &found);
    ranking.resize(size_t(rc == 0 ? std::max(found, 0) : 0));
    if (rc == 0 && found > 0) {
      chosen = ranking[size_t(std::clamp(algorithm.rank, 0, found - 1))];
      std::lock_guard<std::mutex> lock(heuristicMutex);
      heuristics.emplace(key, std::move(ranking));
    }
  }
  if (e.biasGradient && (rc != 0 || found == 0)) {
    GemmEpilogue plain = e;
    plain.biasGradient = 0;
    matmul(a, ta, b, tb, c, dtype, d, plain, stream, workspace, algorithm);
    return false;
  }
  check(rc == 0, "cuda: cublasLtMatmulAlgoGetHeuristic failed with status " + std::to_string(rc));
  check(found > 0, "cuda: cuBLASLt found no algorithm for this matmul");
  if (algorithm.count) {
    *algorithm.count = found;
    return true;
  }
  const Heuristic &h = chosen;
  float one32 = 1, zero32 = 0;
  double one64 = 1, zero64 = 0;
  const void *alpha = f64 ? static_cast<const void *>(&one64) : &one32;
  const void *beta = f64 ? static_cast<const void *>(&zero64) : &zero32;
  for (int64_t bi = 0; bi < (batched ? 1 : d.batches); ++bi) {
    DevicePtr pa = a + DevicePtr(d.aOffset(bi)) * es, pb = b + DevicePtr(d.bOffset(bi)) * es;
    DevicePtr pc = c + DevicePtr(bi * d.M * d.N) * es;
    TC_LT(matmul(handle_, desc, alpha, reinterpret_cast<void *>(pb), la, reinterpret_cast<void *>(pa),
                 lb, beta, reinterpret_cast<void *>(pc), lc, reinterpret_cast<void *>(pc), lc, h.algo,
                 reinterpret_cast<void *>(workspace), workspaceBytes, stream));
  }
  return true;
}

} // namespace tensorc::cuda
