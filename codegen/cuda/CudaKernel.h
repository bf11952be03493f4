// CUDA C++ for loop nests (issue 6, first slice): every nest of a program
// becomes a parameterized kernel template. The nest's point function (and
// epilogue) is built in MLIR by the backend-neutral program builder and
// printed as a straight-line __device__ function (ScalarPrinter); the
// template maps the nest's parallel iterations to threads (BLOCK threads,
// ITEMS iterations per thread) and runs its reduction loops per thread.
// Variants are instantiated as `extern "C"` kernels SYMBOL_bB_iI so the
// autotuner can choose; the heuristic default is recorded per step.
#pragma once

#include "codegen/cpu/LoopNest.h"
#include "ir/core/Dim.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/IR/MLIRContext.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace tensorc::codegen::cuda {

using artifact::KernelVariant;
// The variants every loop kernel is instantiated with; the first is the default.
const std::vector<KernelVariant> &kernelVariants();
// The variants elementwise nests whose innermost dim is a static multiple
// of 4 are instantiated with instead of those with several items per
// thread: four consecutive outputs per item.
const std::vector<KernelVariant> &vectorVariants();
// The cooperative variants reductions are also instantiated with.
const std::vector<KernelVariant> &rowVariants();
// The variants of chain kernels (one row per block).
const std::vector<KernelVariant> &chainVariants();

// Headers and the helpers every kernel uses (kernels/Prelude.cuh,
// kernels/ColumnSums.cuh).
std::string cudaPrelude();

// A nest of a chain: its kernel symbol, its operands' dtypes, and whether
// the chain kernel must wait for every thread (of the cluster, split) to
// finish the nests before it first (chainBarriers in CudaProgram.cpp).
struct ChainedNest {
  std::string symbol;
  std::vector<DType> operands;
  std::vector<int> values; // the artifact values of the operands (same order)
  bool barrierBefore = true;
  bool onePerRow = false; // one output per row (thread 0 writes it)
  bool reduces = false;   // over the row (a reduction)
};
// A chain's row cache: an operand the chained nests read only at their row
// (and more than once), whose row of `inner` elements a chain kernel variant
// copies into shared memory first; `params` are the chain kernel's
// parameters (pointers) that hold it.
struct RowCacheOperand {
  std::vector<size_t> params;
  int64_t inner = 0;
  DType dtype = DType::F32;
};

class CudaSourceBuilder {
public:
  explicit CudaSourceBuilder(mlir::MLIRContext &ctx) : ctx_(ctx) {}
  // Appends the nest's kernel templates and their variants
  // (`symbol + "_" + variant.name()` each); returns the variants. Throws Error.
  std::vector<KernelVariant> addNest(const cpu::NestSpec &spec, const cpu::PointFn &point);
  // A kernel running a chain of nests (added before) for one row per block:
  // each nest's row template in order, __syncthreads between. Its
  // parameters are every nest's operands in order, then the symbols.
  // Returns its variants.
  // With a non-empty `cache`, also the variants that keep those rows in
  // shared memory (KernelVariant::cacheBytes). `rowWork`: the most
  // iterations any nest computes per row where static (then only 256
  // threads and artifact::chainRowThreads(rowWork): NVRTC compiles each
  // variant at load), else 0 (every block size).
  // Rows cached in more than kClusterSplitBytes also get variants that
  // split each row across a thread-block cluster of 2 or 4 blocks (sm_90+;
  // KernelVariant::cluster), each caching its part.
  // `siblings`: no nest reads what another of the chain writes; where
  // every nest is also elementwise with four outputs per vector over the
  // same outputs per row, the kernel computes them all per element
  // instead (no row cache, no barriers; the nests' own order where a
  // pointer is not aligned).
  // `blocksFinishRows` (splitBlocksFinishRows in CudaProgram.cpp): split
  // across a cluster, every block computes each nest with one output per
  // row itself (a row reduction from every block's partials, ALL), so the
  // nests wait only for their own block.
  // `name` (in/out): the chain's symbol; where an identical chain was added
  // before, its symbol (nothing new is added), and where another chain has
  // the name, a fresh one.
  std::vector<KernelVariant> addChain(std::string &name, const std::vector<ChainedNest> &nests,
                                    const std::vector<std::string> &symbols, const Dim &rows,
                                    const std::vector<RowCacheOperand> &cache = {}, int64_t rowWork = 0,
                                    bool siblings = false, bool blocksFinishRows = false);
  // PREFIX_column_sums_<dtype>(out, in, rows, cols): out[c] = sum_r in[r, c]
  // (kernels/ColumnSums.cuh), the bias-gradient fallback when cuBLASLt has
  // no algorithm with it.
  void addColumnSums(const std::string &prefix, DType dtype);
  // NAME(out, grad, indices, rows, cols, numWeights, skip): a scatter-add step's
  // kernel (kernels/ScatterAdd.cuh) for these dtypes.
  void addScatterAdd(const std::string &name, DType out, DType grad, DType indices);
  // A configuration of the fused attention kernels (kernels/Attention.cuh;
  // kernels/AttentionF32.cuh for f32);
  // returns their symbol prefix. Only the kernels required after the
  // program is built are instantiated (NVRTC takes ~1 s per kernel).
  // dropout: on the probabilities (16-bit operands only).
  std::string addAttention(const std::string &prefix, DType dtype, DType out, int paddedHeadDim, bool causal,
                           artifact::AttentionStep::Mask mask, bool dropout);
  // `kernel`: the macro suffix of Attention.cuh, FWD, BWD_Q, BWD_Q_SAVED or BWD_KV.
  void requireAttentionKernel(const std::string &name, const std::string &kernel);
  // The symbol whose kernels a nest's are: a nest whose text is another's
  // with the names changed (the same layer's kernels, repeated) adds
  // nothing to the source and is that nest (issue 57: a model of N
  // identical layers compiles one layer's kernels).
  const std::string &canonicalSymbol(const std::string &symbol) const {
    auto it = nestCanonical_.find(symbol);
    return it == nestCanonical_.end() ? symbol : it->second;
  }
  // The whole translation unit: a prelude (headers, helpers) and the kernels.
  std::string source() const;
  // The kernels alone (several programs' kernels can share one prelude).
  const std::string &kernels() const { return kernels_; }

private:
  // The text with every `symbol` replaced by a placeholder: the key of its
  // content, whatever its name.
  static constexpr const char *kSymbolPlaceholder = "\x01SYMBOL\x01";
  static std::string replaceAll(std::string text, const std::string &from, const std::string &to);
  // Appends `text` (the kernels of `symbol`) unless a text equal up to the
  // symbol's name was appended; then records `symbol` as that one's.
  void appendOnce(const std::string &text, const std::string &symbol, std::map<std::string, std::string> &byContent,
                  std::map<std::string, std::string> &canonical);

