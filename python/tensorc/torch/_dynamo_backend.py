"""torch.compile(model, backend="tensorc"): the Dynamo backend.

Dynamo hands a backend each graph it captured (a torch.fx.GraphModule of
torch functions, methods and modules) with fake example inputs, and calls
what the backend returns with the graph's inputs in the same order; the
graph returns a tuple. This backend captures the graph at the ATen level
on those fake inputs (tensorc.torch._aten, docs/pytorch.md "The ATen
path"): tensorc compiles the partitions it lowers, PyTorch runs the rest
between them. Where grad is enabled and a partition's input requires grad
(the parameters, which Dynamo passes as graph inputs since PyTorch 2.5),
the partition compiles its training form: tensorc's own backward behind
an autograd.Function, so loss.backward() fills .grad; the ops PyTorch runs
have PyTorch's backward.

Shapes are static for now: where Dynamo makes a dim dynamic (a SymInt
size), the graph is captured again at each call's sizes.
"""
import logging
import re
import warnings

import torch

from ._common import UnsupportedOp
from ._compile import compile as _compile
from ._dynamic import MIN_SIZE

log = logging.getLogger("tensorc.torch")


def _device_target(tensors, gm=None):
    """The target of a graph: CUDA where any of its tensors is on a CUDA
    device. Its inputs alone do not say: a graph without tensor inputs
    that makes a mask with torch.arange(..., device="cuda") (transformers'
    decoders after a graph break) returns CUDA tensors, as eager would, so
    the values Dynamo recorded for its nodes count too."""
    devices = {t.device.type for t in tensors}
    for node in gm.graph.nodes if gm is not None else ():
        v = node.meta.get("example_value", node.meta.get("val"))
        for t in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(t, torch.Tensor):
                devices.add(t.device.type)
    return "cuda" if "cuda" in devices else "cpu"


class _DynamoCall:
    """The compiled graph, called with Dynamo's flat inputs; one artifact
    per input signature (shapes, dtypes, requires_grad, grad mode)."""

    def __init__(self, gm, options, static=False):
        self.gm, self.options = gm, options
        self.compiled = {}
        # Static: every input a tensor of fixed sizes. Dynamo's guards then
        # fix each input's sizes, strides, dtype, device and requires_grad
        # for this graph (another graph is compiled otherwise), so the grad
        # mode alone picks the artifact: no signature per call.
        self.static, self.by_grad_mode = static, {}

    def _signature(self, inputs):
        for i, x in enumerate(inputs):
            if not isinstance(x, (torch.Tensor, int, float, bool)):
                raise UnsupportedOp(f"graph input {i} of type {type(x).__name__}", "", "")
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        train = torch.is_grad_enabled() and any(x.requires_grad for x in tensors)
        # Numbers (the sizes Dynamo passes once it makes dims dynamic) are
        # part of the signature: the artifact is specialized to them.
        return train, tuple((tuple(x.shape), x.dtype, x.device, x.requires_grad) if isinstance(x, torch.Tensor)
                            else (type(x).__name__, x) for x in inputs)

    def compiled_for(self, inputs):
        train, key = self._signature(inputs)
        fn = self.compiled.get((train, key))
        if fn is None:
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            devices = {x.device.type for x in tensors if x.dim() > 0}
            if len(devices) > 1:  # the by-name exporter runs one device (the ATen path splits by device)
                raise RuntimeError(f"tensorc backend: inputs on several devices ({', '.join(sorted(devices))})")
            target = _device_target(tensors, self.gm)
            examples = [x.detach().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
                        for x in inputs]
            fn = _compile(self.gm, examples, target=target, train=train, **self.options)
            log.debug("tensorc backend: %s for %s (train=%s, %s)", "loaded" if fn.cache_hit else "compiled",
                      target, train, [list(x.shape) if isinstance(x, torch.Tensor) else x for x in inputs])
            self.compiled[(train, key)] = fn
        if self.static:
            self.by_grad_mode[torch.is_grad_enabled()] = fn
        return fn

    def __call__(self, *inputs):
        # What the graph returns: Dynamo's graphs return a tuple.
        fn = self.by_grad_mode.get(torch.is_grad_enabled()) if self.static else None
        return (fn or self.compiled_for(inputs))(*inputs)


