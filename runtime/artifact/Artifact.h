// The artifact: the whole contract between the compiler and the runtime
// (docs/artifact-format.md). One file holds a fixed binary header, a JSON
// manifest (signature, values, buffers, the launch sequence, target,
// options), the code (a shared library of kernels for the CPU) and the data
// of constants, with a checksum over everything after the header.
// MLIR-free: the compiler writes it, the runtime reads it.
#pragma once

#include "ir/core/Dim.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorc::artifact {

// 2: kernel variants and matmul epilogues are typed manifest fields.
// 3: chain kernel variants may keep rows in shared memory (cache_bytes).
// 5: convolution steps (cuDNN, with a loop kernel to fall back on).
// 6: collective steps.
// 7: scatter-add steps (embedding_backward).
// 9: attention steps with dropout (a seed operand, new kernel parameters).
// 10: channels-last convolution steps (older runtimes would read them as NCHW).
inline constexpr uint32_t kFormatVersion = 10;
// PNG-style magic: a non-ASCII first byte and CR/LF/EOF catch text-mode copies.
inline constexpr char kMagic[8] = {'\x89', 'T', 'C', 'X', '\r', '\n', '\x1a', '\n'};

struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  int value = -1; // the value that holds it during a run
};

// Where a value's bytes live during a run.
struct Storage {
  enum class Kind { Input, Output, Buffer, Constant, Alias };
  Kind kind = Kind::Buffer;
  int index = -1; // input, output, buffer or constant index; for Alias the aliased value
};

struct ValueDecl {
  DType dtype = DType::F32;
  Shape shape; // row-major, contiguous
  Storage storage;
};

// An arena buffer: its size in bytes (a monomial in the symbols) and the
// steps that write it first and read it last; the runtime packs buffers
// into one arena at bind time (ir/core/MemoryPlanner).
struct BufferDecl {
  Dim bytes;
  int first = 0;
  int last = 0;
};

struct ConstantDecl {
  uint64_t offset = 0; // in the data section
  uint64_t bytes = 0;
};

// A fused attention step (GPU): softmax(q k^T * scale [causal]) v by the
// kernels of codegen/cuda/kernels/Attention.cuh, `symbol` + "_fwd", or for
// the backward "_bwd_q" (or "_bwd_q_saved") then "_bwd_kv". Forward
// operands: out, [lse,] q, k, v; backward: dq, dk, dv, lse, delta (f32 of
// q's shape without its last dim), dout, q, k, v[, out]; then, with a user
// mask, the mask (both directions); then, with dropout, its seed (an i64
// scalar). q, k, v: f16/bf16/f32
// [batch..., rows, head dim], contiguous, one dtype, equal batch dims and
// head dims (<= 128); the mask: bool or q's dtype, contiguous, broadcast to
// the scores' [batch..., L, S] as ir/core/FusedAttention.h allows.
struct AttentionStep {
  // A user mask operand: none, bool (true = attend) or additive.
  enum class Mask { None, Bool, Additive };
  bool backward = false;
  bool causal = false;
  Mask mask = Mask::None;
  double scale = 1.0;
  int paddedHeadDim = 0; // the kernels' head dim: a multiple of 16 >= the real one
  // Forward: also writes the log-sum-exp (operand 1) for a later backward.
  bool saveLse = false;
  // Backward: reads that forward's lse (operand 3, not written) and output
  // (operand 9) instead of recomputing them; writes delta.
  bool savedForward = false;
  // Dropout on the probabilities (16-bit operands only): the dropout op's
  // draw (compiler's Philox, element index row-major over [batch..., L, S],
  // this stream) keeps a probability scaled by 1 / (1 - p) where it is at
  // least dropoutP; forward and backward draw the same mask.
  double dropoutP = 0;
  uint32_t dropoutStream = 0;
  bool dropout() const { return dropoutP > 0; }
};

// A convolution step (GPU): conv2d or one of its gradients, by cuDNN's
// engines where the runtime has cuDNN 9 and they take the problem, else by
// the step's loop kernel (a direct reduction nest, one thread or lane group
// per output). Operands are the loop kernel's: forward y, x, w; backward
// input dx, dy, w; backward weight dw, dy, x. Every operand is NCHW (weights
// [out channels, in channels / groups, kh, kw]) and contiguous, or with
// channelsLast every one NHWC (weights [out channels, kh, kw, in channels /
// groups]): conv2d's channels_last.
struct ConvolutionStep {
  enum class Direction { Forward, BackwardInput, BackwardWeight };
  Direction direction = Direction::Forward;
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool channelsLast = false;
  // "forward", "backward_input", "backward_weight".
  std::string directionName() const;
};