  mlir::MLIRContext &ctx_;
  std::string kernels_;
  std::map<std::string, std::string> nestByContent_; // normalized text -> the first nest's symbol
  std::map<std::string, std::string> nestCanonical_; // a repeated nest's symbol -> the first's
  std::map<std::string, std::pair<std::string, std::vector<KernelVariant>>> chainByContent_;
  std::set<std::string> usedChainNames_;
  std::set<std::string> siblingHelpers_; // nests whose sibling-chain helpers are in the source
  // What a chain of sibling elementwise nests (ChainKernel.cpp) needs of
  // each vectorizable elementwise nest (rank >= 2) to compute four outputs
  // from their flat index: the nest's parameters (unrestricted), the
  // pointers' alignment check, the statements computing `o` at `linear`,
  // the output index, the output's C type and the number of outputs.
  struct VectorElementwise {
    std::string params, aligned, compute, index, outT, total;
  };
  std::map<std::string, VectorElementwise> vectorElementwise_; // by nest symbol
  // By nest symbol: the columns its row template splits across a cluster
  // where each block's part is a column range (static; elementwise nests
  // and row reductions with one output per row), else -1. A block's part
  // of a row cache of as many columns holds what the nest reads at its own
  // point.
  std::map<std::string, int64_t> rowColumns_;
  // Per nest symbol: the operands (indices) its functions also read away
  // from the point, through second pointers its row template takes last.
  std::map<std::string, std::vector<size_t>> rowElsewhere_;
  // The chain body of sibling nests (none reads what another writes), or
  // "" where one of them is not VectorElementwise or their totals differ.
  std::string siblingChainBody(const std::string &name, const std::vector<ChainedNest> &nests,
                               const std::vector<std::vector<size_t>> &nestParams, const std::string &symbolArgs,
                               const std::string &rows);
  struct AttentionConfig {
    std::string arguments;       // "T, DP, CAUSAL, MASK" of the macros ("DP, CAUSAL, MASK" for f32)
    bool f32 = false;            // AttentionF32.cuh's kernels (TC_ATTENTION_F32_*)
    bool wide = false;           // 16-bit operands, f32 output (and gradients): TC_ATTENTION_WIDE_*
    int paddedHeadDim = 0;
    std::set<std::string> kernels; // required
  };
  std::map<std::string, AttentionConfig> attention_; // by symbol prefix
};

} // namespace tensorc::codegen::cuda
