// Which NCCL groups of collectives on symmetric-window buffers give wrong
// sums? tensorc's MLP DDP step did with its gradient all_reduces in one
// group (docs/sharding.md "Symmetric memory"). Answer (2x H200, session 35):
// NCCL 2.28.3 (the machine's system libnccl, which `tensorc run` loaded)
// misses 18432-19968 elements of the groups that hold an all_reduce of
// 100352 floats beside one of 1 float, in every round below; NCCL 2.28.9
// (PyTorch's wheel) gets every case right. So tensorc groups window
// collectives only on 2.28.9+ (Nccl::groupsWindowCollectives). Rounds:
// inputs ready; written by a slow kernel just queued on the same stream;
// written on a compute stream, the group on a high-priority stream after an
// event (as in tensorc's step). Build like nccl_overlap.cu:
//   nvcc -O2 -arch=sm_90 nccl_groups.cu -I$LIB/../include -L$LIB -l:libnccl.so.2 -Xlinker -rpath=$LIB -o nccl_groups
// and choose the NCCL to test with LD_LIBRARY_PATH.
#include <cuda_runtime.h>
#include <nccl.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
#define NK(x) do { ncclResult_t r = (x); if (r) { printf("NCCL %s at %d\n", ncclGetErrorString(r), __LINE__); exit(1); } } while (0)

struct Buf { float *p; size_t n; };

// Writes the test pattern after spinning ~2 ms: the collectives queued
// behind it on the same stream must wait for it.
__global__ void slowFill(float *p, size_t n, int rank) {
  long long start = clock64();
  while (clock64() - start < 4000000) {}
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = float(i % 13 + rank);
}