// A GPU kernel variant: one instantiation of a loop step's kernel template
// with its launch geometry. Loop kernels: BLOCK threads, each computing ITEMS
// outputs (lanes == 1), or LANES threads cooperating on each output (a
// reduction; lanes a power of two up to 32, or the whole block). Chain
// kernels (row): BLOCK threads on one row of the chain.
// A collective step (docs/sharding.md): this device's part of a collective
// over `axes` of the mesh `mesh` (`meshSizes` devices per axis, row-major
// device numbering), in the flat form the compiler lowers every collective
// to (chunks along the first dim, contiguous): all_reduce, all_gather,
// reduce_scatter, all_to_all (chunk r to member r), all_slice (keep chunk
// r), broadcast (from member `root`), axis_index (the i64 rank). Operands:
// result, then x (none for axis_index). The runtime runs it through the
// executable's communicator (MPI for CPU artifacts).
struct CollectiveStep {
  enum class Op { AllReduce, AllGather, ReduceScatter, AllToAll, AllSlice, Broadcast, AxisIndex };
  enum class Reduction { Sum, Mean, Max, Min };
  Op op = Op::AllReduce;
  Reduction reduction = Reduction::Sum;
  std::string mesh;
  std::vector<std::string> meshAxes;
  std::vector<int64_t> meshSizes;
  std::vector<std::string> axes; // the group's axes, in rank order
  int64_t root = 0;

  static const char *opName(Op op);
  static const char *reductionName(Reduction r);
};

struct KernelVariant {
  int block = 256;
  int items = 1;
  int lanes = 1;
  bool row = false;
  // A chain kernel's variant that first copies the row of the operands its
  // steps read only at that row (and more than once) into dynamic shared
  // memory, then runs the steps on that copy: this many bytes per block
  // (0: none; the runtime skips it where the GPU has less).
  int64_t cacheBytes = 0;
  // A chain kernel's variant that splits each row across a thread-block
  // cluster of this many blocks (Hopper and later): each block computes
  // (and caches, with cacheBytes its share) a contiguous part of the row,
  // reductions combine through distributed shared memory. Several blocks per
  // SM then overlap one row's loads with another's stores where a whole-row
  // cache allowed one (1: the row in one block). Launched with rows x
  // cluster blocks.
  int cluster = 1;
  // An elementwise kernel's variant whose threads compute `vector` (4)
  // consecutive outputs per item, read and written as aligned vectors
  // where the pointers allow (1: one output per item).
  int vector = 1;
  // The kernel's symbol suffix: bB_iI, bB_iI_v4, bB_lL, bB_r1, bB_r1c or
  // bB_r1c_kN (a row split across a cluster of N; the kernel is
  // `symbol + "_" + name()`).
  std::string name() const;
  int64_t outputsPerBlock() const {
    return row ? 1 : lanes > 1 ? block / lanes : int64_t(block) * items * vector;
  }
  bool operator==(const KernelVariant &o) const {
    return block == o.block && items == o.items && lanes == o.lanes && row == o.row && cacheBytes == o.cacheBytes &&
           vector == o.vector && cluster == o.cluster;
  }
};
// Why a variant cannot be launched (empty: it can).
std::string variantProblem(const KernelVariant &variant);
// Threads per row of a chain kernel whose steps compute at most `rowWork`
// iterations per row: the variant the runtime launches, and so the block
// sizes codegen emits where rowWork is static. Short rows are a chain of
// latencies (load, reduce, barrier, ...): 64 threads per row keep 32 rows
// in flight per SM where 256 keep 8. Measured on an H100 (GPT-2 block, 8192
// rows): its 768-wide layer norms 40-54 us at 64 instead of 49-78 at 256;
// the 3072-wide gelu chain 93 us at 64, 89 at 256. Softmax and layer norm
// rows of 4096: 256 beat 512 (0.239 vs 0.254 ms).
int chainRowThreads(int64_t rowWork);

