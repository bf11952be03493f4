// Chain kernels of the CUDA backend: a chain of nests over the same rows
// (softmax's max, sum and normalize; a layer norm's passes) runs as one
// kernel, one row per block, each nest's row template in turn.
#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/PointPrinter.h"

#include <sstream>

namespace tensorc::codegen::cuda {

namespace {
int64_t alignedTo16(int64_t bytes) { return (bytes + 15) / 16 * 16; }
} // namespace

// Chain kernels' pointers are not __restrict__: later nests read what
// earlier ones wrote (see the row template).
std::vector<KernelVariant> CudaSourceBuilder::addChain(const std::string &name,
                                                     const std::vector<ChainedNest> &nests,
                                                     const std::vector<std::string> &symbols,
                                                     const Dim &rows,
                                                     const std::vector<RowCacheOperand> &cache,
                                                     int64_t rowWork) {
  std::ostringstream os;
  std::string params;
  // Each nest's call, with the pointer name of each parameter left to fill
  // in (p<k>, or the row cache's q<k>).
  std::vector<std::vector<size_t>> nestParams(nests.size());
  size_t k = 0;
  for (size_t n = 0; n < nests.size(); ++n)
    for (size_t o = 0; o < nests[n].operands.size(); ++o, ++k) {
      params += (params.empty() ? "" : ", ") + std::string(o ? "const " : "") +
                storageCType(nests[n].operands[o]) + " *p" + std::to_string(k);
      nestParams[n].push_back(k);
    }
  std::string symbolArgs;
  for (size_t i = 0; i < symbols.size(); ++i)
    symbolArgs += ", s" + std::to_string(i);
  auto body = [&](bool cached) {
    std::vector<bool> fromCache(k, false);
    std::string c;
    if (cached) {
      // Each cached operand's row: copied into shared memory once, then every
      // nest reads it there through a pointer offset by the row's start, so
      // that its own indexing (row * inner + column) lands in the copy.
      c += "  extern __shared__ __align__(16) unsigned char tc_row_cache[];\n";
      int64_t offset = 0;
      for (size_t j = 0; j < cache.size(); ++j) {
        const RowCacheOperand &r = cache[j];
        std::string t = storageCType(r.dtype), inner = std::to_string(r.inner) + "LL";
        std::string cj = "c" + std::to_string(j);
        c += "  " + t + " *" + cj + " = reinterpret_cast<" + t + " *>(tc_row_cache + " + std::to_string(offset) +
             ");\n";
        c += "  tc_copy_row<BLOCK>(" + cj + ", p" + std::to_string(r.params[0]) + " + i0 * " + inner + ", " + inner +
             ");\n";
        for (size_t p : r.params) {
          c += "  const " + t + " *q" + std::to_string(p) + " = " + cj + " - i0 * " + inner + ";\n";
          fromCache[p] = true;
        }
        offset += alignedTo16(r.inner * int64_t(dtypeSize(r.dtype)));
      }
      c += "  __syncthreads(); // the copies are complete\n";
    }
    for (size_t n = 0; n < nests.size(); ++n) {
      std::string args;
      for (size_t p : nestParams[n])
        args += (fromCache[p] ? ", q" : ", p") + std::to_string(p);
      if (n)
        c += "  __syncthreads(); // the next nest reads this row's results\n";
      c += "  " + nests[n].symbol + "_row<BLOCK>(i0" + args + symbolArgs + ");\n";
    }
    return c;
  };
  for (size_t i = 0; i < symbols.size(); ++i)
    params += ", long long s" + std::to_string(i);
  int64_t cacheBytes = 0;
  for (const RowCacheOperand &r : cache)
    cacheBytes += alignedTo16(r.inner * int64_t(dtypeSize(r.dtype)));
  bool withCache = !cache.empty();
  os << "// " << name << ": one row per block through " << nests.size() << " nests";
  if (withCache)
    os << " (or with " << cache.size() << " operand rows, " << cacheBytes << " bytes, in shared memory)";
  os << "\n";
  for (bool cached : {false, true}) {
    if (cached && !withCache)
      continue;
    os << "template <int BLOCK>\n__device__ __forceinline__ void " << name << (cached ? "_cached" : "_body") << "("
       << params << ") {\n";
    os << "  const long long i0 = blockIdx.x;\n";
    os << "  if (i0 >= " << dimExpr(rows, symbols) << ") return;\n";
    os << body(cached) << "}\n";
  }
  std::string callArgs;
  for (size_t i = 0; i < k; ++i)
    callArgs += (i ? ", p" : "p") + std::to_string(i);
  callArgs += symbolArgs;
  // 256 threads first (the runtime's fallback) and the block size for the
  // static row width, or every block size.
  std::vector<KernelVariant> blocks;
  for (const KernelVariant &v : chainVariants())
    if (rowWork <= 0 || v.block == 256 || v.block == artifact::chainRowThreads(rowWork))
      blocks.push_back(v);
  std::vector<KernelVariant> variants = blocks;
  if (withCache)
    for (const KernelVariant &v : blocks) {
      KernelVariant c = v;
      c.cacheBytes = cacheBytes;
      variants.push_back(c);
    }
  for (const KernelVariant &v : variants)
    os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << name << "_" << v.name() << "("
       << params << ") { " << name << (v.cacheBytes ? "_cached" : "_body") << "<" << v.block << ">(" << callArgs
       << "); }\n";
  os << "\n";
  kernels_ += os.str();
  return variants;
}

} // namespace tensorc::codegen::cuda
