"""Symbolic dims for exported graphs (`dynamic=`): one graph for every size.

The exporter traces with concrete values (shape code is plain Python), so a
size shows up in the graph as a number: an input's shape, a reshape's
target, a slice's end. To make a dim symbolic the model is exported at three
probe sizes of each symbol near the example's (base; one symbol changed at
a time; all changed); the graphs must agree except in numbers, and
each number that changes must be a monomial of the sizes (what tensorc's
dims are: `B`, `B*T`, `3*C`), fitted exactly from the first traces and
checked against the last. A graph whose structure or other values depend on
a size (Python control flow on it, a constant mask built for T x T, a
float computed from it) is one error naming the node.

Traces run at sizes of at least 2 (sizes 0 and 1 are special in PyTorch:
`squeeze()`, broadcasting), so the graph declares each symbol's minimum as
2; CompiledModule compiles calls below it separately.
"""
import re

import torch

from ._common import UnsupportedOp

MIN_SIZE = 2


def dynamic_dims(example_inputs, dynamic):
    """The marked dims as [(input position, dim, symbol)]. `dynamic`: True
    (dim 0 of every tensor input, one symbol "B"), or {input position:
    {dim: symbol}}."""
    if not dynamic:
        return []
    tensors = [(i, x) for i, x in enumerate(example_inputs) if isinstance(x, torch.Tensor)]
    if dynamic is True:
        batched = [(i, x) for i, x in tensors if x.dim() >= 1]
        sizes = sorted({x.shape[0] for _, x in batched})
        if len(sizes) != 1:
            raise ValueError(f"tensorc.torch: dynamic=True makes dim 0 of every input one size 'B', but the "
                             f"example inputs' first dims are {sizes}: name them, dynamic={{input: {{dim: symbol}}}}")
        spec = [(i, 0, "B") for i, _ in batched]
    elif isinstance(dynamic, dict):
        spec = []
        for i, dims in dynamic.items():
            if not isinstance(i, int) or not 0 <= i < len(example_inputs) or \
                    not isinstance(example_inputs[i], torch.Tensor):
                raise ValueError(f"tensorc.torch: dynamic: {i!r} is not the position of a tensor input")
            x = example_inputs[i]
            for d, symbol in dims.items():
                if not isinstance(d, int) or not -x.dim() <= d < x.dim():
                    raise ValueError(f"tensorc.torch: dynamic: input {i} has no dim {d!r}")
                if not isinstance(symbol, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol):
                    raise ValueError(f"tensorc.torch: dynamic: {symbol!r} is not a symbol name")
                spec.append((i, d % x.dim(), symbol))
    else:
        raise ValueError("tensorc.torch: dynamic must be True or {input position: {dim: symbol}}")
    sizes = {}
    for i, d, symbol in spec:
        n = example_inputs[i].shape[d]
        if sizes.setdefault(symbol, n) != n:
            raise ValueError(f"tensorc.torch: dynamic: symbol '{symbol}' is {sizes[symbol]} and {n} in the "
                             f"example inputs")
        if n < MIN_SIZE:
            raise ValueError(f"tensorc.torch: dynamic: the example size of '{symbol}' is {n}; trace with at "
                             f"least {MIN_SIZE} (sizes 0 and 1 are special cases in PyTorch)")
    return spec


def symbol_sizes(inputs, spec):
    return {symbol: inputs[i].shape[d] for i, d, symbol in spec}


def resized(example_inputs, spec, sizes, scalars=None):
    """The example inputs with each marked dim at sizes[symbol]: rows of the
    example repeated (token ids and class targets stay valid); `scalars`
    {input position: symbol}: number inputs that are a size (Dynamo passes
    a dynamic dim's size as one), set to it."""
    new = list(example_inputs)
    for i, symbol in (scalars or {}).items():
        new[i] = sizes[symbol]
    for i, d, symbol in spec:
        x, n = new[i], sizes[symbol]
        if x.shape[d] != n:
            index = torch.arange(n, device=x.device) % x.shape[d]
            new[i] = x.index_select(d, index).requires_grad_(x.requires_grad)
    return new