// What a GEMM library applies to a matmul's product before storing it.
struct MatmulEpilogue {
  enum class Activation { None, Relu, GeluTanh };
  Activation activation = Activation::None;
  bool bias = false;         // operands[3] is read: one bias per output column
  bool biasGradient = false; // operands[3] is written: the column sums of b
                             // (2-D, summed over the GEMM's k: a linear
                             // layer's bias gradient beside a^T @ b)
  bool biasGradientOfA = false; // with biasGradient: the column sums of a
                                // instead (stored [k, m], read transposed:
                                // dy^T @ x, PyTorch's weight-gradient layout)
  bool empty() const { return activation == Activation::None && !bias && !biasGradient; }
  // "", "relu", "gelu_tanh", "bias", "bias_relu", "bias_gelu_tanh", "bgrad",
  // "bgrad_a": for messages and traces.
  std::string name() const;
  bool operator==(const MatmulEpilogue &o) const {
    return activation == o.activation && bias == o.bias && biasGradient == o.biasGradient &&
           biasGradientOfA == o.biasGradientOfA;
  }
};

struct Step {
  // ScatterAdd: result (V, D) = the rows of grad (N..., D) summed at
  // indices (N...) (embedding_backward; operands result, grad, indices).
  // The result is f32 (f64 for f64 grads): CPU adds in index order, CUDA
  // with atomic adds. An index outside [0, V) is skipped on the GPU (the
  // run-time index check reports it), an error on the CPU.
  enum class Kind { Loop, Matmul, Copy, Attention, Convolution, Collective, ScatterAdd };
  Kind kind = Kind::Loop;
  std::string label; // the tc kernel or op it came from (errors, profiles)
  // Outputs first, then inputs. Loop: the value the kernel writes, then the
  // values it reads, in the kernel's argument order. Matmul: result, a, b.
  // Copy: destination, source (its bytes at copyOffset).
  std::vector<int> operands;
  // Loop: `void symbol(void **operands, const int64_t *symbols, int64_t
  // begin, int64_t end)` runs outermost-loop iterations [begin, end).
  std::string symbol;
  bool parallel = false; // Loop: the outermost loop may be split over threads
  Dim extent;            // Loop: the outermost loop's trip count
  Dim work;              // Loop: iterations of the whole nest (split heuristic)
  Dim threads = Dim::of(1); // Loop: iterations of its non-reduced dims (GPU threads)
  Dim reduced = Dim::of(1); // Loop: iterations of its reduced dims per output
  // Loop: one output per iteration of the outermost loop (per row of a
  // chain: a row's statistic, a gather at its target), not a whole row.
  bool oneOutputPerRow() const { return threads == extent; }
  // Loop (GPU): the kernel's variants (KernelVariant::row false).
  std::vector<KernelVariant> variants;
  bool transposeA = false, transposeB = false; // Matmul: of the last two dims
  // Matmul: applied to the product before it is stored (a bias or bias
  // gradient adds operands[3]).
  MatmulEpilogue epilogue;
  // Loop: runs chunk by chunk of the outermost loop together with the next
  // step (same extent): rows it writes are read by the next only at the
  // same rows, so a chunk's intermediates stay in cache.
  bool chainNext = false;
  // Loop (GPU), on the first step of a chain: a kernel running the whole
  // chain, one row (of `extent`) per block, and its variants (row true). Its
  // parameters are every chained step's operands in order, then the symbols.
  std::string chainKernel;
  std::vector<KernelVariant> chainVariants;
  AttentionStep attention; // Attention
  // Convolution: also a loop step's fields (symbol, extent, work, threads,
  // reduced, variants; never chained), its kernel the fallback.
  ConvolutionStep convolution;
  CollectiveStep collective; // Collective
  // ScatterAdd: grad rows at this index are left out (embedding's
  // padding_idx); -1: none.
  int64_t skipIndex = -1;
  // Copy: where in the destination the source's bytes go, in destination
  // elements (a concatenation's piece along its leading dims).
  Dim copyOffset = Dim::of(0);
};

// Whether a step writes its operand number `operand` (the first ones, and a
// bias-gradient epilogue's sums).
bool writesOperand(const Step &step, size_t operand);

// The operand a bias-gradient epilogue sums (1: a, 2: b; stored 2-D, its
// column sums go to operands[3]).
inline size_t biasGradientSource(const Step &step) { return step.epilogue.biasGradientOfA ? 1 : 2; }

// An attention step's user mask and dropout seed operands (AttentionStep:
// the mask before the seed, both last).
inline size_t attentionSeedOperand(const Step &step) { return step.operands.size() - 1; }
inline size_t attentionMaskOperand(const Step &step) {
  return step.operands.size() - 1 - (step.attention.dropout() ? 1 : 0);
}

