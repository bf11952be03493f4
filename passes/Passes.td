// Every tensorc pass, with its `tensorc-` flag. Passes that need only ir/ are
// implemented in passes/; passes that run a compiler stage (autodiff) are
// implemented beside that stage in compiler/ and declared here all the same.
#ifndef TENSORC_PASSES_TD
#define TENSORC_PASSES_TD

include "mlir/Pass/PassBase.td"

def AutocastPass : Pass<"tensorc-autocast", "mlir::ModuleOp"> {
  let summary = "Mixed precision: matmul/conv/attention in bf16 or f16, sensitive ops in f32";
  let description = [{
    Inserts casts by the policy of docs/autocast.md: matmul, conv2d and
    scaled_dot_product_attention take `dtype` operands (backends accumulate in
    f32); reductions, softmax, norms, losses, exp/log/pow take f32 operands;
    every other op promotes mixed float operands to the widest. Only f32
    values are lowered; the function's signature is unchanged. Run it before
    tensorc-autodiff to train in mixed precision.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"bf16\"", "the low-precision dtype: bf16 or f16">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def AutodiffPass : Pass<"tensorc-autodiff", "mlir::ModuleOp"> {
  let summary = "Replace the module's function by its joint forward+backward function";
  let description = [{
    Reverse-mode differentiation ahead of time (docs/autodiff.md). The
    function's outputs become the forward outputs followed by `grad_<input>`
    for each input differentiated; non-scalar differentiated outputs get a
    cotangent argument. Values off every path from a differentiated input to
    a differentiated output get no backward nodes.
  }];
  let options = [
    ListOption<"wrt", "wrt", "std::string",
               "inputs (tc.name) to differentiate with respect to; default: the tc.trainable ones">,
    ListOption<"of", "of", "std::string",
               "outputs (tc.name) to differentiate; default: the only scalar float output, else all float outputs">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def DecomposePass : Pass<"tensorc-decompose", "mlir::ModuleOp"> {
  let summary = "Rewrite composite ops into primitives";
  let description = [{
    softmax, log_softmax, layer_norm, rms_norm, batch_norm, cross_entropy,
    gelu, silu, var and scaled_dot_product_attention become elementwise ops,
    reductions, matmuls and shape ops computing the same function (within
    rounding). `ops` limits the rewrite to some of them, so a backend with a
    dedicated kernel keeps those whole.
  }];
  let options = [
    ListOption<"ops", "ops", "std::string", "ops to decompose (default: every decomposable op)">,
    Option<"keepFusedAttention", "keep-fused-attention", "bool", "false",
           "keep attention the CUDA backend's fused kernels take (ir/core/FusedAttention.h)">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def RunChecksPass : Pass<"tensorc-run-checks", "mlir::ModuleOp"> {
  let summary = "Append run-time index checks as check results";
  let description = [{
    For each cross_entropy target, embedding index and gather/index_select
    index, appends a computation of "some element is out of range" (an i32
    scalar) as an extra function result marked `tc.check = "<message>"`; the
    code generators make those the artifact's checks and the runtime raises
    the message after a run (compiler/transforms/RunChecks.h). A max, min,
    argmax or argmin over a static empty range is an error.
  }];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def FoldConstantsPass : Pass<"tensorc-fold-constants", "mlir::ModuleOp"> {
  let summary = "Evaluate ops whose operands are all constants";
  let description = [{
    Evaluates every op whose operands are constants (transitively) with the
    reference interpreter and replaces it by a tc.constant, when its static
    result has at most `max-elements` elements.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", "4096", "largest result folded">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def FusionPass : Pass<"tensorc-fuse", "mlir::ModuleOp"> {
  let summary = "Group ops into kernels (tc.fused) around reductions, GEMM epilogues and elementwise chains";
  let description = [{
    See passes/Fusion.cpp and docs/fusion.md. After it the function is a
    sequence of tc.fused kernels, library calls (matmul, conv2d) and
    reshape-like views.
  }];
  let options = [
    Option<"report", "report", "bool", "false", "print every kernel, its ops, and the refused fusions">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def MemoryPlanPass : Pass<"tensorc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Plan one arena for every intermediate buffer over the kernel schedule";
  let description = [{
    See passes/MemoryPlan.cpp: liveness over the top-level schedule, views
    aliased, in-place elementwise kernels, best-fit packing (largest first).
    Annotates ops with tc.buffer and the function with tc.memory_plan.
  }];
  let options = [
    Option<"report", "report", "bool", "false", "print arena bytes, the lower bound and counts">,
    ListOption<"dims", "dims", "std::string", "SYMBOL=SIZE for symbolic dims (default: min(bound, 64))">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def NarrowAttentionPass : Pass<"tensorc-narrow-attention", "mlir::ModuleOp"> {
  let summary = "Attention over f32 casts of 16-bit values reads the 16-bit values";
  let description = [{
    scaled_dot_product_attention of f32 operands that are (views and literal
    scalings of) casts from f16/bf16 takes the 16-bit values with
    `out_dtype = f32` (compiler/transforms/NarrowAttention.h): the same f32
    result, half the bytes read, tensor cores. Its backward likewise, given
    the 16-bit cotangent (f32 gradients; those of scaled operands divided
    by their factors after it). Run after autodiff.
  }];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def PadMatmulsPass : Pass<"tensorc-pad-matmuls", "mlir::ModuleOp"> {
  let summary = "Pad large GEMMs whose leading dimensions are off 16 bytes";
  let description = [{
    As Inductor's pad_mm: a matmul whose N (or K, or M of a stored
    transpose) would give cuBLASLt an unaligned leading dimension computes
    over zero-padded operands and slices its product back
    (compiler/transforms/PadMatmuls.h); the same values.
  }];
  let options = [
    Option<"minimumWork", "minimum-work", "int64_t", "int64_t(1) << 27", "smallest M*N*K padded">,
  ];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def RecognizeAttentionPass : Pass<"tensorc-recognize-attention", "mlir::ModuleOp"> {
  let summary = "Replace hand-written attention by scaled_dot_product_attention";
  let description = [{
    matmul(softmax(where(mask, q @ transpose(k) * s, -inf) or (... + mask)),
    v) becomes one scaled_dot_product_attention (is_causal when the mask is
    rows >= columns of iota), computing the same function; matches whose
    intermediates are used elsewhere are left alone.
  }];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def SchedulePass : Pass<"tensorc-schedule", "mlir::ModuleOp"> {
  let summary = "Reorder ops to lower peak memory when the dataflow allows";
  let description = [{
    Greedy list scheduling by bytes freed net of bytes allocated; the new
    order is kept only when its peak of live intermediates is lower.
  }];
  let dependentDialects = ["::tensorc::tc::TCDialect", "::mlir::func::FuncDialect"];
}

def SimplifyPass : Pass<"tensorc-simplify"> {
  let summary = "Exact algebraic identities, view canonicalization, folding and dead code";
  let description = [{
    Removes x * 1, x / 1, x - 0, x + (-0.0) (and x + 0 for integers),
    neg(neg(x)), where(c, x, x), exact widen-then-narrow casts and identity
    permutes; composes permute chains; rewrites squeeze, unsqueeze and
    flatten as reshape so reshape chains collapse; runs the tc folders
    (cast, reshape, transpose and broadcast_to identities and chains,
    constants) and erases dead ops. x + 0.0 is kept for floats: it turns -0.0
    into +0.0.
  }];
  let dependentDialects = ["::tensorc::tc::TCDialect"];
}

def ChannelsLastPass : Pass<"tensorc-channels-last", "mlir::ModuleOp"> {
  let summary = "16-bit convolutions on channels-last (NHWC) storage, permutes moved out of the way";
  let description = [{
    Rewrites each f16/bf16 conv2d, conv2d_backward_input and
    conv2d_backward_weight into its `channels_last` form between permutes,
    then moves the NHWC -> NCHW permutes down through elementwise ops,
    reductions and concatenations until they cancel against the next
    convolution's NCHW -> NHWC permute (passes/ChannelsLast.cpp). The CUDA
    codegen pipeline runs it where cuDNN runs the convolutions.
  }];
  let dependentDialects = ["::tensorc::tc::TCDialect"];
}

#endif // TENSORC_PASSES_TD
