// The op set v1. Each op's operands and attributes mirror its row in
// ir/core/OpSchema.cpp (a unit test checks both agree); its result types are
// inferred by ir/core/ShapeInference.cpp and checked by TC_InferredResultTypes.
#ifndef TC_OPS_TD
#define TC_OPS_TD

include "ir/dialect/TCBase.td"
include "ir/dialect/TCTypes.td"
include "ir/dialect/TCAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class TC_Op<string mnemonic, list<Trait> traits = []>
    : Op<TC_Dialect, mnemonic, !listconcat(traits, [Pure, TC_InferredResultTypes])> {
  let results = (outs TC_Tensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Unary elementwise
//===----------------------------------------------------------------------===//

class TC_UnaryOp<string mnemonic, string formula, string dtypes = "float">
    : TC_Op<mnemonic> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for every element. Operand "
    # "dtype: " # dtypes # "; the result has the operand's shape and dtype. "
    # "f16/bf16 results are computed wider and rounded once."
    # "\n\nExample:\n\n```mlir\n%y = tc." # mnemonic
    # " %x : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 4], f32>\n```";
  let arguments = (ins TC_Tensor:$x);
}

def TC_NegOp : TC_UnaryOp<"neg", "-x", "numeric">;
def TC_AbsOp : TC_UnaryOp<"abs", "|x|", "numeric">;
def TC_ExpOp : TC_UnaryOp<"exp", "e^x">;
def TC_LogOp : TC_UnaryOp<"log", "ln(x) (nan below 0, -inf at 0)">;
def TC_SqrtOp : TC_UnaryOp<"sqrt", "sqrt(x) (nan below 0)">;
def TC_RsqrtOp : TC_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def TC_ReciprocalOp : TC_UnaryOp<"reciprocal", "1 / x">;
def TC_TanhOp : TC_UnaryOp<"tanh", "tanh(x)">;
def TC_SigmoidOp : TC_UnaryOp<"sigmoid", "1 / (1 + e^-x)">;
def TC_ReluOp : TC_UnaryOp<"relu", "max(x, 0)", "numeric">;
def TC_SiluOp : TC_UnaryOp<"silu", "x * sigmoid(x)">;
def TC_SinOp : TC_UnaryOp<"sin", "sin(x)">;
def TC_CosOp : TC_UnaryOp<"cos", "cos(x)">;
def TC_ErfOp : TC_UnaryOp<"erf", "erf(x)">;
def TC_FloorOp : TC_UnaryOp<"floor", "the largest integer <= x (identity on integers)", "numeric">;
def TC_CeilOp : TC_UnaryOp<"ceil", "the smallest integer >= x (identity on integers)", "numeric">;
def TC_SignOp : TC_UnaryOp<"sign", "-1, 0 or 1 by the sign of x (0 for -0 and for nan, as PyTorch)", "numeric">;
def TC_LogicalNotOp : TC_UnaryOp<"logical_not", "x == 0 (result i1)", "any"> {
  let description = "Computes `x == 0` for every element, as i1. Operand "
    # "dtype: any."
    # "\n\nExample:\n\n```mlir\n%y = tc.logical_not %x : (!tc.tensor<[4], i1>) -> !tc.tensor<[4], i1>\n```";
}

def TC_GeluOp : TC_Op<"gelu"> {
  let summary = "elementwise GELU";
  let description = [{
    `approximate = "none"` (default): `0.5 * x * (1 + erf(x / sqrt(2)))`.
    `approximate = "tanh"`: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
    Float dtypes; the result has the operand's shape and dtype.

    Example:

    ```mlir
    %y = tc.gelu %x {approximate = "tanh"} : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
}

//===----------------------------------------------------------------------===//
// Binary elementwise (NumPy/PyTorch broadcasting)
//===----------------------------------------------------------------------===//

class TC_BinaryOp<string mnemonic, string formula, string dtypes, string result>
    : TC_Op<mnemonic> {
  let summary = "elementwise " # mnemonic # " with broadcasting";
  let description = "Computes `" # formula # "` elementwise after broadcasting "
    # "both operands to a common shape (right-aligned; a dim of size 1 "
    # "stretches; symbolic dims must match exactly). Operands: " # dtypes
    # ". Result: " # result # ".\n\nExample:\n\n```mlir\n%z = tc." # mnemonic
    # " %x, %y : (!tc.tensor<[B, 4], f32>, !tc.tensor<[4], f32>) -> "
    # "!tc.tensor<[B, 4], " # !if(!eq(result, "i1"), "i1", "f32") # ">\n```";
  let arguments = (ins TC_Tensor:$lhs, TC_Tensor:$rhs);
}

def TC_AddOp : TC_BinaryOp<"add", "lhs + rhs", "the same numeric dtype", "that dtype">;
def TC_SubOp : TC_BinaryOp<"sub", "lhs - rhs", "the same numeric dtype", "that dtype">;
def TC_MulOp : TC_BinaryOp<"mul", "lhs * rhs", "the same numeric dtype", "that dtype">;
def TC_DivOp : TC_BinaryOp<"div", "lhs / rhs (IEEE: x/0 is +-inf or nan)", "the same float dtype", "that dtype">;
def TC_PowOp : TC_BinaryOp<"pow", "lhs ^ rhs (C pow semantics)", "the same float dtype", "that dtype">;
def TC_MaximumOp : TC_BinaryOp<"maximum", "max(lhs, rhs), nan if either is nan", "the same numeric dtype", "that dtype">;
def TC_MinimumOp : TC_BinaryOp<"minimum", "min(lhs, rhs), nan if either is nan", "the same numeric dtype", "that dtype">;
def TC_EqOp : TC_BinaryOp<"eq", "lhs == rhs", "the same dtype", "i1">;
def TC_NeOp : TC_BinaryOp<"ne", "lhs != rhs", "the same dtype", "i1">;
def TC_LtOp : TC_BinaryOp<"lt", "lhs < rhs", "the same dtype", "i1">;
def TC_LeOp : TC_BinaryOp<"le", "lhs <= rhs", "the same dtype", "i1">;
def TC_GtOp : TC_BinaryOp<"gt", "lhs > rhs", "the same dtype", "i1">;
def TC_GeOp : TC_BinaryOp<"ge", "lhs >= rhs", "the same dtype", "i1">;
def TC_LogicalAndOp : TC_BinaryOp<"logical_and", "(lhs != 0) and (rhs != 0)", "any dtypes", "i1">;
def TC_LogicalOrOp : TC_BinaryOp<"logical_or", "(lhs != 0) or (rhs != 0)", "any dtypes", "i1">;

def TC_WhereOp : TC_Op<"where"> {
  let summary = "elementwise select";
  let description = [{
    `condition ? x : y` elementwise, all three broadcast together.
    `condition` is i1; `x` and `y` share a dtype, which the result has.

    Example:

    ```mlir
    %r = tc.where %c, %x, %y : (!tc.tensor<[4], i1>, !tc.tensor<[4], f32>, !tc.tensor<[], f32>) -> !tc.tensor<[4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$condition, TC_Tensor:$x, TC_Tensor:$y);
}

def TC_CastOp : TC_Op<"cast"> {
  let summary = "element type conversion";
  let description = [{
    Converts every element to `to`. Float to float rounds to nearest even;
    float to integer truncates toward zero (out-of-range and nan are
    undefined, as in C); to i1 is `x != 0`; from i1 is 0 or 1.

    Example:

    ```mlir
    %h = tc.cast %x {to = bf16} : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], bf16>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TypeAttr:$to);
  let hasFolder = 1;
}

def TC_ClampOp : TC_Op<"clamp"> {
  let summary = "elementwise clamp";
  let description = [{
    `min(max(x, min), max)` with either bound optional (at least one given).
    As in PyTorch, if `min > max` every element becomes `max`; nan stays nan.
    Numeric dtypes; bounds are converted to the operand's dtype.

    Example:

    ```mlir
    %y = tc.clamp %x {min = 0.0 : f64, max = 6.0 : f64} : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class TC_ReductionOp<string mnemonic, string what, string dtypes> : TC_Op<mnemonic> {
  let summary = mnemonic # " over axes";
  let description = "Reduces `x` over `axes` (negative axes count from the "
    # "end; absent means every axis; an empty list or a repeated axis is an "
    # "error) to " # what # ". With `keepdim` the reduced axes stay as size 1. "
    # "Accumulation is in f64 (floats) or i64 (integers). Dtypes: " # dtypes
    # ".\n\nExample:\n\n```mlir\n%s = tc." # mnemonic # " %x {axes = array<i64: -1>, keepdim = true}"
    # " : (!tc.tensor<[B, 7], f32>) -> !tc.tensor<[B, 1], f32>\n```";
  let arguments = (ins TC_Tensor:$x, OptionalAttr<DenseI64ArrayAttr>:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
}

def TC_SumOp : TC_ReductionOp<"sum", "the sum (0 over an empty range)", "numeric">;
def TC_MeanOp : TC_ReductionOp<"mean", "the arithmetic mean (nan over an empty range)", "float">;
def TC_MaxOp : TC_ReductionOp<"max", "the largest element (nan if any is nan; an empty range is a run-time error)", "numeric">;
def TC_MinOp : TC_ReductionOp<"min", "the smallest element (nan if any is nan; an empty range is a run-time error)", "numeric">;
def TC_ProdOp : TC_ReductionOp<"prod", "the product (1 over an empty range)", "numeric">;
def TC_LogsumexpOp : TC_ReductionOp<"logsumexp", "log(sum(exp(x))), computed around the maximum so that no exp overflows (-inf where every element is -inf; +inf if any is +inf; nan if any is nan; -inf over an empty range, except on backends that decompose it into max and sum (the CPU backend), where it is max's run-time error). The CUDA backend reduces it in one pass (the running maximum rescales the running sum), and decomposes softmax, log_softmax and cross_entropy into it", "float">;
def TC_VarOp : TC_ReductionOp<"var", "the variance sum((x - mean)^2) / (n - correction), computed in two passes (inf or nan when n <= correction)", "float"> {
  let arguments = (ins TC_Tensor:$x, OptionalAttr<DenseI64ArrayAttr>:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim,
                       DefaultValuedAttr<I64Attr, "1">:$correction);
}

class TC_ArgReductionOp<string mnemonic, string what> : TC_Op<mnemonic> {
  let summary = "index of the " # what # " element";
  let description = "The i64 index of the " # what # " element along `axis` "
    # "(the first on ties; a nan counts as " # what # "). Without `axis`, the "
    # "index into the flattened tensor. `keepdim` keeps the axis as size 1 "
    # "(every axis, when `axis` is absent). Numeric dtypes."
    # "\n\nExample:\n\n```mlir\n%i = tc." # mnemonic # " %x {axis = 1 : i64}"
    # " : (!tc.tensor<[B, 10], f32>) -> !tc.tensor<[B], i64>\n```";
  let arguments = (ins TC_Tensor:$x, OptionalAttr<I64Attr>:$axis,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
}

def TC_ArgmaxOp : TC_ArgReductionOp<"argmax", "largest">;
def TC_ArgminOp : TC_ArgReductionOp<"argmin", "smallest">;

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def TC_MatmulOp : TC_Op<"matmul"> {
  let summary = "matrix product with torch.matmul semantics";
  let description = [{
    Both operands have rank >= 1 and one numeric dtype. A 1-D `lhs` gets a
    leading 1 and a 1-D `rhs` a trailing 1, removed again from the result.
    The last dim of `lhs` must equal the second-to-last of `rhs`; the
    leading (batch) dims broadcast. Result: batch dims, then M (unless lhs
    was 1-D), then N (unless rhs was 1-D). Accumulation in f64/i64.

    Example:

    ```mlir
    %y = tc.matmul %x, %w : (!tc.tensor<[B, 784], f32>, !tc.tensor<[784, 128], f32>) -> !tc.tensor<[B, 128], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$lhs, TC_Tensor:$rhs);
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

class TC_SoftmaxLikeOp<string mnemonic, string formula> : TC_Op<mnemonic> {
  let summary = mnemonic # " along an axis";
  let description = "Computes `" # formula # "` along `axis` (default -1), "
    # "subtracting the maximum first for stability. Float dtypes."
    # "\n\nExample:\n\n```mlir\n%p = tc." # mnemonic # " %x {axis = 1 : i64}"
    # " : (!tc.tensor<[B, 10], f32>) -> !tc.tensor<[B, 10], f32>\n```";
  let arguments = (ins TC_Tensor:$x, DefaultValuedAttr<I64Attr, "-1">:$axis);
}

def TC_SoftmaxOp : TC_SoftmaxLikeOp<"softmax", "exp(x_i) / sum_j exp(x_j)">;
def TC_LogSoftmaxOp : TC_SoftmaxLikeOp<"log_softmax", "x_i - log(sum_j exp(x_j))">;

def TC_LayerNormOp : TC_Op<"layer_norm", [AttrSizedOperandSegments]> {
  let summary = "layer normalization over trailing axes";
  let description = [{
    Normalizes over the axes `[axis, rank)` (default: the last):
    `y = (x - mean) / sqrt(var + eps) * weight + bias` with the biased
    variance. `weight` and `bias` are optional and have the shape of the
    normalized axes and `x`'s float dtype.

    Example:

    ```mlir
    %y = tc.layer_norm %x, %w, %b {eps = 1.0e-05 : f64, operandSegmentSizes = array<i32: 1, 1, 1>} : (!tc.tensor<[B, T, 64], f32>, !tc.tensor<[64], f32>, !tc.tensor<[64], f32>) -> !tc.tensor<[B, T, 64], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, Optional<TC_Tensor>:$weight, Optional<TC_Tensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
}

def TC_RmsNormOp : TC_Op<"rms_norm"> {
  let summary = "RMS normalization over trailing axes";
  let description = [{
    `y = x / sqrt(mean(x^2 over [axis, rank)) + eps) * weight`. `eps`
    defaults to the machine epsilon of `x`'s dtype (as torch.rms_norm);
    `weight` is optional with the shape of the normalized axes. Float dtypes.

    Example:

    ```mlir
    %y = tc.rms_norm %x, %w : (!tc.tensor<[B, 64], f32>, !tc.tensor<[64], f32>) -> !tc.tensor<[B, 64], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, Optional<TC_Tensor>:$weight,
                       DefaultValuedAttr<I64Attr, "-1">:$axis, OptionalAttr<F64Attr>:$eps);
}

def TC_CrossEntropyOp : TC_Op<"cross_entropy"> {
  let summary = "cross-entropy loss with integer class targets";
  let description = [{
    `logits` is (N, C, d1, ...) or (C); `target` (integer) is (N, d1, ...)
    or (). Per element: `l = -(1 - s) * logp[y] - (s / C) * sum_c logp[c]`
    with `logp = log_softmax(logits, class axis)` and `s =
    label_smoothing`; elements whose target equals `ignore_index` get 0 and
    do not count. `reduction`: "none" (shape of target), "sum", or "mean"
    (divided by the number of counted elements; nan if none). A target
    outside [0, C) that is not `ignore_index` is a run-time error.

    Example:

    ```mlir
    %l = tc.cross_entropy %logits, %y : (!tc.tensor<[B, 10], f32>, !tc.tensor<[B], i64>) -> !tc.tensor<[], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$logits, TC_Tensor:$target,
                       DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
}

def TC_EmbeddingOp : TC_Op<"embedding"> {
  let summary = "row lookup in an embedding table";
  let description = [{
    `result[i..., :] = weight[indices[i...], :]` for a (V, D) `weight` and
    integer `indices` of any shape; result shape is indices' shape + (D).
    An index outside [0, V) is a run-time error. With `padding_idx` (in
    [0, V)), rows looked up at that index get no gradient (PyTorch's
    `padding_idx`; the lookup itself is unchanged).

    Example:

    ```mlir
    %e = tc.embedding %ids, %table : (!tc.tensor<[B, T], i64>, !tc.tensor<[50257, 768], f32>) -> !tc.tensor<[B, T, 768], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$indices, TC_Tensor:$weight, OptionalAttr<I64Attr>:$padding_idx);
}

def TC_EmbeddingBackwardOp : TC_Op<"embedding_backward"> {
  let summary = "the gradient of an embedding table: rows summed by index";
  let description = [{
    Given `grad` (I..., D), the cotangent of an embedding's result, and the
    embedding's integer `indices` (I...), returns the gradient of its
    (`num_weights`, D) table: `result[v, :] = sum of grad[i..., :] over the
    i... with indices[i...] = v` (zero rows for indices never looked up).
    The result is accumulated in f32 for f16/bf16 `grad` (the result dtype
    is then f32; autodiff casts it to the table's dtype), in `grad`'s dtype
    otherwise. An index outside [0, `num_weights`) is a run-time error.
    Rows of `grad` at `padding_idx` (optional, in [0, `num_weights`)) are
    left out.
    Produced by autodiff (the gradient of embedding and index_select); not
    differentiable itself. It runs as a scatter-add step (CPU: in index
    order; CUDA: atomic adds, so the order of a row's sums, and its last
    bits, vary between runs).

    Example:

    ```mlir
    %dw = tc.embedding_backward %dy, %ids {num_weights = 50257 : i64} : (!tc.tensor<[B, T, 768], bf16>, !tc.tensor<[B, T], i64>) -> !tc.tensor<[50257, 768], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$grad, TC_Tensor:$indices, I64Attr:$num_weights,
                       OptionalAttr<I64Attr>:$padding_idx);
}

def TC_DropoutOp : TC_Op<"dropout"> {
  let summary = "dropout with a counter-based random mask";
  let description = [{
    For element `i` (row-major linear index) of `x`: compute Philox4x32-10
    with key `(seed & 0xffffffff, seed >> 32)` and counter
    `(i & 0xffffffff, i >> 32, stream, 0)`; let `u = (out[0] >> 8) * 2^-24`.
    The element is kept as `x / (1 - p)` if `u >= p`, else 0 (all 0 when
    `p = 1`). `seed` is an integer scalar tensor, so every run and every
    backend can reproduce the same mask; `stream` separates dropouts that
    share a seed.

    Example:

    ```mlir
    %y = tc.dropout %x, %seed {p = 1.0e-01 : f64} : (!tc.tensor<[B, 64], f32>, !tc.tensor<[], i64>) -> !tc.tensor<[B, 64], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_Tensor:$seed, DefaultValuedAttr<F64Attr, "0.5">:$p,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
}

def TC_Conv2dOp : TC_Op<"conv2d"> {
  let summary = "2-D convolution (NCHW, cross-correlation)";
  let description = [{
    `x` (N, C, H, W), `weight` (O, C / groups, kH, kW), optional `bias`
    (O). Output (N, O, Ho, Wo) with
    `Ho = (H + 2*padding[0] - dilation[0]*(kH - 1) - 1) / stride[0] + 1`
    (floor), likewise W. Channels, H and W must be static; N may be
    symbolic. Zero padding. Float dtypes, accumulation in f64.
    With `channels_last`, the same convolution on channels-last storage:
    `x` (N, H, W, C), `weight` (O, kH, kW, C / groups), output
    (N, Ho, Wo, O); the gradients likewise. The CUDA pipeline rewrites
    16-bit convolutions to it (tensorc-channels-last: cuDNN's tensor-core
    engines read NHWC without transposing).

    Example:

    ```mlir
    %y = tc.conv2d %x, %w, %b {padding = array<i64: 1, 1>} : (!tc.tensor<[N, 3, 32, 32], f32>, !tc.tensor<[16, 3, 3, 3], f32>, !tc.tensor<[16], f32>) -> !tc.tensor<[N, 16, 32, 32], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_Tensor:$weight, Optional<TC_Tensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       DefaultValuedAttr<BoolAttr, "false">:$channels_last);
}

def TC_Conv2dBackwardInputOp : TC_Op<"conv2d_backward_input"> {
  let summary = "the gradient of conv2d's input";
  let description = [{
    Given `grad` (N, O, Ho, Wo), the cotangent of a conv2d's output, and the
    conv2d's `weight` (O, C / groups, kH, kW), returns the gradient of its
    input (N, C, H, W), `input_size` = [H, W] (the output size alone does not
    determine it when stride > 1):
    `dx[n, g*C/groups + c, h, w] = sum over o < O/groups, kh, kw of
    grad[n, g*O/groups + o, i, j] * weight[g*O/groups + o, c, kh, kw]` where
    `h = i*stride[0] - padding[0] + kh*dilation[0]` (likewise w). The other
    attributes are the conv2d's. Produced by autodiff; not differentiable
    itself. cuDNN's backward-data convolution on GPUs.

    Example:

    ```mlir
    %dx = tc.conv2d_backward_input %dy, %w {input_size = array<i64: 32, 32>, padding = array<i64: 1, 1>} : (!tc.tensor<[N, 16, 32, 32], f32>, !tc.tensor<[16, 3, 3, 3], f32>) -> !tc.tensor<[N, 3, 32, 32], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$grad, TC_Tensor:$weight, DenseI64ArrayAttr:$input_size,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       DefaultValuedAttr<BoolAttr, "false">:$channels_last);
}

def TC_Conv2dBackwardWeightOp : TC_Op<"conv2d_backward_weight"> {
  let summary = "the gradient of conv2d's weight";
  let description = [{
    Given `grad` (N, O, Ho, Wo), the cotangent of a conv2d's output, and the
    conv2d's input `x` (N, C, H, W), returns the gradient of its weight
    (O, C / groups, kH, kW), `kernel_size` = [kH, kW]:
    `dw[o, c, kh, kw] = sum over n, i, j of grad[n, o, i, j] *
    x[n, (o / (O/groups))*C/groups + c, i*stride[0] - padding[0] + kh*dilation[0], ...]`
    (zero outside x). The other attributes are the conv2d's. Produced by
    autodiff; not differentiable itself. cuDNN's backward-filter convolution
    on GPUs.

    Example:

    ```mlir
    %dw = tc.conv2d_backward_weight %dy, %x {kernel_size = array<i64: 3, 3>, padding = array<i64: 1, 1>} : (!tc.tensor<[N, 16, 32, 32], f32>, !tc.tensor<[N, 3, 32, 32], f32>) -> !tc.tensor<[16, 3, 3, 3], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$grad, TC_Tensor:$x, DenseI64ArrayAttr:$kernel_size,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       DefaultValuedAttr<BoolAttr, "false">:$channels_last);
}

def TC_MaxPool2dOp : TC_Op<"max_pool2d"> {
  let summary = "2-D max pooling (NCHW)";
  let description = [{
    The maximum over each `kernel_size` window (with `dilation`) of `x`
    (N, C, H, W) padded by -inf; `stride` defaults to `kernel_size`;
    `padding` at most half the kernel. Output size as conv2d, or rounded up
    with `ceil_mode` (a window must start inside the input or left padding).
    A nan in a window gives nan.

    Example:

    ```mlir
    %y = tc.max_pool2d %x {kernel_size = array<i64: 2, 2>} : (!tc.tensor<[N, 16, 32, 32], f32>) -> !tc.tensor<[N, 16, 16, 16], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DenseI64ArrayAttr:$kernel_size,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
}

def TC_MaxPool2dTapsOp : TC_Op<"max_pool2d_taps"> {
  let summary = "each max_pool2d window's winning tap";
  let description = [{
    For each window of a max_pool2d with these attributes, `kh * kW + kw`
    (i64) of its first maximum; a nan beats every number (the first nan
    wins); taps in the padding count as -inf. PyTorch's saved indices, per
    window; what max_pool2d_backward reads. Not differentiable.

    Example:

    ```mlir
    %tap = tc.max_pool2d_taps %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (!tc.tensor<[N, 8, 32, 32], f32>) -> !tc.tensor<[N, 8, 16, 16], i64>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DenseI64ArrayAttr:$kernel_size,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
}

def TC_MaxPool2dBackwardOp : TC_Op<"max_pool2d_backward"> {
  let summary = "the gradient of max_pool2d's input";
  let description = [{
    Given `grad` (N, C, Ho, Wo), the cotangent of a max_pool2d's output, and
    `tap` (same shape, integer), the window's winning tap `kh * kW + kw`
    (the first maximum, as PyTorch's saved indices; -1 for none), returns
    the gradient of the input (N, C, H, W), `input_size` = [H, W]:
    `dx[n, c, h, w] = sum over kh, kw of grad[n, c, i, j]` where
    `h = i*stride[0] - padding[0] + kh*dilation[0]` (likewise w) and
    `tap[n, c, i, j] = kh * kW + kw`. The other attributes are the
    max_pool2d's. Produced by autodiff; not differentiable itself.

    Example:

    ```mlir
    %dx = tc.max_pool2d_backward %dy, %tap {kernel_size = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, input_size = array<i64: 32, 32>} : (!tc.tensor<[N, 8, 16, 16], f32>, !tc.tensor<[N, 8, 16, 16], i64>) -> !tc.tensor<[N, 8, 32, 32], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$grad, TC_Tensor:$tap, DenseI64ArrayAttr:$kernel_size,
                       DenseI64ArrayAttr:$input_size,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation);
}

def TC_AvgPool2dOp : TC_Op<"avg_pool2d"> {
  let summary = "2-D average pooling (NCHW)";
  let description = [{
    The mean over each `kernel_size` window of `x` (N, C, H, W), windows as
    max_pool2d (no dilation). The divisor is the window clipped to the
    padded input when `count_include_pad` (default), else the number of
    input elements inside it.

    Example:

    ```mlir
    %y = tc.avg_pool2d %x {kernel_size = array<i64: 2, 2>} : (!tc.tensor<[N, 16, 32, 32], f32>) -> !tc.tensor<[N, 16, 16, 16], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DenseI64ArrayAttr:$kernel_size,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "true">:$count_include_pad);
}

def TC_BatchNormOp : TC_Op<"batch_norm", [AttrSizedOperandSegments]> {
  let summary = "batch normalization (training and inference forms)";
  let description = [{
    `x` (N, C, ...); `running_mean`, `running_var`, optional `weight`,
    `bias`: (C). Inference (`training = false`): `y = (x - running_mean) /
    sqrt(running_var + eps) * weight + bias`, and the running statistics are
    returned unchanged. Training: normalizes with the batch mean and biased
    batch variance over every axis but 1, and returns the updated running
    statistics `(1 - momentum) * running + momentum * batch` (the unbiased
    batch variance for `running_var`), as torch.nn.functional.batch_norm
    updates them in place. Results: y, new running_mean, new running_var.

    Example:

    ```mlir
    %y:3 = tc.batch_norm %x, %m, %v {training = true, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>} : (!tc.tensor<[N, 8, 4, 4], f32>, !tc.tensor<[8], f32>, !tc.tensor<[8], f32>) -> (!tc.tensor<[N, 8, 4, 4], f32>, !tc.tensor<[8], f32>, !tc.tensor<[8], f32>)
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_Tensor:$running_mean, TC_Tensor:$running_var,
                       Optional<TC_Tensor>:$weight, Optional<TC_Tensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$training,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs TC_Tensor:$result, TC_Tensor:$new_running_mean, TC_Tensor:$new_running_var);
}

def TC_ScaledDotProductAttentionOp : TC_Op<"scaled_dot_product_attention"> {
  let summary = "softmax(q k^T * scale + mask) v";
  let description = [{
    `query` (..., L, E), `key` (..., S, E), `value` (..., S, Ev); batch dims
    broadcast. `scale` defaults to 1/sqrt(E). `mask`, optional, broadcasts to
    (..., L, S): i1 (true = attend; false adds -inf) or additive in the
    query's dtype. `is_causal` masks positions j > i (top-left aligned, as
    PyTorch). A row with every position masked gives 0 (PyTorch's SDPA
    since 2.5, `_safe_softmax`). Result (..., L, Ev).

    Dropout: with `dropout_p` > 0 and `seed` (an integer scalar) the
    probabilities P (..., L, S) become `tc.dropout(P, seed) {p = dropout_p,
    stream = dropout_stream}` before the product with `value`, bit for bit
    (element (b..., i, j) of P is that op's element of the same row-major
    index). The optional operands are the mask, then the seed
    (`operandSegmentSizes` = [1, 1, 1, mask?, seed?] says which where only
    the seed is given).

    `out_dtype` (f32 only, with f16/bf16 operands): the result is the f32
    attention of the operands converted to f32 (exactly), in f32: what a
    graph that upcasts 16-bit q, k, v before its attention computes
    (PyTorch's math SDPA for half types; `tensorc-narrow-attention` forms
    it), with the operands read at half the bytes. An additive mask is in
    the operands' dtype.

    Example:

    ```mlir
    %o = tc.scaled_dot_product_attention %q, %k, %v {is_causal = true} : (!tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>) -> !tc.tensor<[B, 4, T, 16], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$query, TC_Tensor:$key, TC_Tensor:$value,
                       Variadic<TC_Tensor>:$mask_and_seed,
                       DefaultValuedAttr<BoolAttr, "false">:$is_causal,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<TypeAttr>:$out_dtype,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream);
}

def TC_ScaledDotProductAttentionWithLseOp : TC_Op<"scaled_dot_product_attention_with_lse"> {
  let summary = "scaled_dot_product_attention and each query row's log-sum-exp";
  let description = [{
    `out` is `scaled_dot_product_attention` of the same operands and
    attributes; `lse` is the natural log-sum-exp of each query row's scaled
    and masked scores (`out`'s shape without its last dim; f32, f64 for f64
    operands; +inf for a row with every position masked, which gets no
    probability in the backward), before any dropout. Autodiff uses it when the backward runs as its own program:
    the backward reads the saved `out` and `lse` instead of recomputing the
    forward (FlashAttention-2's saved statistics). `out_dtype` as
    `scaled_dot_product_attention`'s (then `out` is f32).

    Example:

    ```mlir
    %o, %lse = tc.scaled_dot_product_attention_with_lse %q, %k, %v {is_causal = true} : (!tc.tensor<[B, 4, T, 16], bf16>, !tc.tensor<[B, 4, T, 16], bf16>, !tc.tensor<[B, 4, T, 16], bf16>) -> (!tc.tensor<[B, 4, T, 16], bf16>, !tc.tensor<[B, 4, T], f32>)
    ```
  }];
  let arguments = (ins TC_Tensor:$query, TC_Tensor:$key, TC_Tensor:$value,
                       Variadic<TC_Tensor>:$mask_and_seed,
                       DefaultValuedAttr<BoolAttr, "false">:$is_causal,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<TypeAttr>:$out_dtype,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream);
  let results = (outs TC_Tensor:$out, TC_Tensor:$lse);
}

def TC_ScaledDotProductAttentionBackwardOp : TC_Op<"scaled_dot_product_attention_backward", [AttrSizedOperandSegments]> {
  let summary = "the gradients of scaled_dot_product_attention";
  let description = [{
    Given `grad` (the cotangent of the attention output) and the forward's
    operands and attributes, returns the gradients of `query`, `key` and
    `value` (each of its operand's shape: broadcast batch dims are summed).
    The probabilities are recomputed, as FlashAttention's backward does:
    `P = softmax(q k^T * scale + mask)`, `dv = P^T grad`,
    `dS = P * (grad v^T - rowsum(grad v^T * P))`, `dq = dS k * scale`,
    `dk = dS^T q * scale`; with dropout (`seed`, `dropout_p`, `dropout_stream`
    as the forward's) `dv = dropout(P)^T grad`, and `grad v^T` passes through
    the same dropout (mask and scale) before the formula above, whose row sum
    is then rowsum(grad * out). `out` and `lse`, optional and given together, are
    the forward's results (`scaled_dot_product_attention_with_lse`): a
    backend may read them instead of recomputing them. Produced by
    autodiff; not differentiable itself.

    `out_dtype` (f32 only, with f16/bf16 query, key and value): the f32
    gradients of the forward with that `out_dtype`, i.e. of the f32
    attention of the operands converted to f32; `grad` is f32 or the
    operands' dtype (an exact conversion of the f32 cotangent: what
    `tensorc-narrow-attention` gives it), and `out` and `lse` are not
    given.

    Example:

    ```mlir
    %g:3 = tc.scaled_dot_product_attention_backward %dy, %q, %k, %v {is_causal = true, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0>} : (!tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>) -> (!tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>, !tc.tensor<[B, 4, T, 16], f32>)
    ```
  }];
  let arguments = (ins TC_Tensor:$grad, TC_Tensor:$query, TC_Tensor:$key, TC_Tensor:$value,
                       Optional<TC_Tensor>:$mask, Optional<TC_Tensor>:$out, Optional<TC_Tensor>:$lse,
                       Optional<TC_Tensor>:$seed,
                       DefaultValuedAttr<BoolAttr, "false">:$is_causal,
                       OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<TypeAttr>:$out_dtype,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream);
  let results = (outs TC_Tensor:$grad_query, TC_Tensor:$grad_key, TC_Tensor:$grad_value);
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def TC_ReshapeOp : TC_Op<"reshape"> {
  let summary = "reinterpret the row-major elements under a new shape";
  let description = [{
    `shape` entries are positive integers, dim strings ("B", "B*T") or one
    -1 (inferred). Element counts must be equal as monomials.

    Example:

    ```mlir
    %y = tc.reshape %x {shape = ["B*T", 64]} : (!tc.tensor<[B, T, 64], f32>) -> !tc.tensor<[B*T, 64], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_DimsAttr:$shape);
  let hasFolder = 1;
}

def TC_PermuteOp : TC_Op<"permute"> {
  let summary = "reorder axes";
  let description = [{
    `result.shape[i] = x.shape[dims[i]]`; `dims` is a permutation of the
    axes (negative entries count from the end).

    Example:

    ```mlir
    %y = tc.permute %x {dims = array<i64: 0, 2, 1>} : (!tc.tensor<[B, 3, 4], f32>) -> !tc.tensor<[B, 4, 3], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DenseI64ArrayAttr:$dims);
}

def TC_TransposeOp : TC_Op<"transpose"> {
  let summary = "swap two axes";
  let description = [{
    Swaps axes `dim0` and `dim1` (negative axes count from the end).

    Example:

    ```mlir
    %y = tc.transpose %x {dim0 = -2 : i64, dim1 = -1 : i64} : (!tc.tensor<[B, 3, 4], f32>) -> !tc.tensor<[B, 4, 3], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, I64Attr:$dim0, I64Attr:$dim1);
  let hasFolder = 1;
}

def TC_BroadcastToOp : TC_Op<"broadcast_to"> {
  let summary = "broadcast to a shape";
  let description = [{
    Right-aligns `x` with `shape`; each dim of `x` equals the target dim or
    is 1. The target rank is at least `x`'s.

    Example:

    ```mlir
    %y = tc.broadcast_to %b {shape = ["B", 4]} : (!tc.tensor<[4], f32>) -> !tc.tensor<[B, 4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_DimsAttr:$shape);
  let hasFolder = 1;
}

def TC_SliceOp : TC_Op<"slice"> {
  let summary = "strided slice along some axes";
  let description = [{
    For each listed axis (`axes`, default 0, 1, ...): Python slice
    `start:end:step` with `step >= 1`; negative indices count from the end
    and out-of-range bounds clamp, so an empty range gives a size-0 dim. A
    symbolic dim can only be taken whole (start 0, end INT64_MAX, step 1).

    Example:

    ```mlir
    %y = tc.slice %x {axes = array<i64: 1>, starts = array<i64: 1>, ends = array<i64: 9223372036854775807>, steps = array<i64: 2>} : (!tc.tensor<[B, 7], f32>) -> !tc.tensor<[B, 3], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, OptionalAttr<DenseI64ArrayAttr>:$axes,
                       DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$ends,
                       OptionalAttr<DenseI64ArrayAttr>:$steps);
}

def TC_ConcatOp : TC_Op<"concat"> {
  let summary = "concatenate along an axis";
  let description = [{
    One or more inputs of one dtype and rank whose dims agree except along
    `axis`. Symbolic sizes along `axis` add only when they are multiples of
    the same symbols (`B` and `B` give `2*B`).

    Example:

    ```mlir
    %y = tc.concat %a, %b {axis = 1 : i64} : (!tc.tensor<[B, 3], f32>, !tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 7], f32>
    ```
  }];
  let arguments = (ins Variadic<TC_Tensor>:$inputs, DefaultValuedAttr<I64Attr, "0">:$axis);
}

def TC_SplitOp : TC_Op<"split"> {
  let summary = "split into consecutive pieces along an axis";
  let description = [{
    Piece `i` has size `sizes[i]` along `axis` (a static dim equal to the
    sum of `sizes`); one result per piece.

    Example:

    ```mlir
    %q:3 = tc.split %x {axis = 2 : i64, sizes = array<i64: 64, 64, 64>} : (!tc.tensor<[B, T, 192], f32>) -> (!tc.tensor<[B, T, 64], f32>, !tc.tensor<[B, T, 64], f32>, !tc.tensor<[B, T, 64], f32>)
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DenseI64ArrayAttr:$sizes, DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Variadic<TC_Tensor>:$results);
}

def TC_SqueezeOp : TC_Op<"squeeze"> {
  let summary = "drop size-1 axes";
  let description = [{
    Removes the listed `axes` (every axis when absent) whose size is
    statically 1; others stay, as in PyTorch. Symbolic dims are never removed.

    Example:

    ```mlir
    %y = tc.squeeze %x {axes = array<i64: 1>} : (!tc.tensor<[B, 1, 4], f32>) -> !tc.tensor<[B, 4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, OptionalAttr<DenseI64ArrayAttr>:$axes);
}

def TC_UnsqueezeOp : TC_Op<"unsqueeze"> {
  let summary = "insert a size-1 axis";
  let description = [{
    Inserts a size-1 dim at `axis` in [-(rank + 1), rank].

    Example:

    ```mlir
    %y = tc.unsqueeze %x {axis = 0 : i64} : (!tc.tensor<[4], f32>) -> !tc.tensor<[1, 4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, I64Attr:$axis);
}

def TC_FlattenOp : TC_Op<"flatten"> {
  let summary = "merge a range of axes";
  let description = [{
    Merges axes `start_axis..end_axis` (inclusive) into one of their product.
    A scalar becomes shape (1).

    Example:

    ```mlir
    %y = tc.flatten %x {start_axis = 1 : i64} : (!tc.tensor<[N, 16, 4, 4], f32>) -> !tc.tensor<[N, 256], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DefaultValuedAttr<I64Attr, "0">:$start_axis,
                       DefaultValuedAttr<I64Attr, "-1">:$end_axis);
}

def TC_GatherOp : TC_Op<"gather"> {
  let summary = "torch.gather along an axis";
  let description = [{
    `result[i][j][k] = x[index[i][j][k]][j][k]` for `axis = 0` (likewise for
    others). `index` is integer, of `x`'s rank, no larger than `x` off the
    axis; the result has `index`'s shape. Negative or out-of-range indices
    are a run-time error.

    Example:

    ```mlir
    %y = tc.gather %x, %i {axis = 1 : i64} : (!tc.tensor<[B, 10], f32>, !tc.tensor<[B, 1], i64>) -> !tc.tensor<[B, 1], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_Tensor:$index, I64Attr:$axis);
}

def TC_IndexSelectOp : TC_Op<"index_select"> {
  let summary = "select slices along an axis by a 1-D index";
  let description = [{
    The result is `x` with dim `axis` replaced by `index`'s length, slice `i`
    being `x`'s slice `index[i]`. Out-of-range indices are a run-time error.

    Example:

    ```mlir
    %y = tc.index_select %x, %i {axis = 0 : i64} : (!tc.tensor<[10, 4], f32>, !tc.tensor<[3], i64>) -> !tc.tensor<[3, 4], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, TC_Tensor:$index, I64Attr:$axis);
}

def TC_PadOp : TC_Op<"pad"> {
  let summary = "constant padding (torch.nn.functional.pad order)";
  let description = [{
    `pads` holds (before, after) pairs starting from the last axis, as
    F.pad: `[left, right, top, bottom, ...]`. Negative pads crop. New
    elements are `value` converted to the dtype.

    Example:

    ```mlir
    %y = tc.pad %x {pads = array<i64: 1, 1>} : (!tc.tensor<[B, 4], f32>) -> !tc.tensor<[B, 6], f32>
    ```
  }];
  let arguments = (ins TC_Tensor:$x, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
}

//===----------------------------------------------------------------------===//
// Creation ops
//===----------------------------------------------------------------------===//

def TC_ConstantOp : TC_Op<"constant", [ConstantLike]> {
  let summary = "a literal tensor";
  let description = [{
    `value` is a dense literal of a static shape (or a scalar); a splat
    fills the whole shape.

    Example:

    ```mlir
    %c = tc.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> !tc.tensor<[2], f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let hasFolder = 1;
}

class TC_FilledOp<string mnemonic, string what> : TC_Op<mnemonic> {
  let summary = "a tensor filled with " # what;
  let description = "A tensor of `shape` (integers or dim strings) and "
    # "`dtype` (default f32) whose every element is " # what # "."
    # "\n\nExample:\n\n```mlir\n%z = tc." # mnemonic # " {shape = [\"B\", 4]}"
    # " : () -> !tc.tensor<[B, 4], f32>\n```";
  let arguments = (ins TC_DimsAttr:$shape, OptionalAttr<TypeAttr>:$dtype);
}

def TC_ZerosOp : TC_FilledOp<"zeros", "0">;
def TC_OnesOp : TC_FilledOp<"ones", "1">;
def TC_FullOp : TC_FilledOp<"full", "`value` (converted to the dtype)"> {
  let arguments = (ins TC_DimsAttr:$shape, F64Attr:$value,
                       OptionalAttr<TypeAttr>:$dtype);
}

def TC_IotaOp : TC_Op<"iota"> {
  let summary = "evenly spaced integers (torch.arange)";
  let description = [{
    `start, start + step, ...` as a 1-D tensor of `dtype` (default i64):
    either up to but excluding `end`, or exactly `length` elements, where
    `length` is one dim and may be symbolic (`["T"]`). `step` is non-zero and
    may be negative.

    Example:

    ```mlir
    %i = tc.iota {end = 5 : i64} : () -> !tc.tensor<[5], i64>
    %t = tc.iota {length = ["T"]} : () -> !tc.tensor<[T], i64>
    ```
  }];
  let arguments = (ins DefaultValuedAttr<I64Attr, "0">:$start, OptionalAttr<I64Attr>:$end,
                       OptionalAttr<TC_DimsAttr>:$length,
                       DefaultValuedAttr<I64Attr, "1">:$step,
                       OptionalAttr<TypeAttr>:$dtype);
}

//===----------------------------------------------------------------------===//
// Kernels (the result of fusion)
//===----------------------------------------------------------------------===//

def TC_FusedOp : Op<TC_Dialect, "fused", [IsolatedFromAbove, SingleBlock, Pure]> {
  let summary = "a group of ops that runs as one kernel";
  let description = [{
    Produced by tensorc-fuse. The body's block arguments are the kernel's
    inputs (the operands, in order); `tc.yield` returns the values the rest of
    the function uses, which are the results. `kind` says which code template
    a backend uses: "elementwise" (a pointwise loop nest, with broadcasts and
    views as index arithmetic), "reduction" (one reduction or normalization
    with its elementwise prologue and epilogue; several reductions of the same
    input when fused horizontally), "matmul" (a library GEMM/conv call with an
    elementwise epilogue), "attention", "gather" (indexing ops) or "copy". The
    function computed is exactly that of the body's ops.

    Example:

    ```mlir
    %y = tc.fused "k0" (%a, %b) {kind = "elementwise"} : (!tc.tensor<[4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[4], f32> {
    ^bb0(%x: !tc.tensor<[4], f32>, %z: !tc.tensor<[4], f32>):
      %s = tc.add %x, %z : (!tc.tensor<[4], f32>, !tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
      %r = tc.relu %s : (!tc.tensor<[4], f32>) -> !tc.tensor<[4], f32>
      tc.yield %r : !tc.tensor<[4], f32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$kernel, StrAttr:$kind, Variadic<TC_Tensor>:$inputs);
  let results = (outs Variadic<TC_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kernel `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body";
  let hasVerifier = 1;
}

def TC_YieldOp : Op<TC_Dialect, "yield", [Terminator, HasParent<"FusedOp">, Pure, ReturnLike]> {
  let summary = "the values a tc.fused kernel returns";
  let description = [{
    Terminates a `tc.fused` body; its operands become the kernel's results.
  }];
  let arguments = (ins Variadic<TC_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

// Collectives. Every device of a mesh runs the same program; a collective
// over `axes` exchanges values among the devices that agree on the mesh's
// other axes (its group). A device's rank in its group is the row-major index
// of its coordinates on `axes`, in the order listed. docs/sharding.md has the
// device numbering and how the reference interpreter runs N devices.
class TC_CollectiveOp<string mnemonic, string summaryText, string descriptionText,
                      dag extraArgs = (ins), list<Trait> traits = []>
    : TC_Op<mnemonic, traits> {
  let summary = summaryText;
  let description = descriptionText;
  let arguments = !con((ins TC_Tensor:$x, StrAttr:$mesh, StrArrayAttr:$axes), extraArgs);
}

def TC_AllReduceOp : TC_CollectiveOp<"all_reduce", "reduce over a device group, result on every member", [{
    Every member of the group gets the elementwise `reduction` ("sum",
    "mean", "max" or "min") of the members' `x`. Same shape and dtype as `x`
    (numeric; "mean" needs a float dtype). Differentiable: the cotangent of a
    sum is the all_reduce sum of the members' cotangents.

    Example:

    ```mlir
    %g = tc.all_reduce %x {mesh = "mesh", axes = ["data"], reduction = "mean"} : (!tc.tensor<[512, 256], f32>) -> !tc.tensor<[512, 256], f32>
    ```
  }], (ins DefaultValuedAttr<StrAttr, "\"sum\"">:$reduction)>;

def TC_AllGatherOp : TC_CollectiveOp<"all_gather", "concatenate the group's values along an axis", [{
    Every member gets the members' `x` concatenated along `axis` in rank
    order: that dim is `G` times `x`'s, `G` the group size.

    Example:

    ```mlir
    %w = tc.all_gather %shard {mesh = "mesh", axes = ["data"], axis = 0 : i64} : (!tc.tensor<[128, 256], f32>) -> !tc.tensor<[256, 256], f32>
    ```
  }], (ins DefaultValuedAttr<I64Attr, "0">:$axis)>;

def TC_ReduceScatterOp : TC_CollectiveOp<"reduce_scatter", "reduce over a device group, each member keeping its chunk", [{
    The elementwise `reduction` of the members' `x` (as all_reduce), split
    into `G` equal chunks along `axis`; the member of rank `r` gets chunk
    `r`. That dim of `x` must be divisible by `G`.

    Example:

    ```mlir
    %g = tc.reduce_scatter %x {mesh = "mesh", axes = ["data"]} : (!tc.tensor<[256, 256], f32>) -> !tc.tensor<[128, 256], f32>
    ```
  }], (ins DefaultValuedAttr<I64Attr, "0">:$axis, DefaultValuedAttr<StrAttr, "\"sum\"">:$reduction)>;

def TC_AllToAllOp : TC_CollectiveOp<"all_to_all", "exchange chunks among a device group", [{
    Each member splits its `x` into `G` equal chunks along `split_axis`; the
    member of rank `r` receives chunk `r` of every member and concatenates
    them in rank order along `concat_axis`. `split_axis`'s dim shrinks by
    `G`, then `concat_axis`'s grows by `G`.

    Example:

    ```mlir
    %y = tc.all_to_all %x {mesh = "mesh", axes = ["model"], split_axis = 1 : i64, concat_axis = 0 : i64} : (!tc.tensor<[4, 8], f32>) -> !tc.tensor<[8, 4], f32>
    ```
  }], (ins I64Attr:$split_axis, I64Attr:$concat_axis)>;

def TC_AllSliceOp : TC_CollectiveOp<"all_slice", "each member keeps its rank's chunk", [{
    `x` split into `G` equal chunks along `axis`; the member of rank `r`
    keeps chunk `r`. No data moves between devices: this is how a replicated
    value becomes a sharded one (Shardy's `all_slice`).

    Example:

    ```mlir
    %s = tc.all_slice %w {mesh = "mesh", axes = ["model"], axis = 1 : i64} : (!tc.tensor<[256, 1024], f32>) -> !tc.tensor<[256, 512], f32>
    ```
  }], (ins DefaultValuedAttr<I64Attr, "0">:$axis)>;

def TC_CollectiveBroadcastOp : TC_CollectiveOp<"collective_broadcast", "the root member's value on every member", [{
    Every member gets the `x` of the member whose rank is `root`.

    Example:

    ```mlir
    %p = tc.collective_broadcast %x {mesh = "mesh", axes = ["data"], root = 0 : i64} : (!tc.tensor<[16], f32>) -> !tc.tensor<[16], f32>
    ```
  }], (ins DefaultValuedAttr<I64Attr, "0">:$root)>;

def TC_AxisIndexOp : TC_Op<"axis_index"> {
  let summary = "this device's rank in its group";
  let description = [{
    An i64 scalar: the rank, within the group of `axes` of `mesh`, of the
    device running the program (row-major over `axes` in the order listed).

    Example:

    ```mlir
    %r = tc.axis_index {mesh = "mesh", axes = ["data"]} : () -> !tc.tensor<[], i64>
    ```
  }];
  let arguments = (ins StrAttr:$mesh, StrArrayAttr:$axes);
}

def TC_MeshOp : Op<TC_Dialect, "mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named device mesh";
  let description = [{
    Declares a logical mesh of devices with named axes, e.g. 4 data-parallel
    by 2 tensor-parallel replicas. Shardings (`#tc.sharding`) refer to it by
    name. Axis names are unique and sizes positive.

    Example:

    ```mlir
    tc.mesh @mesh axes = ["data", "model"] sizes = [4, 2]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes, DenseI64ArrayAttr:$sizes);
  let assemblyFormat = "$sym_name `axes` `=` $axes `sizes` `=` $sizes attr-dict";
  let hasVerifier = 1;
}

#endif // TC_OPS_TD
