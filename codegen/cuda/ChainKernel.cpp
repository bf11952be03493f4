// Chain kernels of the CUDA backend: a chain of nests over the same rows
// (softmax's max, sum and normalize; a layer norm's passes) runs as one
// kernel, one row per block, each nest's row template in turn.
#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/PointPrinter.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace tensorc::codegen::cuda {

namespace {
int64_t alignedTo16(int64_t bytes) { return (bytes + 15) / 16 * 16; }
// tc_split_chunk (kernels/Prelude.cuh): a cluster block's part of n.
int64_t splitChunk(int64_t n, int cluster) { return ((n + cluster - 1) / cluster + 3) / 4 * 4; }
// Rows cached in more than this leave room for at most one block per SM
// (an H100's 228 KiB, 1 KiB of it per block reserved): such chains also
// get variants splitting each row across a cluster.
constexpr int64_t kClusterSplitBytes = 96 * 1024;
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
  // A value several nests read goes through one pointer: the same loads,
  // so the compiler computes what they share once (a gelu and its
  // derivative: h + b and erf of it). Siblings write nothing the others
  // read.
  std::map<int, size_t> firstParam;
  for (size_t n = 0; n < nests.size(); ++n)
    for (size_t o = 1; o < nestParams[n].size() && o < nests[n].values.size(); ++o)
      firstParam.emplace(nests[n].values[o], nestParams[n][o]);
  for (size_t n = 0; n < nests.size(); ++n) {
    const VectorElementwise &e = *parts[n];
    const std::string &sym = nests[n].symbol, k = std::to_string(n);
    // A nest's helpers are its own (its text): defined once in the source,
    // whichever chains use it (a repeated layer's nests are one nest).
    if (siblingHelpers_.insert(sym).second) {
      helpers += "__device__ __forceinline__ bool " + sym + "_aligned4(" + e.params + ") { return " + e.aligned +
                 "; }\n";
      helpers += "__device__ __forceinline__ long long " + sym + "_at4(long long linear, " + e.params +
                 ", tc_vec4<" + e.outT + "> &o) {\n" + e.compute + "  return " + e.index + ";\n}\n";
    }
    std::string args;
    for (size_t o = 0; o < nestParams[n].size(); ++o) {
      size_t p = o > 0 && o < nests[n].values.size() ? firstParam.at(nests[n].values[o]) : nestParams[n][o];
      args += (args.empty() ? "p" : ", p") + std::to_string(p);
    }
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

std::vector<KernelVariant> CudaSourceBuilder::addChain(std::string &name,
                                                     const std::vector<ChainedNest> &nests,
                                                     const std::vector<std::string> &symbols,
                                                     const Dim &rows,
                                                     const std::vector<RowCacheOperand> &cache,
                                                     int64_t rowWork, bool siblings, bool blocksFinishRows) {
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
  // The nest each parameter belongs to.
  std::vector<size_t> nestOf(k);
  for (size_t n = 0; n < nests.size(); ++n)
    for (size_t p : nestParams[n])
      nestOf[p] = n;
  enum class Mode { Plain, Cached, Split };
  auto body = [&](Mode mode) {
    std::vector<bool> fromCache(k, false);
    std::string c;
    bool split = mode == Mode::Split;
    if (mode != Mode::Plain) {
      // Each cached operand's row (or, split across a cluster, the block's
      // part of it): copied into shared memory once, then the nests read it
      // there through a pointer offset by the part's start, so that their
      // own indexing (row * inner + column) lands in the copy. A nest reads
      // through that pointer only at its own point; away from it (a row's
      // first element, a gather) through its second pointer (rowElsewhere_),
      // which split is device memory. Split, only the nests whose parts are
      // ranges of the operand's columns find their points in the block's
      // part (rowColumns_); the others read device memory (nothing in the
      // chain writes a cached operand).
      c += "  extern __shared__ __align__(16) unsigned char tc_row_cache[];\n";
      std::string offset = "0LL";
      for (size_t j = 0; j < cache.size(); ++j) {
        const RowCacheOperand &r = cache[j];
        std::string t = storageCType(r.dtype), inner = std::to_string(r.inner) + "LL";
        std::string cj = "c" + std::to_string(j), lo = "lo" + std::to_string(j), hi = "hi" + std::to_string(j);
        c += "  " + t + " *" + cj + " = reinterpret_cast<" + t + " *>(tc_row_cache + " + offset + ");\n";
        if (split) {
          c += "  long long " + lo + ", " + hi + ";\n  tc_split_range(" + inner + ", rank, CLUSTER, " + lo + ", " +
               hi + ");\n";
          c += "  tc_copy_row<BLOCK>(" + cj + ", p" + std::to_string(r.params[0]) + " + i0 * " + inner + " + " + lo +
               ", " + hi + " - " + lo + ");\n";
        } else {
          c += "  tc_copy_row<BLOCK>(" + cj + ", p" + std::to_string(r.params[0]) + " + i0 * " + inner + ", " +
               inner + ");\n";
        }
        for (size_t p : r.params) {
          if (split && rowColumns_.at(nests[nestOf[p]].symbol) != r.inner)
            continue;
          c += "  const " + t + " *q" + std::to_string(p) + " = " + cj + " - i0 * " + inner + (split ? " - " + lo : "") +
               ";\n";
          fromCache[p] = true;
        }
        std::string rowBytes = split ? "tc_split_chunk(" + inner + ", CLUSTER) * " + std::to_string(dtypeSize(r.dtype))
                                     : std::to_string(r.inner * int64_t(dtypeSize(r.dtype)));
        offset += " + (" + rowBytes + " + 15) / 16 * 16";
      }
      c += "  __syncthreads(); // the copies are complete\n";
    }
    for (size_t n = 0; n < nests.size(); ++n) {
      std::string args, elsewhere;
      for (size_t p : nestParams[n])
        args += (fromCache[p] ? ", q" : ", p") + std::to_string(p);
      for (size_t k : rowElsewhere_.at(nests[n].symbol)) {
        size_t p = nestParams[n][k];
        elsewhere += (fromCache[p] && !split ? ", q" : ", p") + std::to_string(p);
      }
      // Split with blocksFinishRows: every block computes the row's values
      // itself (a nest with one output per row in each block, a row
      // reduction from all the partials) and waits only for its threads.
      bool everyBlock = split && blocksFinishRows;
      if (n && nests[n].barrierBefore)
        c += split && !everyBlock ? "  tc_cluster_sync(); // the next nest reads this row's results, from any block\n"
                                  : "  __syncthreads(); // the next nest reads this row's results\n";
      bool syncLater = split && !everyBlock && std::any_of(nests.begin() + long(n) + 1, nests.end(),
                                                           [](const ChainedNest &m) { return m.barrierBefore; });
      bool whole = everyBlock && nests[n].onePerRow && !nests[n].reduces;
      std::string cluster = split && !whole ? "CLUSTER" : "1";
      if (everyBlock && nests[n].onePerRow && nests[n].reduces)
        cluster += ", false, true";
      else if (syncLater)
        cluster += ", true";
      c += "  " + nests[n].symbol + "_row<BLOCK, " + cluster + ">(i0, " + (split && !whole ? "rank" : "0u") + args +
           symbolArgs + elsewhere + ");\n";
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
  bool withSplit = withCache && cacheBytes > kClusterSplitBytes;
  os << "// " << name << ": one row per block through " << nests.size() << " nests";
  if (withCache)
    os << " (or with " << cache.size() << " operand rows, " << cacheBytes << " bytes, in shared memory)";
  os << "\n";
  for (Mode mode : {Mode::Plain, Mode::Cached, Mode::Split}) {
    if ((mode == Mode::Cached && !withCache) || (mode == Mode::Split && !withSplit))
      continue;
    if (mode == Mode::Split) {
      // Block `rank` of each cluster of CLUSTER consecutive blocks computes
      // its part of row blockIdx.x / CLUSTER (the cluster returns as one).
      os << "template <int BLOCK, int CLUSTER>\n__device__ __forceinline__ void " << name << "_split(" << params
         << ") {\n";
      os << "  const long long i0 = blockIdx.x / CLUSTER;\n  const unsigned rank = blockIdx.x % CLUSTER;\n";
    } else {
      os << "template <int BLOCK>\n__device__ __forceinline__ void " << name
         << (mode == Mode::Cached ? "_cached" : "_body") << "(" << params << ") {\n";
      os << "  const long long i0 = blockIdx.x;\n";
    }
    os << "  if (i0 >= " << rowCount << ") return;\n";
    os << (mode == Mode::Plain ? sibling : "") << body(mode) << "}\n";
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
  // Split: 256 threads per block, and the block size for a block's part of
  // the row.
  if (withSplit)
    for (int cluster : {2, 4}) {
      int64_t bytes = 0;
      for (const RowCacheOperand &r : cache)
        bytes += alignedTo16(splitChunk(r.inner, cluster) * int64_t(dtypeSize(r.dtype)));
      std::set<int> sizes = {256};
      if (rowWork > 0)
        sizes.insert(std::min(512, artifact::chainRowThreads((rowWork + cluster - 1) / cluster)));
      for (int block : sizes) {
        KernelVariant c{block, 1, 1, true};
        c.cacheBytes = bytes;
        c.cluster = cluster;
        variants.push_back(c);
      }
    }
  for (const KernelVariant &v : variants) {
    if (v.cluster > 1) { // clusters: sm_90 and later (the runtime launches these there only)
      os << "#if __CUDA_ARCH__ >= 900\nextern \"C\" __global__ void __cluster_dims__(" << v.cluster
         << ", 1, 1) __launch_bounds__(" << v.block << ") " << name << "_" << v.name() << "(" << params << ") { "
         << name << "_split<" << v.block << ", " << v.cluster << ">(" << callArgs << "); }\n#endif\n";
      continue;
    }
    os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << name << "_" << v.name() << "("
       << params << ") { " << name << (v.cacheBytes ? "_cached" : "_body") << "<" << v.block << ">(" << callArgs
       << "); }\n";
  }
  os << "\n";
  // A chain of the same nests as one added before is that chain (its name);
  // another chain whose head nest is the same one gets a name of its own.
  std::string text = os.str();
  std::string key = replaceAll(text, name, kSymbolPlaceholder);
  if (auto it = chainByContent_.find(key); it != chainByContent_.end()) {
    name = it->second.first;
    return it->second.second;
  }
  std::string unique = name;
  for (int k = 1; usedChainNames_.count(unique); ++k)
    unique = name + std::to_string(k);
  usedChainNames_.insert(unique);
  if (unique != name)
    text = replaceAll(text, name, unique);
  name = unique;
  chainByContent_.emplace(std::move(key), std::make_pair(unique, variants));
  kernels_ += text;
  return variants;
}

} // namespace tensorc::codegen::cuda