def _monomial(symbols, base, grown, check, v0, v_grown, v_check):
    """The dim string c*S1*S2... (exponents 0..4) equal to v0 at `base`,
    v_grown[s] with s at grown[s], v_check at `check`; None if none is."""
    exponents = {}
    for s in symbols:
        n0, n1 = base[s], grown[s]
        for e in range(5):
            if v_grown[s] * n0 ** e == v0 * n1 ** e:
                exponents[s] = e
                break
        else:
            return None
    denominator = 1
    for s, e in exponents.items():
        denominator *= base[s] ** e
    if v0 % denominator or v0 // denominator < 1:
        return None
    c = v0 // denominator
    at_check = c
    for s, e in exponents.items():
        at_check *= check[s] ** e
    if at_check != v_check:
        return None
    factors = ([str(c)] if c != 1 else []) + [s for s in symbols for _ in range(exponents[s])]
    return "*".join(factors) if len(factors) > 1 or not factors[0].isdigit() else None


def symbolize(export_at, example_inputs, spec, scalars=None):
    """The graph export_at(inputs) gives (a graph file's JSON) with the
    marked dims symbolic (see the module's doc); `scalars`: number inputs
    that are sizes (resized). Raises UnsupportedOp naming the node whose
    structure or values depend on a size otherwise."""
    base_sizes = symbol_sizes(example_inputs, spec)
    symbols = sorted(base_sizes)
    # Three probe sizes per symbol, none the example's (at the example's
    # size a slice may be the whole and vanish from the graph: a mask
    # buffer's [:T, :T]), below it while they stay >= 2 (a model may have a
    # largest size: position embeddings, a mask buffer), else above.
    probes = {}
    for s, n in base_sizes.items():
        probes[s] = [m for m in (n - 1, n - 2, n - 3, n + 1, n + 2, n + 3) if m >= MIN_SIZE][:3]

    def at(sizes):
        try:
            return export_at(resized(example_inputs, spec, sizes, scalars))
        except UnsupportedOp:
            raise
        except Exception as ex:
            raise ValueError(f"tensorc.torch: dynamic: the model fails at sizes {sizes} (traced to make "
                             f"{', '.join(symbols)} symbolic): {type(ex).__name__}: {ex}") from ex

    base_sizes = {s: p[0] for s, p in probes.items()}
    base = at(base_sizes)
    grown_sizes, grown = {}, {}
    for s in symbols:
        sizes = dict(base_sizes)
        sizes[s] = grown_sizes[s] = probes[s][1]
        grown[s] = at(sizes)
    check_sizes = {s: p[2] for s, p in probes.items()}
    check = at(check_sizes)

    def where(path):
        named = [p for p in path if isinstance(p, str) and (p.startswith("node ") or p.startswith("input "))]
        return named[-1] if named else "/".join(str(p) for p in path)

    def fail(path, why):
        raise UnsupportedOp(f"a size-dependent {where(path)}", "", "",
                            f"{why} (dims {', '.join(symbols)} marked dynamic)")

    def walk(b, gs, c, path):
        others = list(gs.values()) + [c]
        if isinstance(b, dict):
            if any(not isinstance(o, dict) or o.keys() != b.keys() for o in others):
                fail(path, "the graph's structure changes with the sizes")
            if len(path) >= 2 and path[-2] in ("nodes", "inputs"):  # errors name it
                path = path + [f"node '{b['name']}' ({b['op']})" if "op" in b else f"input '{b['name']}'"]
            return {k: walk(b[k], {s: g[k] for s, g in gs.items()}, c[k], path + [k]) for k in b}
        if isinstance(b, list):
            if any(not isinstance(o, list) or len(o) != len(b) for o in others):
                fail(path, "the graph's structure (a list's length) changes with the sizes")
            return [walk(x, {s: g[k] for s, g in gs.items()}, c[k], path + [k]) for k, x in enumerate(b)]
        if all(o == b and type(o) is type(b) for o in others):
            return b
        if isinstance(b, bool) or not isinstance(b, int) or \
                any(isinstance(o, bool) or not isinstance(o, int) for o in others):
            fail(path, f"a value ({b!r}) computed from the sizes")
        dim = _monomial(symbols, base_sizes, grown_sizes, check_sizes, b, {s: g for s, g in gs.items()}, c)
        if dim is None:
            fail(path, f"a number ({b} at sizes {base_sizes}) that is no product of the sizes")
        return dim

    graph = walk(base, grown, check, [])
    graph["dims"] = {s: {"min": MIN_SIZE} for s in symbols}
    return graph
