// Which NCCL groups of collectives on symmetric-window buffers give wrong
// sums? tensorc's MLP DDP step did with its four gradient all_reduces in one
// group (docs/sharding.md "Symmetric memory"); alone, with inputs ready,
// every group here was right (2x H200, NCCL 2.28.9, session 34). The second
// round (inputs written by a slow kernel queued just before the group, as in
// tensorc's step) was not run yet. Build like nccl_overlap.cu:
//   nvcc -O2 -arch=sm_90 nccl_groups.cu -I$LIB/../include -L$LIB -l:libnccl.so.2 -Xlinker -rpath=$LIB -o nccl_groups
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
  const size_t W = 32 << 20;
  auto window = [&]() { void *p; ncclWindow_t w; NK(ncclMemAlloc(&p, W)); NK(ncclCommWindowRegister(comm, p, W, &w, NCCL_WIN_COLL_SYMMETRIC)); return (float *)p; };
  float *w1 = window(), *w2 = window(), *w3 = window();
  float *plain; CK(cudaMalloc(&plain, W));
  bool pending = false; // fill with a slow kernel on the stream, no synchronization
  auto run = [&](const char *name, std::vector<Buf> bufs, bool inPlace) {
    for (auto &b : bufs) CK(cudaMemset(b.p, 0xff, b.n * 4));
    CK(cudaDeviceSynchronize());
    if (pending) for (auto &b : bufs) slowFill<<<132, 256, 0, s>>>(b.p, b.n, rank);
    else for (auto &b : bufs) { std::vector<float> h(b.n); for (size_t i = 0; i < b.n; ++i) h[i] = float(i % 13 + rank); CK(cudaMemcpy(b.p, h.data(), b.n * 4, cudaMemcpyHostToDevice)); }
    float *outs[8];
    for (size_t k = 0; k < bufs.size(); ++k) outs[k] = inPlace ? bufs[k].p : bufs[k].p + bufs[k].n; // out-of-place: right after
    NK(ncclGroupStart());
    for (size_t k = 0; k < bufs.size(); ++k) NK(ncclAllReduce(bufs[k].p, outs[k], bufs[k].n, ncclFloat, ncclSum, comm, s));
    NK(ncclGroupEnd());
    CK(cudaStreamSynchronize(s));
    size_t bad = 0;
    for (size_t k = 0; k < bufs.size(); ++k) { std::vector<float> h(bufs[k].n); CK(cudaMemcpy(h.data(), outs[k], bufs[k].n * 4, cudaMemcpyDeviceToHost)); for (size_t i = 0; i < bufs[k].n; ++i) bad += h[i] != float(2 * (i % 13) + 1); }
    if (!rank) printf("%-58s %s\n", name, bad ? ("WRONG (" + std::to_string(bad) + " elements)").c_str() : "ok");
  };
  for (int round = 0; round < 2; ++round) {
    pending = round == 1;
    if (!rank) printf("== inputs %s\n", pending ? "written by a slow kernel just queued on the stream" : "ready (synchronous copies)");
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
  }
  return 0;
  for (size_t small : {size_t(128), size_t(100352)}) for (size_t big : {size_t(100352), size_t(1 << 20)}) for (bool inPlace : {true, false}) {
    std::string tag = std::to_string(small) + "+" + std::to_string(big) + (inPlace ? " in place" : " out of place");
    run(("one window, two buffers " + tag).c_str(), {{w1, small}, {w1 + (2 << 20), big}}, inPlace);
    run(("two windows " + tag).c_str(), {{w2, small}, {w3, big}}, inPlace);
    run(("window + plain " + tag).c_str(), {{w2, small}, {plain, big}}, inPlace);
    run(("single op, window " + tag).c_str(), {{w3, big}}, inPlace);
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
