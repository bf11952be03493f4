#include "codegen/cuda/CudaProgram.h"

#include "codegen/Program.h"
#include "codegen/cpu/Lowering.h"
#include "codegen/cuda/CudaKernel.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;

namespace tensorc::codegen::cuda {

namespace {

// Shared memory a row cache may take: under the 227 KiB an H100 block may
// opt in to, leaving room for the nests' own (a few partial sums).
constexpr int64_t kMaxRowCacheBytes = 224 * 1024;

// Whether step s computes one element per row (a row's first element, a
// gather at its target): such a step reads a handful of the row's elements,
// which it finds in L1/L2 or memory as cheaply as in a row cache.
bool onePerRow(const artifact::Step &s) {
  return s.reduced.isStatic() && s.reduced.value() == 1 && s.oneOutputPerRow();
}

// The operands of chain steps first..last worth a row cache: read across
// the row by at least two of its steps (steps computing one element per row
// do not count: cross-entropy's shift and target logit beside its one
// online log-sum-exp pass would otherwise cache a 201 KB row, one block per
// SM, for a row read once), each step reading it only at its row, written
// by none (nor a view of what one writes: the copy is made before the first
// step runs), laid out as [rows, inner] (leading dims multiplying to the
// chain's rows, the rest static) with at least 256 elements per row.
std::vector<RowCacheOperand> rowCache(const artifact::Artifact &art, const ProgramNotes &notes, size_t first,
                                      size_t last) {
  auto storageOf = [&](int v) { return artifact::storageValue(art, v); };
  std::set<int> written;
  for (size_t i = first; i <= last; ++i)
    written.insert(storageOf(art.steps[i].operands[0]));
  std::map<int, RowCacheOperand> byValue;
  std::map<int, int> readers;
  std::set<int> refused;
  size_t param = 0;
  for (size_t i = first; i <= last; ++i) {
    const std::vector<int> &atRow = notes.readAtRowOnly[i];
    const std::vector<int> &ops = art.steps[i].operands;
    std::set<int> seen;
    for (size_t o = 0; o < ops.size(); ++o, ++param) {
      int v = ops[o];
      if (o == 0)
        continue;
      if (written.count(storageOf(v)) || std::find(atRow.begin(), atRow.end(), v) == atRow.end())
        refused.insert(v);
      byValue[v].params.push_back(param);
      if (seen.insert(v).second && !onePerRow(art.steps[i]))
        ++readers[v];
    }
  }
  std::vector<RowCacheOperand> cache;
  int64_t total = 0;
  const Dim &rows = art.steps[first].extent;
  for (auto &[v, r] : byValue) {
    if (refused.count(v) || readers[v] < 2)
      continue;
    const artifact::ValueDecl &value = art.values[size_t(v)];
    Dim lead = Dim::of(1);
    size_t d = 0;
    while (d < value.shape.size() && lead != rows)
      lead = lead * value.shape[d++];
    int64_t inner = 1;
    bool staticInner = lead == rows;
    for (; d < value.shape.size() && staticInner; ++d) {
      staticInner = value.shape[d].isStatic();
      inner *= staticInner ? value.shape[d].value() : 1;
    }
    int64_t bytes = (inner * int64_t(dtypeSize(value.dtype)) + 15) / 16 * 16;
    if (!staticInner || inner < 256 || total + bytes > kMaxRowCacheBytes)
      continue;
    total += bytes;
    r.inner = inner;
    r.dtype = value.dtype;
    cache.push_back(r);
  }
  return cache;
}

// Whether two stored values (storageValue ids) may share bytes: the same
// storage, or arena buffers whose lifetimes do not overlap (the runtime may
// pack those into the same bytes; touching lifetimes count as overlapping).
bool mayShareBytes(const artifact::Artifact &art, int a, int b) {
  if (a == b)
    return true;
  const artifact::Storage &sa = art.values[size_t(a)].storage, &sb = art.values[size_t(b)].storage;
  if (sa.kind != sb.kind)
    return false;
  if (sa.index == sb.index)
    return true;
  if (sa.kind != artifact::Storage::Kind::Buffer)
    return false;
  const artifact::BufferDecl &x = art.buffers[size_t(sa.index)], &y = art.buffers[size_t(sb.index)];
  return x.last <= y.first || y.last <= x.first;
}

// Which nests of chain steps first..last must wait for the nests before
// them (a block barrier; a cluster barrier where rows are split across a
// cluster, whose release waits for every store in flight: on an H100 the
// cross-entropy chain spent ~45% of its samples in the barriers after
// each of its 7 nests, 17% in the two behind its 201 KB gradient stores).
// A nest waits when it reads bytes a nest since the last barrier wrote, or
// writes bytes one read or wrote, unless the same thread did both: a nest
// with one output per row writes it from thread 0 (of the cluster's block
// 0, or of every block where every block finishes the row:
// splitBlocksFinishRows); an elementwise one also reads only there.
void chainBarriers(const artifact::Artifact &art, size_t first, std::vector<ChainedNest> &nests) {
  struct Access {
    int writes;
    std::vector<int> reads;
    bool onePerRow; // its one output per row is written by thread 0
    bool single;    // and read only there (elementwise)
  };
  std::vector<Access> access;
  for (size_t n = 0; n < nests.size(); ++n) {
    const artifact::Step &st = art.steps[first + n];
    Access a{artifact::storageValue(art, st.operands[0]), {}, st.oneOutputPerRow(), false};
    a.single = a.onePerRow && st.reduced == Dim::of(1);
    for (size_t o = 1; o < st.operands.size(); ++o)
      a.reads.push_back(artifact::storageValue(art, st.operands[o]));
    access.push_back(a);
  }
  auto overlaps = [&](int v, const std::vector<int> &values) {
    return std::any_of(values.begin(), values.end(), [&](int w) { return mayShareBytes(art, v, w); });
  };
  size_t segment = 0; // the first nest since the last barrier
  for (size_t n = 1; n < nests.size(); ++n) {
    const Access &later = access[n];
    bool wait = false;
    for (size_t m = segment; m < n && !wait; ++m) {
      const Access &earlier = access[m];
      bool readAfterWrite = overlaps(earlier.writes, later.reads) && !(earlier.onePerRow && later.single);
      bool writeAfterRead = overlaps(later.writes, earlier.reads) && !(earlier.single && later.onePerRow);
      bool writeAfterWrite =
          mayShareBytes(art, earlier.writes, later.writes) && !(earlier.onePerRow && later.onePerRow);
      wait = readAfterWrite || writeAfterRead || writeAfterWrite;
    }
    nests[n].barrierBefore = wait;
    if (wait)
      segment = n;
  }
}

// Whether a chain split across a cluster can let each block finish the
// row's values itself (CudaSourceBuilder::addChain's blocksFinishRows):
// every nest with one output per row runs in every block, each storing the
// same value (a row reduction from every block's partials), and a block
// waits only for its own threads. That needs no block to touch bytes
// another block reads or writes at another time: a value the chain writes
// is read only by later nests and only where every block wrote it itself
// (one output per row), and shares no bytes with what a nest reads before
// or with what another nest writes (checked by storage, as chainBarriers).
bool splitBlocksFinishRows(const artifact::Artifact &art, size_t first, size_t last) {
  for (size_t a = first; a <= last; ++a) {
    const artifact::Step &writer = art.steps[a];
    bool everyBlock = writer.oneOutputPerRow();
    int written = artifact::storageValue(art, writer.operands[0]);
    for (size_t b = first; b <= last; ++b) {
      const artifact::Step &other = art.steps[b];
      for (size_t o = 1; o < other.operands.size(); ++o)
        if (mayShareBytes(art, written, artifact::storageValue(art, other.operands[o])) && !(b > a && everyBlock))
          return false;
      if (b != a && mayShareBytes(art, written, artifact::storageValue(art, other.operands[0])))
        return false;
    }
  }
  return true;
}

} // namespace

artifact::Artifact compileCudaArtifact(ModuleOp module, const CudaCompileOptions &options) {
  func::FuncOp fn = singleFunction(module);
  MLIRContext *ctx = module.getContext();
  cpu::loadCpuDialects(*ctx);
  CudaSourceBuilder source(*ctx);
  ProgramNotes notes;
  artifact::Artifact art =
      buildProgram(fn, "tc_" + fn.getName().str() + "_k",
                   [&](const cpu::NestSpec &spec, const cpu::PointFn &point) { return source.addNest(spec, point); },
                   ProgramOptions{/*matmulEpilogues=*/true, /*convAsGemm=*/options.conv == "gemm",
                                  /*integerMatmulAsNest=*/true, /*splitColumnReductions=*/true,
                                  /*convolutionLibrary=*/options.conv == "cudnn",
                                  /*biasGradientEpilogues=*/options.gemmBiasGradient},
                   [&](DType dtype, DType out, int paddedHeadDim, bool causal, artifact::AttentionStep::Mask mask,
                       bool dropout) {
                     return source.addAttention("tc_" + fn.getName().str(), dtype, out, paddedHeadDim, causal,
                                                mask, dropout);
                   },
                   &notes);
  for (const artifact::Step &st : art.steps)
    if (st.kind == artifact::Step::Kind::Attention) {
      if (!st.attention.backward) {
        source.requireAttentionKernel(st.symbol, "FWD");
        continue;
      }
      source.requireAttentionKernel(st.symbol, st.attention.savedForward ? "BWD_Q_SAVED" : "BWD_Q");
      source.requireAttentionKernel(st.symbol, "BWD_KV");
    }
  // A step whose kernels repeat another's (the same nest in another layer)
  // launches that one's.
  for (artifact::Step &st : art.steps)
    if (!st.symbol.empty())
      st.symbol = source.canonicalSymbol(st.symbol);
  // Chains of loop steps over the same rows also get one fused kernel
  // (the runtime chooses between it and the steps' own kernels).
  std::vector<std::string> symbols;
  for (const artifact::SymbolDecl &d : art.symbols)
    symbols.push_back(d.name);
  for (size_t first = 0; first < art.steps.size();) {
    size_t last = first;
    while (art.steps[last].chainNext && last + 1 < art.steps.size())
      ++last;
    if (last > first) {
      std::vector<ChainedNest> nests;
      for (size_t i = first; i <= last; ++i) {
        ChainedNest n{art.steps[i].symbol, {}};
        for (int o : art.steps[i].operands) {
          n.operands.push_back(art.values[size_t(o)].dtype);
          n.values.push_back(o);
        }
        n.onePerRow = art.steps[i].oneOutputPerRow();
        n.reduces = art.steps[i].reduced != Dim::of(1);
        nests.push_back(n);
      }
      std::vector<RowCacheOperand> cache = rowCache(art, notes, first, last);
      chainBarriers(art, first, nests);
      artifact::Step &head = art.steps[first];
      // The most any chained step computes per row, where static.
      int64_t rowWork = artifact::chainRowWork(art.steps, first, last, [](const Dim &d) {
        return d.isStatic() ? std::optional<int64_t>(d.value()) : std::nullopt;
      });
      // Siblings: no step reads what one of the chain writes.
      std::set<int> written;
      for (size_t i = first; i <= last; ++i)
        written.insert(artifact::storageValue(art, art.steps[i].operands[0]));
      bool siblings = true;
      for (size_t i = first; i <= last; ++i)
        for (size_t o = 1; o < art.steps[i].operands.size(); ++o)
          siblings = siblings && !written.count(artifact::storageValue(art, art.steps[i].operands[o]));
      head.chainKernel = head.symbol + "_chain";
      head.chainVariants = source.addChain(head.chainKernel, nests, symbols, head.extent,
                                           cache, std::max<int64_t>(rowWork, 0),
                                           siblings, splitBlocksFinishRows(art, first, last));
    }
    first = last + 1;
  }
  std::set<DType> columnSums;
  for (const artifact::Step &st : art.steps)
    if (st.epilogue.biasGradient)
      columnSums.insert(art.values[size_t(st.operands[artifact::biasGradientSource(st)])].dtype);
  for (DType d : columnSums)
    source.addColumnSums("tc_" + art.function, d); // per program: TUs may be combined
  std::set<std::string> scatterAdds;
  for (const artifact::Step &st : art.steps)
    if (st.kind == artifact::Step::Kind::ScatterAdd &&
        scatterAdds.insert(artifact::scatterAddKernel(art, st)).second)
      source.addScatterAdd(artifact::scatterAddKernel(art, st), art.values[size_t(st.operands[0])].dtype,
                           art.values[size_t(st.operands[1])].dtype, art.values[size_t(st.operands[2])].dtype);
  art.code = source.source();
  art.target.kind = "cuda";
  art.target.triple = "nvptx64-nvidia-cuda";
  art.target.cpu = options.arch;
  art.options = options.record;
  art.options["conv"] = options.conv;
  return art;
}

} // namespace tensorc::codegen::cuda
