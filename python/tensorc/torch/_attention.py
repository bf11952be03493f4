"""nn.MultiheadAttention as tensorc ops: the input projections (slices of
the packed weight read through transposed views), heads split by reshape
and transpose, tensorc's scaled_dot_product_attention (fused on the GPU),
the output projection. The attention weights (the call's second result)
are computed only where the model reads them: softmax(q k^T * scale +
mask), averaged over heads unless average_attn_weights=False.

PyTorch's masks are turned into one additive mask: a bool attn_mask or
key_padding_mask is True where attention is not allowed (-inf), a float
one is added as is; a 3-D attn_mask [N * H, L, S] is per batch and head.
"""
import operator

import torch

from ._common import DTYPES


def _minus_inf_where(e, n, b, mask, dtype):
    """The additive form of a bool mask (True: not allowed)."""
    dt = DTYPES[dtype]
    return b("where", mask, {"literal": "-inf", "dtype": dt}, {"literal": 0.0, "dtype": dt})


def multihead_attention(e, n, m):
    a = e.arg
    query, key, value = n.args[0], a(n, 1, "key"), a(n, 2, "value")
    used = any(u.target is operator.getitem and len(u.args) > 1 and u.args[1] == 1 for u in n.users)
    return attention_refs(e, n, m, n.target, [e.ref(query), e.ref(key), e.ref(value)],
                          [e.val(query), e.val(key)], a(n, 5, "attn_mask"), a(n, 3, "key_padding_mask"),
                          a(n, 7, "is_causal", False), a(n, 4, "need_weights", True) and used,
                          a(n, 6, "average_attn_weights", True))


def attention_refs(e, n, m, path, refs, values, attn_mask, key_padding_mask, is_causal, weights, average=True):
    """nn.MultiheadAttention `m` (parameters under `path`) of query, key and
    value references (`values`: the query's and key's tensors); the masks
    are fx nodes or None. Returns [output, weights or None]."""
    from ._composites import _Builder  # the same naming as every composed op
    from ._ops import _linear_refs
    if m.bias_k is not None or m.add_zero_attn:
        raise e.unsupported("MultiheadAttention with add_bias_kv or add_zero_attn")
    if m.training and m.dropout > 0:
        raise e.unsupported("MultiheadAttention dropout in training mode")
    qv, kv = values
    if qv.dim() != 3:
        raise e.unsupported(f"MultiheadAttention of a {qv.dim()}-D query (only batched: 3-D)")
    b = _Builder(e, n)
    E, H = m.embed_dim, m.num_heads
    D = E // H

    # Batch first inside: [N, L, E].
    def batch_first(x):
        return x if m.batch_first else b("transpose", x, dim0=0, dim1=1)
    q_in, k_in, v_in = (batch_first(r) for r in refs)
    N, L = (qv.shape[0], qv.shape[1]) if m.batch_first else (qv.shape[1], qv.shape[0])
    S = kv.shape[1] if m.batch_first else kv.shape[0]

    def param(name):
        return e.param_input(f"{path}.{name}")

    if m._qkv_same_embed_dim:
        packed = param("in_proj_weight")
        proj = [b("slice", packed, axes=[0], starts=[i * E], ends=[(i + 1) * E]) for i in range(3)]
    else:
        proj = [param("q_proj_weight"), param("k_proj_weight"), param("v_proj_weight")]
    biases = [None] * 3
    if m.in_proj_bias is not None:
        packed = param("in_proj_bias")
        biases = [b("slice", packed, axes=[0], starts=[i * E], ends=[(i + 1) * E]) for i in range(3)]

    def heads(x, w, bias, rows):
        y = _linear_refs(e, n, x, w, bias)
        return b("transpose", b("reshape", y, shape=[N, rows, H, D]), dim0=1, dim1=2)  # [N, H, rows, D]
    q, k, v = heads(q_in, proj[0], biases[0], L), heads(k_in, proj[1], biases[1], S), \
        heads(v_in, proj[2], biases[2], S)

    dtype = qv.dtype
    mask = None
    if attn_mask is not None:
        mv = e.val(attn_mask)
        mask = _minus_inf_where(e, n, b, e.ref(attn_mask), dtype) if mv.dtype == torch.bool \
            else e.cast_to(attn_mask, dtype)
        if mv.dim() == 3:  # [N * H, L, S]
            mask = b("reshape", mask, shape=[N, H, L, S])
    if key_padding_mask is not None:
        kv_mask = e.val(key_padding_mask)
        pad = _minus_inf_where(e, n, b, e.ref(key_padding_mask), dtype) if kv_mask.dtype == torch.bool \
            else e.cast_to(key_padding_mask, dtype)
        pad = b("reshape", pad, shape=[N, 1, 1, S])
        mask = pad if mask is None else b("add", mask, pad)
    attrs = {"is_causal": True} if is_causal and mask is None else {}
    o = b("scaled_dot_product_attention", *([q, k, v] + ([mask] if mask is not None else [])), **attrs)
    o = b("reshape", b("transpose", o, dim0=1, dim1=2), shape=[N, L, E])  # [N, L, E]
    out = _linear_refs(e, n, o, param("out_proj.weight"),
                       param("out_proj.bias") if m.out_proj.bias is not None else None)
    if not m.batch_first:
        out = b("transpose", out, dim0=0, dim1=1)
    if not weights:
        return [out, None]
    scores = b("mul", b("matmul", q, b("transpose", k, dim0=2, dim1=3)), float(D) ** -0.5)
    if mask is not None:
        scores = b("add", scores, mask)
    elif is_causal:
        causal = b("gt", b("reshape", b("iota", end=S), shape=[1, S]), b("reshape", b("iota", end=L), shape=[L, 1]))
        scores = b("add", scores, _minus_inf_where(e, n, b, causal, dtype))
    probs = b("softmax", scores, axis=-1)
    return [out, b("mean", probs, axes=[1]) if average else probs]


