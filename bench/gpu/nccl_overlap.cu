// How much an NCCL collective running beside compute slows that compute, per
// CTA policy (ncclConfig_t.CTAPolicy) and buffer kind: an all_reduce of DDP's
// 13.5 MiB of bf16 gradients in cudaMalloc memory, in a symmetric window
// (ncclMemAlloc + ncclCommWindowRegister), staged through a window with two
// copies, or as an all_gather into a window plus one add kernel. 2 processes
// (fork), 1 GPU each; WORK=mixed|fma|copy picks the compute beside it. The
// measurement behind the runtime's windows (docs/sharding.md "Symmetric
// memory"; results/h100x2-2026-11-27-session34-nccl-overlap.txt).
// Build and run on the GPU machine, NCCL from PyTorch's wheel:
//   LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], 'lib'))")
//   nvcc -O2 -arch=sm_90 nccl_overlap.cu -I$LIB/../include -L$LIB -l:libnccl.so.2 -Xlinker -rpath=$LIB -o nccl_overlap
//   WORK=mixed ./nccl_overlap
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <nccl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include <algorithm>
#include <string>

#define CK(x) do { cudaError_t e = (x); if (e) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r) { printf("NCCL %s at %d (%s)\n", ncclGetErrorString(r), __LINE__, #x); exit(1); } } while (0)

__global__ void fmaWork(float *a, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = x * 0.5f + 1.f;
  for (int k = 0; k < iters; ++k) { x = fmaf(x, 0.999f, y); y = fmaf(y, 1.0001f, x * 1e-3f); }
  a[i] = x + y;
}
__global__ void copyWork(const float4 *s, float4 *d, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) d[i] = s[i];
}
__global__ void addHalves(const __nv_bfloat16 *g, __nv_bfloat16 *out, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(__bfloat162float(g[i]) + __bfloat162float(g[n + i]));
}

struct Work {
  float *fa; float4 *cs, *cd; int fn; long cn;
  void run(cudaStream_t s) {
    const char *kind = getenv("WORK");
    bool fma = !kind || std::string(kind) != "copy", copy = !kind || std::string(kind) != "fma";
    for (int k = 0; k < 50; ++k) {
      if (fma) fmaWork<<<(fn + 255) / 256, 256, 0, s>>>(fa, fn, 64);
      if (copy) copyWork<<<132 * 4, 256, 0, s>>>(cs, cd, cn);
    }
  }
};

static float ms(cudaEvent_t a, cudaEvent_t b) { float t; cudaEventElapsedTime(&t, a, b); return t; }