class _AtenDynamoCall:
    """Dynamo's graph through the ATen path (tensorc.torch._aten): captured
    on Dynamo's fake example inputs, partitioned, the ops tensorc does not
    lower run in PyTorch. Where an input's size is symbolic (Dynamo made a
    dim dynamic), it is captured at each call's sizes instead (static
    shapes for now). Where capture itself fails, the graph runs in PyTorch
    with one warning: a model eager runs never fails here."""

    def __init__(self, gm, example_inputs, options, strict):
        self.gm, self.options, self.strict = gm, options, strict
        self.by_signature = {}
        self.program = None
        symbolic = any(_is_symbolic(x) or isinstance(x, torch.Tensor) and
                       any(map(_is_symbolic, (*x.shape, *x.stride()))) for x in example_inputs)
        # Dynamo's symbolic sizes as tensorc's symbolic dims: one program
        # for every size (built at the first call, on its real tensors).
        self.dynamic = _symbolic_dims(example_inputs) if symbolic else None
        if not symbolic:
            self.program = self._compile(list(example_inputs))

    def _compile(self, inputs, dynamic=None):
        from ._aten import StrictFallbackError, compile_program
        options = dict(self.options)
        options["target"] = _device_target([x for x in inputs if isinstance(x, torch.Tensor)], self.gm)
        try:
            if dynamic is not None:
                dims, scalars = dynamic
                return compile_program(self.gm, tuple(inputs), options, strict=self.strict, placed=True,
                                       dynamic=dims, scalars=scalars)
            return compile_program(self.gm, tuple(inputs), options, strict=self.strict, placed=True)
        except StrictFallbackError:
            raise
        except Exception as ex:  # capture failed: eager runs it
            if self.strict:
                raise
            warnings.warn(f"tensorc backend: the graph could not be captured ({type(ex).__name__}: {ex}); "
                          "it runs in PyTorch", stacklevel=2)
            log.debug("tensorc backend: capture failed", exc_info=True)
            return self.gm.forward

    def __call__(self, *inputs):
        if self.program is not None:
            return self.program(*inputs)
        if self.dynamic is not None:
            dynamic, self.dynamic = self.dynamic, None
            # Probes at sizes near this call's, from 2 up (sizes 0 and 1 are
            # PyTorch's special cases): else a program per size, as before.
            if all(inputs[i].shape[d] >= MIN_SIZE for i, dims in dynamic[0].items() for d in dims):
                self.program = self._compile(list(inputs), dynamic)
                return self.program(*inputs)
        key = tuple((tuple(x.shape), x.dtype, x.device) if isinstance(x, torch.Tensor) else (type(x).__name__, x)
                    for x in inputs)
        program = self.by_signature.get(key)
        if program is None:
            program = self.by_signature[key] = self._compile(list(inputs))
        return program(*inputs)


def tensorc_backend(gm, example_inputs, **options):
    """The Dynamo backend: `gm` compiled by tensorc for the device of
    `example_inputs`. `options` go to tensorc.torch.compile (mode,
    cache_dir, tensorc_path, options, frontend, strict, fallback_random); through
    torch.compile: torch.compile(model, backend=functools.partial(tensorc_backend, mode="reduce-overhead")).
    frontend="aten" (the default) captures the graph at the ATen level,
    PyTorch running what tensorc does not lower (strict=True: an error
    instead), tensorc's backward for its partitions where grad is enabled;
    "fx" (the older path, to be removed) maps torch functions by name and
    fails on any op it does not know."""
    frontend = options.pop("frontend", "aten")
    strict = options.pop("strict", False)
    if frontend == "aten":
        return _AtenDynamoCall(gm, example_inputs, options, strict)
    if frontend != "fx":
        raise ValueError(f"tensorc backend: unknown frontend '{frontend}' (aten, fx)")
    static = all(isinstance(x, torch.Tensor) and not any(map(_is_symbolic, (*x.shape, *x.stride())))
                 for x in example_inputs)
    call = _DynamoCall(gm, dict(options), static)
    # Compile now, on the example inputs: an unsupported op is an error at
    # compile time, naming the op and its source line. Where they are fake
    # (shapes without data), at the first call instead: the exporter runs
    # the graph on its example inputs.
    # Likewise where a size is symbolic (a SymInt input: Dynamo made a dim
    # dynamic), which the call then passes as a plain int.
    if not any(_is_fake(x) or _is_symbolic(x) for x in example_inputs):
        call.compiled_for(list(example_inputs))
    return call


def _is_fake(x):
    if not isinstance(x, torch.Tensor):
        return False
    try:  # PyTorch >= 2.1: also a functional tensor wrapping a fake one
        from torch._subclasses.fake_tensor import is_fake
        return is_fake(x)
    except ImportError:
        pass
    try:
        from torch._subclasses.fake_tensor import FakeTensor
    except ImportError:  # no fake tensors: every tensor is real
        return False
    return isinstance(x, FakeTensor)


def _symbolic_dims(example_inputs):
    """Dynamo's symbolic sizes as compile_program's dynamic= ({input
    position: {dim: symbol}}) and scalars ({input position: symbol} of the
    number inputs that are sizes), or None where a size is an expression
    (2*s0: tensorc's probes resize plain symbols only) or a number input
    is no dim's size."""
    def plain(v):
        text = str(getattr(getattr(v, "node", None), "expr", v))
        return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) else None

    dims, scalars = {}, {}
    for i, x in enumerate(example_inputs):
        if _is_symbolic(x):
            if plain(x) is None:
                return None
            scalars[i] = plain(x)
        elif isinstance(x, torch.Tensor):
            for d, n in enumerate(x.shape):
                if _is_symbolic(n):
                    if plain(n) is None:
                        return None
                    dims.setdefault(i, {})[d] = plain(n)
    symbols = {s for d in dims.values() for s in d.values()}
    if not dims or any(s not in symbols for s in scalars.values()):
        return None  # a number input that is no dim's size: nothing to resize it with
    return dims, scalars


def _is_symbolic(x):
    kinds = tuple(getattr(torch, k) for k in ("SymInt", "SymFloat", "SymBool") if hasattr(torch, k))
    return isinstance(x, kinds)


def register():
    """Registers the backend as "tensorc" with torch.compile (PyTorch >= 2.0;
    importing tensorc.torch does it). Returns whether Dynamo is present."""
    try:
        from torch._dynamo import register_backend
    except ImportError:  # PyTorch 1.x: no Dynamo
        return False
    try:
        register_backend(name="tensorc")(tensorc_backend)
    except Exception as ex:  # already registered (a reload)
        log.debug("tensorc backend: %s", ex)
    return True