def encoder_layer(e, n, m, path=None, x=None, x_value=None):
    """nn.TransformerEncoderLayer (eval mode, or dropout 0): self-attention
    and the feed-forward block with residuals and layer norms, before
    (norm_first) or after. Returns the output's reference."""
    from ._composites import _Builder
    from ._ops import _layer_norm_refs, _linear_refs
    path = n.target if path is None else path
    x = e.ref(n.args[0]) if x is None else x
    x_value = e.val(n.args[0]) if x_value is None else x_value
    a = e.arg
    src_mask, pad = a(n, 1, "src_mask", a(n, 1, "mask")), a(n, 2, "src_key_padding_mask")
    is_causal = a(n, 3, "is_causal", False) or False
    if m.training and any(d.p > 0 for d in (m.dropout, m.dropout1, m.dropout2)):
        raise e.unsupported("TransformerEncoderLayer dropout in training mode")
    act = m.activation
    name = getattr(act, "__name__", type(act).__name__).lower()
    op = {"relu": "relu", "gelu": "gelu"}.get(name)
    if op is None:
        raise e.unsupported(f"TransformerEncoderLayer activation {name}")
    approximate = getattr(act, "approximate", "none")
    b = _Builder(e, n)

    def norm(ln, y, which):
        return _layer_norm_refs(e, n, y, list(ln.normalized_shape), e.param_input(f"{path}.{which}.weight"),
                                e.param_input(f"{path}.{which}.bias"), ln.eps)

    def self_attention(y):
        return attention_refs(e, n, m.self_attn, f"{path}.self_attn", [y, y, y], [x_value, x_value], src_mask, pad,
                              is_causal, False)[0]

    def feed_forward(y):
        h = _linear_refs(e, n, y, e.param_input(f"{path}.linear1.weight"), e.param_input(f"{path}.linear1.bias"))
        h = b(op, h, approximate=approximate) if approximate != "none" else b(op, h)
        return _linear_refs(e, n, h, e.param_input(f"{path}.linear2.weight"), e.param_input(f"{path}.linear2.bias"))

    if m.norm_first:
        x = b("add", x, self_attention(norm(m.norm1, x, "norm1")))
        return b("add", x, feed_forward(norm(m.norm2, x, "norm2")))
    x = norm(m.norm1, b("add", x, self_attention(x)), "norm1")
    return norm(m.norm2, b("add", x, feed_forward(x)), "norm2")


def encoder(e, n, m):
    """nn.TransformerEncoder: its layers in turn (each an encoder_layer),
    then its norm if it has one."""
    from ._ops import _layer_norm_refs
    x, x_value = e.ref(n.args[0]), e.val(n.args[0])
    for i, layer in enumerate(m.layers):
        x = encoder_layer(e, n, layer, f"{n.target}.layers.{i}", x, x_value)
    if m.norm is not None:
        x = _layer_norm_refs(e, n, x, list(m.norm.normalized_shape), e.param_input(f"{n.target}.norm.weight"),
                             e.param_input(f"{n.target}.norm.bias"), m.norm.eps)
    return x