int child(int rank, ncclUniqueId id) {
  CK(cudaSetDevice(rank));
  ncclComm_t world;
  NK(ncclCommInitRank(&world, 2, id, rank));
  int version; ncclGetVersion(&version);
  if (!rank) printf("nccl %d\n", version);
  cudaStream_t cs, ms_;
  CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  int lo, hi; cudaDeviceGetStreamPriorityRange(&lo, &hi);
  CK(cudaStreamCreateWithPriority(&ms_, cudaStreamNonBlocking, hi));
  Work w;
  w.fn = 132 * 2048; w.cn = (8 << 20) / 4;
  CK(cudaMalloc(&w.fa, w.fn * 4)); CK(cudaMemset(w.fa, 0, w.fn * 4));
  CK(cudaMalloc(&w.cs, w.cn * 16)); CK(cudaMalloc(&w.cd, w.cn * 16)); CK(cudaMemset(w.cs, 0, w.cn * 16));
  const long count = 7077888; // bf16 elements: 13.5 MiB, DDP's gradients
  const size_t bytes = count * 2;
  cudaEvent_t e0, e1, e2, e3;
  cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventCreate(&e2); cudaEventCreate(&e3);
  float *flag; CK(cudaMalloc(&flag, 4));
  auto barrier = [&] { NK(ncclAllReduce(flag, flag, 1, ncclFloat, ncclSum, world, cs)); CK(cudaStreamSynchronize(cs)); };
  const char *policies[] = {"default", "efficiency", "zero"};
  for (int policy = 0; policy < 3; ++policy) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.CTAPolicy = policy;
    ncclComm_t comm;
    NK(ncclCommSplit(world, 0, rank, &comm, &config));
    for (int mode = 0; mode < 4; ++mode) {
      // 0: all_reduce in cudaMalloc memory; 1: all_reduce in a symmetric
      // window; 2: all_gather into a window (2x) + one add kernel.
      __nv_bfloat16 *buf = nullptr, *win = nullptr; ncclWindow_t handle = nullptr;
      if (mode == 0) CK(cudaMalloc(&buf, bytes));
      else {
        size_t wbytes = mode != 2 ? bytes : 2 * bytes;
        wbytes = (wbytes + (2 << 20) - 1) / (2 << 20) * (2 << 20);
        NK(ncclMemAlloc((void **)&win, wbytes));
        NK(ncclCommWindowRegister(comm, win, wbytes, &handle, NCCL_WIN_COLL_SYMMETRIC));
        buf = win;
        if (mode >= 2) CK(cudaMalloc(&buf, bytes));
      }
      std::vector<float> cAlone, collAlone, both, collBeside;
      std::vector<float> ref(4);
      std::vector<__nv_bfloat16> host(count);
      for (long i = 0; i < count; ++i) host[i] = __float2bfloat16(float((i % 17) + rank));
      auto fill = [&] {
        CK(cudaMemcpy(mode == 2 ? win + rank * count : buf, host.data(), bytes, cudaMemcpyHostToDevice));
        NK(ncclAllReduce(flag, flag, 1, ncclFloat, ncclSum, world, cs)); // barrier
        CK(cudaStreamSynchronize(cs));
      };
      auto coll = [&](cudaStream_t s) {
        if (mode < 2) NK(ncclAllReduce(buf, buf, count, ncclBfloat16, ncclSum, comm, s));
        else if (mode == 3) {
          CK(cudaMemcpyAsync(win, buf, bytes, cudaMemcpyDeviceToDevice, s));
          NK(ncclAllReduce(win, win, count, ncclBfloat16, ncclSum, comm, s));
          CK(cudaMemcpyAsync(buf, win, bytes, cudaMemcpyDeviceToDevice, s));
        } else {
          NK(ncclAllGather(win + rank * count, win, count, ncclBfloat16, comm, s));
          addHalves<<<132, 512, 0, s>>>(win, buf, count);
        }
      };
      bool ok = true;
      for (int rep = 0; rep < 12; ++rep) {
        fill();
        CK(cudaDeviceSynchronize());
        // compute alone
        cudaEventRecord(e0, cs); w.run(cs); cudaEventRecord(e1, cs); CK(cudaStreamSynchronize(cs));
        float a = ms(e0, e1);
        barrier();
        // collective alone
        cudaEventRecord(e0, ms_); coll(ms_); cudaEventRecord(e1, ms_); CK(cudaStreamSynchronize(ms_));
        float c = ms(e0, e1);
        // check sum: element i = 2*(i%17) + 1
        std::vector<__nv_bfloat16> h(4);
        CK(cudaMemcpy(h.data(), buf + 1000, 8, cudaMemcpyDeviceToHost));
        for (int k = 0; k < 4; ++k) ok &= __bfloat162float(h[k]) == float(2 * ((1000 + k) % 17) + 1);
        fill();
        CK(cudaDeviceSynchronize());
        // together: collective starts with the compute
        cudaEventRecord(e0, cs); cudaStreamWaitEvent(ms_, e0);
        coll(ms_); cudaEventRecord(e2, ms_);
        w.run(cs); cudaEventRecord(e1, cs);
        cudaStreamWaitEvent(cs, e2); cudaEventRecord(e3, cs);
        CK(cudaDeviceSynchronize());
        if (rep >= 2) { cAlone.push_back(a); collAlone.push_back(c); both.push_back(ms(e0, e1)); collBeside.push_back(ms(e0, e2)); }
      }
      auto med = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
      if (!rank)
        printf("%s policy %-10s mode %-22s compute %.3f ms  collective %.1f us (beside compute %.1f us)  compute beside it %.3f ms (+%.1f%%)  %s\n",
               getenv("WORK") ? getenv("WORK") : "mixed", policies[policy], mode == 0 ? "all_reduce cudaMalloc" : mode == 1 ? "all_reduce window" : mode == 3 ? "staged via window" : "all_gather window+add",
               med(cAlone), 1000 * med(collAlone), 1000 * med(collBeside), med(both), 100 * (med(both) / med(cAlone) - 1), ok ? "sum ok" : "WRONG SUM");
      fflush(stdout);
      CK(cudaDeviceSynchronize());
      if (handle) NK(ncclCommWindowDeregister(comm, handle));
      if (win) NK(ncclMemFree(win));
      if (mode != 1) CK(cudaFree(buf));
    }
  }
  return 0;
}

int main() {
  int fds[2];
  if (pipe(fds)) return 1;
  pid_t p = fork();
  ncclUniqueId id;
  if (p == 0) {
    if (read(fds[0], &id, sizeof id) != sizeof id) return 1;
    return child(1, id);
  }
  NK(ncclGetUniqueId(&id));
  if (write(fds[1], &id, sizeof id) != sizeof id) return 1;
  int r = child(0, id);
  int status = 0;
  waitpid(p, &status, 0);
  return r || status;
}
