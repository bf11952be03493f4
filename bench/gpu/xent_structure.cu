// How fast can cross-entropy's fused forward + backward (4096 x 50304 f32
// logits: per row the log-sum-exp, the loss and the gradient) run, and
// which kernel structure gets there? Hand-written variants of the one row
// loop the chain kernels generate, measured beside a device-to-device copy
// of the same bytes (the floor: logits read once, gradient written once).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o xent_structure xent_structure.cu && ./xent_structure
//
// Variants (BLOCK threads, a row split across CLUSTER blocks, each caching
// its part of the row in shared memory):
//   whole   the part copied to shared memory (TMA), then the log-sum-exp and
//           the gradient from it (the generated chain's order)
//   chunked the copy in 16 KiB pieces, each on its own mbarrier: the
//           log-sum-exp takes each piece as it lands (copy and compute overlap)
//   through the log-sum-exp reads device memory and leaves what it read in
//           shared memory for the gradient
//   twice   no cache: the gradient reads the row again (from L2)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                                  \
  do {                                                                                            \
    cudaError_t e = (x);                                                                          \
    if (e != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));      \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

constexpr int ROWS = 4096, COLS = 50304;
enum Mode { WHOLE, CHUNKED, THROUGH, TWICE };
constexpr int CHUNK = 4096;  // floats per mbarrier piece (16 KiB)

__device__ __forceinline__ void lseCombine(float &m, float &s, float x) {
  const float n = fmaxf(m, x);
  s = s * expf(m - n) + expf(x - n);
  m = n;
}
__device__ __forceinline__ void lseCombine4(float &m, float &s, float4 v) {
  const float n = fmaxf(fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)), m);
  s = s * expf(m - n) + (expf(v.x - n) + expf(v.y - n)) + (expf(v.z - n) + expf(v.w - n));
  m = n;
}
__device__ __forceinline__ void lseMerge(float &m, float &s, float om, float os) {
  const float n = fmaxf(m, om);
  if (n == -INFINITY) return;
  s = s * expf(m - n) + os * expf(om - n);
  m = n;
}
__device__ __forceinline__ unsigned smemAddr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void clusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float clusterLoad(const float *p, unsigned rank) {
  unsigned remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smemAddr(p)), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
__device__ __forceinline__ void waitBarrier(unsigned bar) {
  asm volatile("{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               " @!done bra WAIT;\n}\n" ::"r"(bar)
               : "memory");
}

