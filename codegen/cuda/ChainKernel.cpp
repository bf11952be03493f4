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
// Sibling elementwise nests (a gelu and its derivative from one matmul
// product) computed together, four outputs of each per vector, every load
// of a round before its stores: one read of each input element, no shared
// memory, no barriers. The row template chain ran the mlp's gelu pair
// (bf16, 8192 x 4096) at 1.7 TB/s on an H100.
std::string CudaSourceBuilder::siblingChainBody(const std::string &name, const std::vector<ChainedNest> &nests,
                                                const std::vector<std::vector<size_t>> &nestParams,
                                                const std::string &symbolArgs, const std::string &rows) {
  std::vector<const VectorElementwise *> parts;
  for (const ChainedNest &n : nests) {
    auto it = vectorElementwise_.find(n.symbol);
    if (it == vectorElementwise_.end() || it->second.total != vectorElementwise_.at(nests[0].symbol).total)
      return "";
    parts.push_back(&it->second);
  }
  std::string helpers, aligned = "true", compute, stores;
  for (size_t n = 0; n < nests.size(); ++n) {
    const VectorElementwise &e = *parts[n];
    const std::string &sym = nests[n].symbol, k = std::to_string(n);
    helpers += "__device__ __forceinline__ bool " + sym + "_aligned4(" + e.params + ") { return " + e.aligned +
               "; }\n";
    helpers += "__device__ __forceinline__ long long " + sym + "_at4(long long linear, " + e.params + ", tc_vec4<" +
               e.outT + "> &o) {\n" + e.compute + "  return " + e.index + ";\n}\n";
    std::string args;
    for (size_t p : nestParams[n])
      args += (args.empty() ? "p" : ", p") + std::to_string(p);
    args += symbolArgs;
    aligned += " && " + sym + "_aligned4(" + args + ")";
    compute += "        at" + k + "[u] = " + sym + "_at4(i0 * inner + p, " + args + ", o" + k + "[u]);\n";
    stores += "        tc_store4(p" + std::to_string(nestParams[n][0]) + " + at" + k + "[u], o" + k + "[u]);\n";
  }
  kernels_ += "// " + name + ": " + std::to_string(nests.size()) + " sibling elementwise nests\n" + helpers;
  std::string c = "  if (" + aligned + ") {\n";
  c += "    const long long inner = (" + parts[0]->total + ") / " + rows + ";\n";
  // c0, not p0: the chain's parameters are p<k>.
  // Four rounds of vectors per thread (two at 1024 threads: 64 registers).
  c += "    constexpr int rounds = BLOCK >= 1024 ? 2 : 4;\n";
  c += "    for (long long c0 = 4LL * threadIdx.x; c0 < inner; c0 += 4LL * rounds * BLOCK) {\n";
  for (size_t n = 0; n < nests.size(); ++n)
    c += "      tc_vec4<" + parts[n]->outT + "> o" + std::to_string(n) + "[rounds];\n      long long at" +
         std::to_string(n) + "[rounds];\n";
  c += "#pragma unroll\n      for (int u = 0; u < rounds; ++u) {\n";
  c += "        const long long p = c0 + 4LL * u * BLOCK;\n        if (p >= inner) break;\n" + compute + "      }\n";
  c += "#pragma unroll\n      for (int u = 0; u < rounds; ++u) {\n";
  c += "        if (c0 + 4LL * u * BLOCK >= inner) break;\n" + stores + "      }\n";
  c += "    }\n    return;\n  }\n";
  return c;
}

std::vector<KernelVariant> CudaSourceBuilder::addChain(const std::string &name,
                                                     const std::vector<ChainedNest> &nests,
                                                     const std::vector<std::string> &symbols,
                                                     const Dim &rows,
                                                     const std::vector<RowCacheOperand> &cache,
                                                     int64_t rowWork, bool siblings) {
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
  std::string rowCount = dimExpr(rows, symbols);
  std::string sibling = siblings ? siblingChainBody(name, nests, nestParams, symbolArgs, rowCount) : "";
  int64_t cacheBytes = 0;
  for (const RowCacheOperand &r : cache)
    cacheBytes += alignedTo16(r.inner * int64_t(dtypeSize(r.dtype)));
  bool withCache = !cache.empty() && sibling.empty();
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
    os << "  if (i0 >= " << rowCount << ") return;\n";
    os << (cached ? "" : sibling) << body(cached) << "}\n";
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