int child(int rank, ncclUniqueId id) {
  CK(cudaSetDevice(rank));
  ncclComm_t comm;
  NK(ncclCommInitRank(&comm, 2, id, rank));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  // Round 3 runs as tensorc's step does: the inputs' kernel on a compute
  // stream, the group on a high-priority communication stream after an event.
  cudaStream_t compute; CK(cudaStreamCreate(&compute));
  int lo, hi; CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t comm_s; CK(cudaStreamCreateWithPriority(&comm_s, cudaStreamNonBlocking, hi));
  cudaEvent_t ready; CK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  int mode = 0;
  const size_t W = 32 << 20;
  auto window = [&]() { void *p; ncclWindow_t w; NK(ncclMemAlloc(&p, W)); NK(ncclCommWindowRegister(comm, p, W, &w, NCCL_WIN_COLL_SYMMETRIC)); return (float *)p; };
  float *plain; CK(cudaMalloc(&plain, W));
  bool pending = false; // fill with a slow kernel on the stream, no synchronization
  auto run = [&](const char *name, std::vector<Buf> bufs, bool inPlace) {
    for (auto &b : bufs) CK(cudaMemset(b.p, 0xff, b.n * 4));
    CK(cudaDeviceSynchronize());
    cudaStream_t cs = mode == 2 ? comm_s : s;
    if (mode == 2) {
      for (auto &b : bufs) slowFill<<<132, 256, 0, compute>>>(b.p, b.n, rank);
      CK(cudaEventRecord(ready, compute));
      CK(cudaStreamWaitEvent(comm_s, ready, 0));
    } else if (pending) for (auto &b : bufs) slowFill<<<132, 256, 0, s>>>(b.p, b.n, rank);
    else for (auto &b : bufs) { std::vector<float> h(b.n); for (size_t i = 0; i < b.n; ++i) h[i] = float(i % 13 + rank); CK(cudaMemcpy(b.p, h.data(), b.n * 4, cudaMemcpyHostToDevice)); }
    float *outs[8];
    for (size_t k = 0; k < bufs.size(); ++k) outs[k] = inPlace ? bufs[k].p : bufs[k].p + bufs[k].n; // out-of-place: right after
    NK(ncclGroupStart());
    for (size_t k = 0; k < bufs.size(); ++k) NK(ncclAllReduce(bufs[k].p, outs[k], bufs[k].n, ncclFloat, ncclSum, comm, cs));
    NK(ncclGroupEnd());
    CK(cudaDeviceSynchronize());
    size_t bad = 0;
    for (size_t k = 0; k < bufs.size(); ++k) { std::vector<float> h(bufs[k].n); CK(cudaMemcpy(h.data(), outs[k], bufs[k].n * 4, cudaMemcpyDeviceToHost)); for (size_t i = 0; i < bufs[k].n; ++i) bad += h[i] != float(2 * (i % 13) + 1); }
    if (!rank) printf("%-58s %s\n", name, bad ? ("WRONG (" + std::to_string(bad) + " elements)").c_str() : "ok");
  };
  for (int round = 0; round < 3; ++round) {
    pending = round >= 1;
    mode = round;
    if (!rank) printf("== inputs %s\n", round == 2 ? "written by a slow kernel on another stream, group on a high-priority stream after an event" : pending ? "written by a slow kernel just queued on the stream" : "ready (synchronous copies)");
    // The MLP's DDP step: loss, grad_b2, grad_w2, grad_b1, grad_w1, each in its own window, one group.
    std::vector<Buf> mlp;
    for (size_t n : {size_t(1), size_t(10), size_t(1280), size_t(128), size_t(100352)}) mlp.push_back({window(), n});
    run("mlp sizes 1,10,1280,128,100352, five windows, in place", mlp, true);
    std::vector<Buf> same;
    float *w = window(); size_t off = 0;
    for (size_t n : {size_t(1), size_t(10), size_t(1280), size_t(128), size_t(100352)}) { same.push_back({w + off, n}); off += 2 * n + 64; }
    run("mlp sizes, one window, in place", same, true);
    run("mlp sizes, one window, out of place", same, false);
    run("sizes 1 and 10, two windows", {{window(), 1}, {window(), 10}}, true);
    run("sizes 1 and 100352, two windows", {{window(), 1}, {window(), 100352}}, true);
    run("sizes 10 and 1280, two windows", {{window(), 10}, {window(), 1280}}, true);
    run("single op 100352, window", {{window(), 100352}}, true);
    run("single op 100352, plain", {{plain, 100352}}, true);
    run("group 128+100352, plain", {{plain, 128}, {plain + (1 << 20), 100352}}, true);
    run("group window 100352 + plain 128", {{window(), 100352}, {plain, 128}}, true);
    run("group plain 128 + window 100352", {{plain, 128}, {window(), 100352}}, true);
    // out of place from a window into plain memory (a step's output tensor), beside window-only ones
    {
      float *a = window(), *b = window();
      auto mixed = [&](const char *name, bool first) {
        for (float *q : {a, b}) CK(cudaMemset(q, 0xff, 100352 * 8));
        CK(cudaMemset(plain, 0xff, 100352 * 8));
        std::vector<float> h(100352); for (size_t i = 0; i < h.size(); ++i) h[i] = float(i % 13 + rank);
        CK(cudaMemcpy(a, h.data(), h.size() * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(b, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
        NK(ncclGroupStart());
        if (first) NK(ncclAllReduce(a, plain, 100352, ncclFloat, ncclSum, comm, s));
        NK(ncclAllReduce(b, b + 100352, 100352, ncclFloat, ncclSum, comm, s));
        if (!first) NK(ncclAllReduce(a, plain, 100352, ncclFloat, ncclSum, comm, s));
        NK(ncclGroupEnd());
        CK(cudaDeviceSynchronize());
        size_t bad = 0;
        for (float *q : {plain, b + 100352}) { CK(cudaMemcpy(h.data(), q, h.size() * 4, cudaMemcpyDeviceToHost)); for (size_t i = 0; i < h.size(); ++i) bad += h[i] != float(2 * (i % 13) + 1); }
        if (!rank) printf("%-58s %s\n", name, bad ? ("WRONG (" + std::to_string(bad) + " elements)").c_str() : "ok");
      };
      mixed("group window->plain, window->window", true);
      mixed("group window->window, window->plain", false);
    }
  }
  return 0;
}

int main() {
  int fds[2]; if (pipe(fds)) return 1;
  pid_t p = fork(); ncclUniqueId id;
  if (p == 0) { if (read(fds[0], &id, sizeof id) != sizeof id) return 1; return child(1, id); }
  NK(ncclGetUniqueId(&id)); if (write(fds[1], &id, sizeof id) != sizeof id) return 1;
  int r = child(0, id); int st = 0; waitpid(p, &st, 0); return r || st;
}
