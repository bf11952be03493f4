"""Which ATen ops PyTorch's own decompositions (torch._decomp) rewrite
before tensorc lowers the graph: each one here decomposes into ops that
tensorc lowers (lowering.py), so it compiles instead of falling back.
Ops tensorc does better as a unit are kept whole and never listed here:
layer norm, softmax and log-softmax, GELU, SiLU, convolution, batch norm,
embedding, attention, the pools, matmuls, cross-entropy's parts. An op
neither listed nor lowered runs in PyTorch (partition.py)."""
import torch

# By overload packet (every overload PyTorch decomposes); names absent from
# an older PyTorch's table are skipped.
DECOMPOSED = (
    # activations
    "hardswish", "hardsigmoid", "hardtanh", "leaky_relu", "elu", "celu", "selu", "softplus", "mish", "glu",
    "prelu", "logit",
    # arithmetic
    "rsub", "addcmul", "addcdiv", "sgn",
    "logical_xor", "clamp_min", "clamp_max", "xlogy", "square",
    # reductions and norms
    "std", "norm", "native_group_norm", "mse_loss", "binary_cross_entropy_with_logits", "l1_loss",
    # shapes and masks
    "stack", "unbind", "tril", "triu", "masked_fill", "new_zeros", "new_ones", "new_full", "new_empty",
    "zeros_like", "ones_like", "full_like", "empty_like", "repeat", "roll", "narrow", "diag_embed",
    "expand_as", "split", "chunk", "unflatten", "movedim", "swapaxes",
    "baddbmm", "addr", "outer", "dot", "mv", "one_hot",
    # linear interpolation, into index tensors (_index in lowering.py)
    "upsample_bilinear2d", "upsample_linear1d",
)


def _batch_norm_updating_statistics(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Training-mode native_batch_norm as `_native_batch_norm_legit`, whose
    schema says it writes the running statistics (native_batch_norm's does
    not, so functionalization would not see the update): functionalized,
    the graph has `_native_batch_norm_legit_functional` (batch norm kept
    whole, its new statistics results) and copies back into the buffers.
    Other forms are left as they are (NotImplemented)."""
    if not training or running_mean is None or running_var is None:
        return NotImplemented
    return torch.ops.aten._native_batch_norm_legit.default(input, weight, bias, running_mean, running_var,
                                                           training, momentum, eps)


def decomposition_table():
    aten = torch.ops.aten
    packets = [getattr(aten, name) for name in DECOMPOSED if hasattr(aten, name)]
    from torch._decomp import get_decompositions
    table = get_decompositions(packets)
    if hasattr(aten, "_native_batch_norm_legit"):  # PyTorch >= 2.0
        table[aten.native_batch_norm.default] = _batch_norm_updating_statistics
    return table