template <int BLOCK, int CLUSTER, Mode MODE>
__global__ void __launch_bounds__(BLOCK) xent(const float *__restrict__ logits, const long long *__restrict__ target,
                                              float *__restrict__ grad, float *__restrict__ rowLoss, float scale) {
  constexpr int PART = ((COLS + CLUSTER - 1) / CLUSTER + 3) / 4 * 4;
  constexpr int PIECES = (PART + CHUNK - 1) / CHUNK;
  extern __shared__ __align__(16) float cache[];
  __shared__ __align__(8) unsigned long long bars[PIECES];
  __shared__ float warpM[BLOCK / 32], warpS[BLOCK / 32];
  __shared__ float partM, partS;
  const int row = blockIdx.x / CLUSTER;
  const unsigned rank = blockIdx.x % CLUSTER;
  const int lo = min((int)rank * PART, COLS), hi = min(lo + PART, COLS), n = hi - lo;
  const float *src = logits + (long long)row * COLS + lo;
  float *dst = grad + (long long)row * COLS + lo;
  const int quads = n / 4;  // COLS % 4 == 0 and PART % 4 == 0
  const float4 *src4 = reinterpret_cast<const float4 *>(src);
  float4 *cache4 = reinterpret_cast<float4 *>(cache);

  if (MODE == WHOLE || MODE == CHUNKED) {
    if (threadIdx.x == 0) {
      for (int p = 0; p < PIECES; ++p) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smemAddr(&bars[p])));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int p = 0; p < PIECES; ++p) {
        const int at = p * CHUNK, size = min(CHUNK, n - at) * 4;
        const unsigned bar = smemAddr(&bars[p]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(size) : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                smemAddr(cache + at)),
            "l"(src + at), "r"(size), "r"(bar)
            : "memory");
      }
    }
    if (MODE == WHOLE)
      for (int p = 0; p < PIECES; ++p) waitBarrier(smemAddr(&bars[p]));
  }

  float m = -INFINITY, s = 0.f;
  if (MODE == WHOLE) {
    for (int q = threadIdx.x; q < quads; q += BLOCK) lseCombine4(m, s, cache4[q]);
  } else if (MODE == CHUNKED) {
    for (int p = 0; p < PIECES; ++p) {
      waitBarrier(smemAddr(&bars[p]));
      const int end = min((p + 1) * CHUNK, n) / 4;
      for (int q = p * CHUNK / 4 + threadIdx.x; q < end; q += BLOCK) lseCombine4(m, s, cache4[q]);
    }
  } else {
    int q = threadIdx.x;
    for (; q + BLOCK < quads; q += 2 * BLOCK) {
      const float4 a = src4[q], b = src4[q + BLOCK];
      if (MODE == THROUGH) cache4[q] = a, cache4[q + BLOCK] = b;
      lseCombine4(m, s, a);
      lseCombine4(m, s, b);
    }
    if (q < quads) {
      const float4 a = src4[q];
      if (MODE == THROUGH) cache4[q] = a;
      lseCombine4(m, s, a);
    }
  }
  for (int o = 16; o > 0; o >>= 1) lseMerge(m, s, __shfl_xor_sync(~0u, m, o), __shfl_xor_sync(~0u, s, o));
  if (threadIdx.x % 32 == 0) warpM[threadIdx.x / 32] = m, warpS[threadIdx.x / 32] = s;
  __syncthreads();
  m = -INFINITY, s = 0.f;
  for (int w = 0; w < BLOCK / 32; ++w) lseMerge(m, s, warpM[w], warpS[w]);
  if (CLUSTER > 1) {
    if (threadIdx.x == 0) partM = m, partS = s;
    clusterSync();
    m = -INFINITY, s = 0.f;
    for (unsigned c = 0; c < CLUSTER; ++c) lseMerge(m, s, clusterLoad(&partM, c), clusterLoad(&partS, c));
  }
  const float lse = m + logf(s);
  const long long t = target[row];
  if (rank == 0 && threadIdx.x == 0) rowLoss[row] = lse - logits[(long long)row * COLS + t];
  float4 *dst4 = reinterpret_cast<float4 *>(dst);
  for (int q = threadIdx.x; q < quads; q += BLOCK) {
    const float4 x = MODE == TWICE ? src4[q] : cache4[q];
    const int j = lo + 4 * q;
    float4 g;
    g.x = (expf(x.x - lse) - (j == t)) * scale;
    g.y = (expf(x.y - lse) - (j + 1 == t)) * scale;
    g.z = (expf(x.z - lse) - (j + 2 == t)) * scale;
    g.w = (expf(x.w - lse) - (j + 3 == t)) * scale;
    dst4[q] = g;
  }
  if (CLUSTER > 1) clusterSync();  // the others read partM/partS of this block
}

// The reference: one block per row, three passes over device memory, the
// log-sum-exp in double.
__global__ void reference(const float *logits, const long long *target, float *grad, float *rowLoss, float scale) {
  const int row = blockIdx.x;
  const float *x = logits + (long long)row * COLS;
  __shared__ double red[256];
  double mx = -INFINITY;
  for (int j = threadIdx.x; j < COLS; j += 256) mx = fmax(mx, (double)x[j]);
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (threadIdx.x < o) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + o]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  double s = 0;
  for (int j = threadIdx.x; j < COLS; j += 256) s += exp((double)x[j] - mx);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o];
    __syncthreads();
  }
  const double lse = mx + log(red[0]);
  const long long t = target[row];
  if (threadIdx.x == 0) rowLoss[row] = (float)(lse - x[t]);
  for (int j = threadIdx.x; j < COLS; j += 256) grad[(long long)row * COLS + j] = (float)((exp(x[j] - lse) - (j == t)) * scale);
}

__global__ void fill(float *x, long long n, unsigned seed) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    x[i] = (h / 4294967296.0f) * 8.f - 4.f;
  }
}
__global__ void poison(float *x, long long n) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += (long long)gridDim.x * 256) x[i] = NAN;
}

