// The backend-neutral half of code generation: a tc function after a
// backend pipeline (tc.fused kernels and views) becomes an artifact's
// program: values with views and storage, arena buffers with live ranges,
// and a launch sequence of loop nests, matmul calls and copies. Each loop
// nest is handed to the backend's emitter (CPU: MLIR loops -> LLVM; CUDA:
// CUDA C++), which makes the nest's code. See docs/cpu-backend.md.
#pragma once

#include "codegen/cpu/LoopNest.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace tensorc::codegen {

// Makes the code of one loop nest; `point` computes the nest's value at an
// iteration point (it may be called with any builder and context). Returns
// the kernel variants made (the first is the heuristic default; none where
// the backend makes one function per nest).
using NestEmitter =
    std::function<std::vector<artifact::KernelVariant>(const cpu::NestSpec &, const cpu::PointFn &)>;

// Makes the fused attention kernels for one configuration (the operands'
// dtype, the output's -- f32 for 16-bit operands with out_dtype --, padded
// head dim, causal, user mask kind, dropout on the probabilities); returns their symbol prefix
// (artifact::AttentionStep).
using AttentionEmitter = std::function<std::string(DType, DType out, int paddedHeadDim, bool causal,
                                                   artifact::AttentionStep::Mask mask, bool dropout)>;

struct ProgramOptions {
  // The backend's GEMM library applies epilogues (cuBLASLt): a bias add
  // along the output's columns and/or relu or gelu(tanh) of a matmul whose
  // product nothing else reads become part of the matmul step.
  bool matmulEpilogues = false;
  // conv2d (groups 1, static channels and spatial sizes) as im2col + GEMM
  // instead of a direct reduction nest (measured: docs/cuda-backend.md).
  bool convAsGemm = false;
  // Integer matmul as a reduction nest (the GEMM library has none).
  bool integerMatmulAsNest = false;
  // Reductions over leading dims (column sums such as a layer norm's weight
  // gradient) in two stages over chunks of 8 rows, one thread per output
  // column reading rows in order: GPU threads of one output row read
  // adjacent addresses (the one-stage nest read a column per block).
  bool splitColumnReductions = false;
  // conv2d without a bias (the pipeline splits it off) and its gradients
  // become convolution steps (cuDNN in the GPU runtime), each with its
  // direct reduction nest as the kernel to fall back on.
  bool convolutionLibrary = false;
  // With matmulEpilogues: a column sum of a weight-gradient GEMM's dy
  // rides on that GEMM (the bias-gradient epilogue).
  bool biasGradientEpilogues = false;
};

// What the program builder knows about its steps beyond the artifact.
struct ProgramNotes {
  // Per step (loop steps; empty for others): the values it reads only at
  // the row it computes (the leading, unreduced index of its nest), such as
  // a softmax's input; not values read at other rows or broadcast across
  // rows. A chain kernel may keep those rows in shared memory.
  std::vector<std::vector<int>> readAtRowOnly;
};

// Kernel symbols are `prefix` + step index. Throws Error naming the op for
// anything the backends cannot run.
// `emitAttention`: the backend's fused attention (attention the pipeline kept
// whole becomes an attention step); without one, attention must have been
// decomposed. `notes`, if given, is filled in.
artifact::Artifact buildProgram(mlir::func::FuncOp fn, const std::string &prefix,
                                const NestEmitter &emit, const ProgramOptions &options = {},
                                const AttentionEmitter &emitAttention = {}, ProgramNotes *notes = nullptr);

// Whether the code generators run `op` (for `tensorc ops`).
bool supportsOp(const std::string &op);

// The module's one function; throws Error otherwise.
mlir::func::FuncOp singleFunction(mlir::ModuleOp module);

} // namespace tensorc::codegen