// A convolution step's operand values as x (input), w (weight), y (output),
// whatever its direction's operand order (forward y,x,w; backward-input
// dx,dy,w; backward-weight dw,dy,x: the written one first).
struct ConvolutionOperands {
  int x, w, y;
};
ConvolutionOperands convolutionOperands(const Step &step);

// A run-time check: an i32 scalar value (an arena buffer live to the last
// step) that the kernels leave nonzero when an input was out of range; the
// runtime raises `message` after the run (compiler/transforms/RunChecks.h).
struct RunCheck {
  int value = -1;
  std::string message;
};

struct SymbolDecl {
  std::string name;
  int64_t min = 1;
  std::optional<int64_t> max;
};

struct Target {
  std::string kind = "cpu"; // "cpu" (later "cuda")
  std::string triple;       // e.g. x86_64-pc-linux-gnu
  std::string cpu;          // LLVM CPU name the code was tuned for
  std::vector<std::string> features; // CPU features the code requires ("avx2", ...)
};

struct Artifact {
  std::string tensorcVersion;
  std::string function;
  Target target;
  std::map<std::string, std::string> options; // compile options, for the record
  std::vector<SymbolDecl> symbols;            // kernels receive sizes in this order
  std::vector<TensorDecl> inputs, outputs;
  std::vector<ValueDecl> values;
  std::vector<BufferDecl> buffers;
  std::vector<ConstantDecl> constants;
  std::vector<Step> steps;
  std::vector<RunCheck> checks;
  // GPU binaries compiled ahead of time (--precompile), by architecture
  // (sm_90): {offset, bytes} in the data section. Empty: JIT at load.
  std::map<std::string, std::pair<uint64_t, uint64_t>> binaries;
  std::string code; // the kernels: a shared library (cpu) or CUDA C++ source (cuda)
  std::string data; // bytes of constants
};

// The CUDA kernel of a scatter-add step (codegen/cuda/kernels/ScatterAdd.cuh),
// by its dtypes: tc_<function>_scatter_add_<result>_<grad>_<indices>.
std::string scatterAddKernel(const Artifact &a, const Step &step);

// A collective step as errors name it: "step 63 'grad_w' (all_reduce over
// [data])".
std::string collectiveStepName(const Step &step, size_t index);

// The most iterations any of `steps` first..last (a chain) computes per row
// of the first's extent: threads x reduced / rows, each Dim evaluated by
// `value`; -1 where one is unknown (nullopt) or there are no rows. Codegen
// (static dims: which block sizes to emit) and the runtime (bound dims: which
// to launch) reckon it alike.
int64_t chainRowWork(const std::vector<Step> &steps, size_t first, size_t last,
                     const std::function<std::optional<int64_t>(const Dim &)> &value);

// Whether a chain's steps first..last are one elementwise pass over its rows,
// with at most per-row values computed before it (cross-entropy's backward:
// the target's logit and the row's scale, then softmax minus one-hot): no
// step reduces and at most one computes more than one value per row. One
// block per row gains such a chain nothing a vectorized elementwise kernel
// lacks (CudaProgram runs its steps' own kernels by default).
bool chainIsOneElementwisePass(const std::vector<Step> &steps, size_t first, size_t last);

// What a CPU loop kernel was compiled for, as text: the symbols it reads
// sizes of (in order), its outermost extent, whether it may be split over
// threads, and each operand's dtype and shape. Codegen stores it
// in the kernel library beside the kernel (`SYMBOL_signature`); the loader
// compares it with the manifest's step, so a manifest edited or mismatched
// (an operand dropped, an extent, symbol or dtype changed) is an error, not
// a kernel writing past a buffer.
std::string loopSignature(const Artifact &artifact, const Step &step);

// The name of a loop kernel's signature in its library.
inline std::string loopSignatureSymbol(const std::string &kernel) { return kernel + "_signature"; }

// The value whose storage holds `value`: itself, or the value its aliases
// (views: a reshape) lead to.
int storageValue(const Artifact &artifact, int value);

// The file's bytes.
std::string serialize(const Artifact &artifact);
// Parses and checks an artifact (magic, version, sizes, checksum, manifest
// consistency); throws Error naming the problem. `where` names the file.
Artifact parse(const std::string &bytes, const std::string &where);
// Reads and parses a file; throws Error.
Artifact readFile(const std::string &path);

// FNV-1a, 64 bits.
uint64_t checksum(const char *data, size_t size);

} // namespace tensorc::artifact