struct Buffers {
  float *logits, *grad, *ref, *loss, *refLoss;
  long long *target;
};

template <typename F> float medianMs(F &&launch, int iters = 30) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) launch();
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int BLOCK, int CLUSTER, Mode MODE> void run(const char *name, Buffers &b, float floorMs) {
  constexpr int PART = ((COLS + CLUSTER - 1) / CLUSTER + 3) / 4 * 4;
  const int smem = MODE == TWICE ? 0 : PART * 4;
  auto kernel = xent<BLOCK, CLUSTER, MODE>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (CLUSTER > 1) CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(ROWS * CLUSTER);
  config.blockDim = dim3(BLOCK);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  const float scale = 1.f / ROWS;
  auto launch = [&] { CHECK(cudaLaunchKernelEx(&config, kernel, (const float *)b.logits, (const long long *)b.target, b.grad, b.loss, scale)); };
  const long long total = (long long)ROWS * COLS;
  poison<<<1024, 256>>>(b.grad, total);
  launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> g(total), r(total), l(ROWS), rl(ROWS);
  CHECK(cudaMemcpy(g.data(), b.grad, total * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(r.data(), b.ref, total * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(l.data(), b.loss, ROWS * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(rl.data(), b.refLoss, ROWS * 4, cudaMemcpyDeviceToHost));
  double err = 0, errLoss = 0;
  for (long long i = 0; i < total; ++i) err = std::isnan(g[i]) ? INFINITY : std::max(err, (double)std::fabs(g[i] - r[i]) * ROWS);
  for (int i = 0; i < ROWS; ++i) errLoss = std::max(errLoss, (double)std::fabs(l[i] - rl[i]) / std::fabs(rl[i]));
  int active = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&active, kernel, BLOCK, smem));
  const float ms = medianMs(launch);
  std::printf("%-24s b%-5d k%d blocks/SM %d  %.4f ms  %.2fx floor  grad err %.1e  loss err %.1e\n", name, BLOCK,
              CLUSTER, active, ms, ms / floorMs, err, errLoss);
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  Buffers b;
  const long long total = (long long)ROWS * COLS;
  CHECK(cudaMalloc(&b.logits, total * 4));
  CHECK(cudaMalloc(&b.grad, total * 4));
  CHECK(cudaMalloc(&b.ref, total * 4));
  CHECK(cudaMalloc(&b.loss, ROWS * 4));
  CHECK(cudaMalloc(&b.refLoss, ROWS * 4));
  CHECK(cudaMalloc(&b.target, ROWS * 8));
  fill<<<1024, 256>>>(b.logits, total, 12345u);
  std::vector<long long> t(ROWS);
  for (int i = 0; i < ROWS; ++i) t[i] = (long long)((i * 7919LL + 13) % COLS);
  CHECK(cudaMemcpy(b.target, t.data(), ROWS * 8, cudaMemcpyHostToDevice));
  reference<<<ROWS, 256>>>(b.logits, b.target, b.ref, b.refLoss, 1.f / ROWS);
  CHECK(cudaDeviceSynchronize());
  const float floorMs = medianMs([&] { CHECK(cudaMemcpyAsync(b.grad, b.logits, total * 4, cudaMemcpyDeviceToDevice)); });
  std::printf("copy of the logits (the floor): %.4f ms, %.2f TB/s\n", floorMs, 2.0 * total * 4 / floorMs / 1e9);
  run<512, 2, WHOLE>("whole", b, floorMs);
  run<512, 2, CHUNKED>("chunked", b, floorMs);
  run<512, 2, THROUGH>("through", b, floorMs);
  run<512, 2, TWICE>("twice", b, floorMs);
  run<256, 4, WHOLE>("whole", b, floorMs);
  run<256, 4, CHUNKED>("chunked", b, floorMs);
  run<256, 4, THROUGH>("through", b, floorMs);
  run<512, 4, CHUNKED>("chunked", b, floorMs);
  run<1024, 1, CHUNKED>("chunked", b, floorMs);
  run<1024, 1, THROUGH>("through", b, floorMs);
  run<256, 8, CHUNKED>("chunked", b, floorMs);
  run<128, 8, CHUNKED>("chunked", b, floorMs);
  run<256, 8, TWICE>("twice", b, floorMs);
  return 0;
}
