"""A PyTorch program compiled through the ATen path: its ATen graph
(capture.py) with each partition (partition.py) replaced by a call of a
tensorc artifact, the rest run by PyTorch. Calls read the module's
parameters and buffers by name at every call (an assigned nn.Parameter is
seen) and run the graph with autocast off: its casts are already explicit."""
import collections
import concurrent.futures
import json
import logging
import operator
import os
import subprocess
import tempfile
import warnings

import torch

import tensorc

from .. import _compile
from .._common import UnsupportedOp
from .._dynamic import MIN_SIZE, dynamic_dims, symbol_sizes, symbolize
from .capture import capture
from .graph_file import Unsupported
from .lowering import SEED_INPUT, bind, lower_graph, packet_name, value
from .random_draws import hoist_random_draws
from .partition import fallback_ops, propose

log = logging.getLogger("tensorc.torch")
_CHECK_PARTITIONS = os.environ.get("TENSORC_CHECK_PARTITIONS") == "1"


class StrictFallbackError(RuntimeError):
    """strict=True and some op would run in PyTorch."""


class TensorcPartition(torch.nn.Module):
    """One partition: its graph file, compiled at the first call of each
    form (inference, or training with the inputs that then require grad)."""

    def __init__(self, graph, input_names, input_positions, outputs, single, output_values, options, eager, strict,
                 seeded=False):
        super().__init__()
        self.graph, self.options = graph, options
        # The partition's ATen ops, run by PyTorch where tensorc fails to
        # compile it (one warning; an error with strict).
        self.eager, self.strict, self.failed = eager, strict, None
        # The graph file's inputs and each one's position among the call's.
        self.input_names, self.input_positions = input_names, input_positions
        self.seeded = seeded  # its last input is the dropout seed (SEED_INPUT), drawn per call
        # outputs: [("input", call input position) | ("ref", graph output position)];
        # single: the submodule returns one value, not a tuple.
        self.outputs, self._single = outputs, single
        self._output_meta = output_values  # fake values of the graph's outputs
        self.compiled = {}
        self.symbolic = False  # its graph has symbolic dims (dynamic=): output shapes per call
        self._pending = {}  # key: the future of a compile started ahead of the call (prefetch)
        self.written_positions = []  # inputs the program writes after this partition

    @staticmethod
    def key_of(requires_grad):
        """The form a call compiles: inference, or training with these of
        the partition's inputs requiring grad."""
        train = torch.is_grad_enabled() and any(requires_grad)
        return (train, tuple(requires_grad)) if train else (False,)

    def prefetch(self, key, pool):
        """Starts compiling the form `key` on `pool` (the program's first
        call predicts every partition's form, so they compile side by
        side); its call waits for it."""
        if key not in self.compiled and key not in self._pending:
            self._pending[key] = pool.submit(self._prepare, key)

    def _module_for(self, args):
        key = self.key_of([a.requires_grad for a in args])
        if key in self.compiled:  # None: it did not compile, PyTorch runs it (warned once)
            return self.compiled[key]
        try:
            pending = self._pending.pop(key, None)
            module = self._assemble(pending.result() if pending is not None else self._prepare(key))
            module.compiled_ahead = pending is not None  # by the first call's prefetch
        except (RuntimeError, OSError, ValueError) as ex:
            if self.strict:
                raise
            warnings.warn(f"tensorc.torch: partition {self.graph['name']} did not compile ({ex}); "
                          "PyTorch runs its ops", stacklevel=3)
            module = None
        self.compiled[key] = module
        return module

    def differentiable_outputs(self, requires_grad):
        """Which of the graph's outputs a training call with these inputs
        requiring grad differentiates: floating ones computed from a
        floating input that requires grad. The others (an attention mask
        made from the token ids) are constants, as eager's would be."""
        floating = {i["name"]: i["dtype"] in _FLOAT_DTYPES for i in self.graph["inputs"]}
        wrt = [n for n, r in zip(self.input_names, requires_grad) if r and floating[n]]
        varying = _depending_on(self.graph, wrt)
        return wrt, [self._output_meta[i].is_floating_point() and varying(o)
                     for i, o in enumerate(self.graph["outputs"])]

    def _placed(self, a):
        """A contiguous tensor on the partition's device (a 0-d tensor PyTorch
        left on the CPU moves: its value is what the graph reads)."""
        if self.options["target"] == "cuda" and a.device.type != "cuda" and a.dim() == 0:
            a = a.to("cuda")
        return a.contiguous()

    def _prepare(self, key):
        """The graph file of the form `key` compiled and its artifacts
        loaded: the slow part, which may run on another thread (prefetch);
        _assemble makes the module (its sessions) on the calling one."""
        train = key[0]
        graph = dict(self.graph)
        sources = {name: ("input", i) for i, name in enumerate(self.input_names)}
        if self.seeded:  # a fresh seed per call from torch's generator (torch.manual_seed reproduces it)
            sources[SEED_INPUT] = ("seed", None)
        scalars, grad_argv, wrt, constant_outputs = set(), [], [], set()
        if train:
            graph["nodes"] = list(graph["nodes"])
            graph["outputs"] = list(graph["outputs"])
            taken = {i["name"] for i in graph["inputs"]} | {n["name"] for n in graph["nodes"]}
            for i, ref in enumerate(graph["outputs"]):
                if self._output_meta[i].dim() == 0:
                    name = _fresh_name(f"{ref.replace(':', '_')}_as_1", taken)
                    graph["nodes"].append({"name": name, "op": "reshape", "args": [ref], "attrs": {"shape": [1]}})
                    graph["outputs"][i] = name
                    scalars.add(i)
            wrt, which = self.differentiable_outputs(key[1])
            differentiable = [o for o, d in zip(graph["outputs"], which) if d]
            constant_outputs = set(graph["outputs"]) - set(differentiable)
            if wrt and differentiable:
                grad_argv = ["--wrt", *wrt, "--of", *differentiable]
        o = self.options
        built = _compile.build_artifacts(graph, o["target"], o.get("mode"), o.get("options", ()), grad_argv,
                                         o.get("cache_dir"), o.get("tensorc_path"))

        executables = _compile.load_all(built.artifacts)
        return _Prepared(graph, sources, scalars, grad_argv, wrt, constant_outputs, built, executables)

    def _assemble(self, p):
        o = self.options
        graphs = "always" if o.get("mode") == "reduce-overhead" else o.get("cuda_graphs", "repeated")
        module = _compile.CompiledModule(torch.nn.Module(), p.sources, p.graph["outputs"], False, p.scalars,
                                         p.built.artifacts[0], p.built.cache_hit, p.executables,
                                         symbolic=self.symbolic, cuda_graphs=graphs)
        module.compiled_graph = p.graph  # what was compiled (TENSORC_DUMP_PARTITIONS)
        if p.grad_argv:
            module.grad_argv = p.grad_argv
            module.wrt = p.wrt
            module.non_differentiable = p.constant_outputs
            module.backward_graph = p.built.backward_graph
            module.compile_variant = p.built.compile_variant
        return module

    def forward(self, *args):
        # tensorc reads contiguous tensors on its device; PyTorch's own run
        # of the ops (and an output that is an input) keeps the call's
        # tensors as they are: the ATen graph's views expect their strides.
        own = tuple(self._placed(args[k]) for k in self.input_positions)
        module = self._module_for(own)
        if module is None:
            # PyTorch's autograd may save an input the graph later writes
            # (batch norm's backward reads the running statistics): it gets
            # a copy, as the copy_ back would otherwise fail the backward.
            args = tuple(a.clone() if k in self.written_positions else a for k, a in enumerate(args))
            return self.eager(*args)
        results = module(*own)
        out = []
        for kind, k in self.outputs:
            out.append(args[k] if kind == "input" else results[k])
        if _CHECK_PARTITIONS:
            self._check_against_eager(args, own, out)
        return out[0] if self._single else tuple(out)

    def _check_against_eager(self, args, own, out):
        """TENSORC_CHECK_PARTITIONS=1 (debugging): each call's results beside
        PyTorch's own run of the partition's ATen ops; a difference (or a
        NaN tensorc made from finite inputs) is logged with the partition's
        name. With TENSORC_DUMP_PARTITIONS=DIR such a partition's graph file
        and inputs (.npy) are written to DIR/NAME/ for `tensorc run`."""
        name = self.graph["name"]
        finite_inputs = True
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.is_floating_point() and torch.isnan(a).any().item():
                log.warning("tensorc.torch: partition %s: input %d holds NaN", name, k)
                finite_inputs = False
        want = None
        for attempt in (args, tuple(a.contiguous() if isinstance(a, torch.Tensor) else a for a in args)):
            try:
                with torch.no_grad():
                    want = self.eager(*attempt)
                break
            except RuntimeError as ex:  # a view the call's strides do not allow (fake strides differ)
                failure = ex
        if want is None:
            log.warning("tensorc.torch: partition %s not compared: PyTorch's run failed (%s)", name, failure)
        want = None if want is None else [want] if self._single else list(want)
        suspicious = False
        for i, got in enumerate(out):
            if not isinstance(got, torch.Tensor) or not got.is_floating_point():
                continue
            g = got.detach().double()
            eager_nan = want is not None and torch.isnan(want[i]).any().item()
            if finite_inputs and not eager_nan and torch.isnan(g).any().item():
                log.warning("tensorc.torch: partition %s output %d holds NaN (its inputs and PyTorch's do not)",
                            name, i)
                suspicious = True
            if want is None or self.seeded:  # dropout: tensorc's random stream is not PyTorch's
                continue
            r = want[i].double()
            bad_got, bad_ref = not torch.isfinite(g).all().item(), not torch.isfinite(r).all().item()
            scale = r[torch.isfinite(r)].abs().max().item() if r.numel() and not bad_ref else 1.0
            err = (g - r).abs().max().item() if g.shape == r.shape else float("inf")
            if bad_got != bad_ref or err > 1e-2 * max(scale, 1e-6) or got.dtype != want[i].dtype:
                log.warning("tensorc.torch: partition %s output %d differs from PyTorch's: max error %.3g "
                            "(PyTorch's max %.3g), non-finite tensorc %s / PyTorch %s, dtype %s / %s",
                            name, i, err, scale, bad_got, bad_ref, got.dtype, want[i].dtype)
                suspicious = True
        if suspicious and os.environ.get("TENSORC_DUMP_PARTITIONS"):
            self._dump(os.environ["TENSORC_DUMP_PARTITIONS"], own)

    def _dump(self, folder, own):
        """The partition's graph file and this call's inputs, once per
        partition: `tensorc run DIR/NAME/graph.json --input NAME=NAME.npy ...`
        reproduces it (bf16 inputs are written as exact f32)."""
        import json
        import numpy
        where = os.path.join(folder, self.graph["name"])
        if os.path.exists(where):
            return
        os.makedirs(where)
        module = next((m for m in self.compiled.values() if m is not None), None)
        compiled = getattr(module, "compiled_graph", self.graph)
        with open(os.path.join(where, "graph.json"), "w") as f:
            json.dump(compiled, f)
        if getattr(module, "grad_argv", None):  # training: the forward ran is `tensorc grad --partition`'s
            with open(os.path.join(where, "grad_argv.json"), "w") as f:
                json.dump(module.grad_argv, f)
        for input_name, a in zip(self.input_names, own):
            t = a.detach().cpu()
            t = t.float() if t.dtype in (torch.bfloat16, torch.float16) else t
            t = t.to(torch.uint8).bool() if t.dtype == torch.bool else t
            numpy.save(os.path.join(where, input_name + ".npy"), t.numpy())
        log.warning("tensorc.torch: partition %s dumped to %s", self.graph["name"], where)


_FLOAT_DTYPES = {"f16", "bf16", "f32", "f64"}
# A partition's form compiled and loaded (TensorcPartition._prepare).
_Prepared = collections.namedtuple("_Prepared", "graph sources scalars grad_argv wrt constant_outputs built executables")


def _fresh_name(base, taken):
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _depending_on(graph, names):
    """Whether a value (a reference "node" or "node:k") of the graph file is
    computed from any of `names` through a differentiable path: a training
    batch norm's new running statistics (its results 1 and 2) are not, as
    in PyTorch, where they are updated outside autograd."""
    reached = set(names)
    statistics = {n["name"] for n in graph["nodes"] if n["op"] == "batch_norm"}

    def varying(ref):
        name, _, k = ref.partition(":")
        return name in reached and not (name in statistics and k in ("1", "2"))

    for node in graph["nodes"]:  # in order: operands come first
        if any(isinstance(a, str) and varying(a) for a in node.get("args", ())):
            reached.add(node["name"])
    return varying


def _lower_partition(sub, name, options, strict=False):
    """A TensorcPartition of the fused submodule `sub` (its placeholders the
    partition's inputs); raises Unsupported where its lowering fails."""
    inputs = [n for n in sub.graph.nodes if n.op == "placeholder"]
    body = [n for n in sub.graph.nodes if n.op == "call_function"]
    results = next(n for n in sub.graph.nodes if n.op == "output").args[0]
    single = not isinstance(results, (tuple, list))
    results = [results] if single else list(results)
    computed = [r for r in results if r not in inputs]
    graph = lower_graph(body, inputs, computed, name)
    # The graph file's inputs: the submodule's, less the empty ones (a
    # concatenation skips them); each one's position among the call's.
    input_names = [i["name"] for i in graph["inputs"] if i["name"] != SEED_INPUT]
    seeded = len(input_names) < len(graph["inputs"])
    positions = [k for k, n in enumerate(inputs) if value(n).numel() > 0]
    if len(positions) != len(input_names):
        raise Unsupported(f"partition {name}: its inputs do not match its graph file's")
    refs = dict(zip(computed, graph["outputs"]))
    # The graph returns each computed value once; an output that is an
    # input (a view the lowering folded away) is forwarded in Python.
    unique, metas, outputs = [], [], []
    for r in results:
        if r in inputs:
            outputs.append(("input", inputs.index(r)))
            continue
        ref = refs[r]
        if ref in input_names:
            outputs.append(("input", positions[input_names.index(ref)]))
            continue
        if ref not in unique:
            unique.append(ref)
            metas.append(value(r))
        outputs.append(("ref", unique.index(ref)))
    graph["outputs"] = unique
    return TensorcPartition(graph, input_names, positions, outputs, single, metas, options, sub, strict, seeded)


def _boundary(nodes):
    """The values a group of nodes reads from outside it and the values of
    it read outside (fuse_by_partitions' submodule inputs and outputs)."""
    inside = set(nodes)
    inputs, outputs = [], []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a not in inputs:
                inputs.append(a)
        if any(u not in inside for u in n.users):
            outputs.append(n)
    return inputs, outputs


def _fused(gm, partitions):
    try:
        from torch.fx.passes.utils.fuser_utils import fuse_by_partitions
    except ImportError:  # pragma: no cover
        raise
    try:  # PyTorch >= 2.3 takes {node: None} partitions
        return fuse_by_partitions(gm, [dict.fromkeys(p) for p in partitions])
    except (TypeError, AttributeError):
        return fuse_by_partitions(gm, partitions)


def _keep_random_order(fused, partitions, order):
    """Puts the graph's nodes back in their original order as far as the
    data flow allows (a topological sort preferring each node's position
    before fusion; a partition's is its first node's), so that the random
    ops PyTorch runs draw from its generator in eager's order:
    fuse_by_partitions' sort moved a dropout's bernoulli_ before an earlier
    one when each filled an `empty` made by a partition of its own, and
    fallback_random's masks were swapped."""
    import heapq
    key = {}
    for node in fused.graph.nodes:
        if node.op == "call_module" and node.target.startswith("fused_"):
            key[node] = min(order[n] for n in partitions[int(node.target[len("fused_"):])])
        elif node in order:
            key[node] = order[node]
    nodes = list(fused.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    for node in nodes:  # new nodes (a partition's getitems) go with what they read
        if node not in key:
            key[node] = max((key[a] for a in node.all_input_nodes if a in key), default=-1)
    waiting = {n: len(set(n.all_input_nodes)) for n in nodes}
    ready = [(key[n], position[n], n) for n in nodes if waiting[n] == 0 and n.op != "output"]
    heapq.heapify(ready)
    sorted_nodes = []
    while ready:
        _, _, n = heapq.heappop(ready)
        sorted_nodes.append(n)
        for u in n.users:
            waiting[u] -= 1
            if waiting[u] == 0 and u.op != "output":
                heapq.heappush(ready, (key[u], position[u], u))
    if len(sorted_nodes) != len(nodes) - 1:  # not a DAG as expected: leave it
        return
    placeholders = [n for n in sorted_nodes if n.op == "placeholder"]
    rest = [n for n in sorted_nodes if n.op != "placeholder"]
    previous = placeholders[-1] if placeholders else None
    for n in rest:
        if previous is None:
            nodes[0].prepend(n)
        elif previous.next is not n:
            previous.append(n)
        previous = n
    fused.graph.lint()


class AtenCompiled:
    """The compiled program: call it like the module."""

    def __init__(self, module, captured, gm, fallbacks, partitions):
        self.module, self.captured, self.gm = module, captured, gm
        self.fallbacks, self.partitions = fallbacks, partitions
        # Whether the program writes into a call input (functionalization's
        # copy_ back): traced with distinct inputs, it would differ from
        # eager when a call passes one tensor twice.
        placeholders = [n for n in captured.gm.graph.nodes if n.op == "placeholder"]
        self.mutates_inputs = any(n.op == "call_function" and getattr(n.target, "__name__", "").startswith("copy_")
                                  and n.args[0] in placeholders for n in captured.gm.graph.nodes)
        self._warned_alias = False
        self._prefetched = False
        # dynamic=: the marked dims; whether the partitions took symbolic
        # dims; a static program per call whose sizes are below the
        # probes' minimum, or per size where they did not (compile_program).
        self.dynamic, self.symbolic, self.example_key = [], False, None
        self.specialize, self.specialized = None, {}

    def _prefetch(self, args, jobs):
        """At the first call: every partition's form predicted from which
        of the call's tensors require grad (propagated through the graph as
        autograd would), and compiled side by side on TENSORC_PARTITION_JOBS
        threads (default: half the CPUs, 2 to 8), each call then waiting
        for its own. A wrong guess costs a compile, never a result: the call
        compiles the form it needs."""
        if jobs < 2 or len(self.partitions) < 1:
            return
        flags = {}
        placeholders = iter(args)
        grad = torch.is_grad_enabled()
        forms = []
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                a = next(placeholders, None)
                flags[n] = grad and isinstance(a, torch.Tensor) and a.requires_grad
            elif n.op == "call_module" and isinstance(getattr(self.gm, n.target, None), TensorcPartition):
                part = getattr(self.gm, n.target)
                requires = [_flag(flags, n.args[k]) for k in part.input_positions]
                key = part.key_of(requires)
                forms.append((part, key))
                differentiable = part.differentiable_outputs(key[1])[1] if key[0] else None
                out = tuple(_flag(flags, n.args[k]) if kind == "input" else bool(differentiable and differentiable[k])
                            for kind, k in part.outputs)
                flags[n] = out[0] if part._single else out
            elif n.op == "call_function":
                if n.target is operator.getitem:
                    whole = flags.get(n.args[0])
                    index = n.args[1]
                    if isinstance(whole, tuple):
                        flags[n] = whole[index] if isinstance(index, int) and -len(whole) <= index < len(whole) \
                            else False
                    else:  # an op with no recorded results (several, PyTorch 1.13): this result's own
                        flags[n] = _floating_flags(n.meta.get("val"), bool(whole))
                    continue
                needs = grad and packet_name(n.target) not in _NOT_DIFFERENTIABLE and \
                    any(_flag(flags, a) is True for a in n.all_input_nodes)
                val = n.meta.get("val")
                flags[n] = needs if val is None else _floating_flags(val, needs)
        if not forms:
            return
        pool = concurrent.futures.ThreadPoolExecutor(min(jobs, len(forms)), thread_name_prefix="tensorc-compile")
        for part, key in forms:
            part.prefetch(key, pool)
        pool.shutdown(wait=False)  # the submitted compiles go on; each call waits for its own

    def _state(self):
        out = []
        for name in self.captured.state_names:
            *path, attr = name.split(".")
            m = self.module
            for p in path:
                m = getattr(m, p)
            out.append(getattr(m, attr))
        return out

    def __call__(self, *inputs):
        if self.dynamic and (not self.symbolic or min(symbol_sizes(inputs, self.dynamic).values()) < MIN_SIZE):
            key = _shapes_of(inputs)
            if key != self.example_key:
                if key not in self.specialized:
                    self.specialized[key] = self.specialize(inputs)
                return self.specialized[key](*inputs)
        state = self._state()
        if self.mutates_inputs and _aliased(state + [x for x in inputs if isinstance(x, torch.Tensor)]):
            if not self._warned_alias:
                self._warned_alias = True
                warnings.warn("tensorc.torch: a call passes one tensor as several inputs of a program that updates "
                              "its inputs in place: running it in PyTorch (as eager aliases them)", stacklevel=2)
            return self.module(*inputs)
        if not self._prefetched:
            self._prefetched = True
            jobs = _partition_jobs()  # a malformed TENSORC_PARTITION_JOBS is an error
            try:
                self._prefetch(state + list(inputs), jobs)
            except Exception:  # an optimization only: each partition still compiles at its call
                log.debug("tensorc.torch: the partitions' forms could not be predicted", exc_info=True)
        # Autocast off: the graph holds the casts autocast made when traced.
        with torch.autocast("cpu", enabled=False), _cuda_autocast_off():
            out = self.gm(*state, *inputs)
        return out

    def explain(self):
        """What runs where: tensorc's partitions (nodes, inputs, outputs) and
        the ops PyTorch runs, with why and where."""
        return {"partitions": [{"name": n, "ops": len(p.graph["nodes"]), "inputs": len(p.input_names),
                                "outputs": len(p.graph["outputs"])} for n, p in self.partitions],
                "fallbacks": [{"op": op, "why": why, "where": where} for op, why, where in self.fallbacks]}


# Ops whose results never require grad (the others do where a floating
# result has an operand that does).
_NOT_DIFFERENTIABLE = {"detach", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
                       "randint_like", "argmax", "argmin", "sym_size"}


def _flag(flags, a):
    """Whether the value `a` (a node, or anything else) requires grad."""
    f = flags.get(a, False) if isinstance(a, torch.fx.Node) else False
    return any(f) if isinstance(f, tuple) else f


def _floating_flags(val, needs):
    """A result's requires-grad flag (a tuple for several results): floating
    results of an op with an operand that requires grad."""
    if isinstance(val, (tuple, list)):
        return tuple(_floating_flags(v, needs) for v in val)
    return bool(needs and isinstance(val, torch.Tensor) and val.is_floating_point())


def _partition_jobs():
    text = os.environ.get("TENSORC_PARTITION_JOBS")
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            raise ValueError(f"TENSORC_PARTITION_JOBS='{text}' is not a number of threads") from None
    return max(2, min(8, (os.cpu_count() or 2) // 2))


def _storage(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:  # PyTorch 1.x
        return t.storage().data_ptr()


def _aliased(tensors):
    """Whether two of `tensors` share memory."""
    seen = set()
    for t in tensors:
        p = _storage(t)
        if p in seen and p != 0:
            return True
        seen.add(p)
    return False


def _cuda_autocast_off():
    import contextlib
    if torch.cuda.is_available():
        return torch.autocast("cuda", enabled=False)
    return contextlib.nullcontext()


# The ATen ops that draw random numbers (fallback_random runs them in PyTorch).
_RANDOM_OPS = {"native_dropout", "bernoulli", "bernoulli_", "rand", "rand_like", "randn", "randn_like", "randint",
               "randint_like", "randperm", "normal", "normal_", "uniform", "uniform_", "exponential_",
               "multinomial", "dropout", "_fused_dropout", "rrelu_with_noise"}


def _draws_random(n):
    """A random op, or attention with dropout (its probabilities' mask)."""
    name = packet_name(n.target)
    if name in _RANDOM_OPS:
        return True
    if name is not None and "scaled_dot_product" in name:
        try:
            return float(bind(n).get("dropout_p") or 0) != 0
        except (AttributeError, RuntimeError, TypeError):
            return False
    return False


def compile_program(module, example_inputs, options, strict=False, autocast=None, placed=False, dynamic=None,
                    scalars=None):
    """`module` captured on `example_inputs` (real or fake), partitioned,
    each partition lowered (compiled at its first call). `placed`: the
    example tensors are on the devices the program runs on (Dynamo's), so
    an op on another device than the target stays in PyTorch; otherwise
    (tensorc.torch.compile for a target, from CPU tensors too) every op is
    compiled for the target. `dynamic` (tensorc.torch.compile's): dims
    whose size may change between calls, symbolic in each partition's one
    artifact (_dynamic.py's probes, over the partitions' graph files);
    `scalars` {input position: symbol}: number inputs that are those sizes
    (Dynamo's)."""
    spec = dynamic_dims(example_inputs, dynamic) if dynamic else []
    program = _partitioned(module, example_inputs, options, strict, autocast, placed)
    if spec:
        program.dynamic = spec
        program.example_key = _shapes_of(example_inputs)
        program.specialize = lambda inputs: compile_program(module, inputs, options, strict, autocast, placed)
        why = _make_symbolic(program, module, example_inputs, options, autocast, placed, spec, scalars)
        if why:
            if strict:
                raise ValueError(f"tensorc.torch.compile(dynamic=...): {why}")
            warnings.warn(f"tensorc.torch.compile(dynamic=...): {why}; one program per size instead",
                          stacklevel=3)
    return program


def _shapes_of(inputs):
    return tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in inputs)


def _make_symbolic(program, module, example_inputs, options, autocast, placed, spec, scalars=None):
    """Each partition's graph file with the marked dims symbolic: the
    program captured again at probe sizes must be the same program but for
    numbers that are products of the sizes (symbolize), so the ops PyTorch
    runs between partitions must not depend on a size, and tensorc must
    take the symbolic graph (`tensorc verify`: an op whose attribute is a
    number only, a slice's bounds, cannot have a symbolic one). The reason
    it cannot, or "" (the partitions then have their symbolic graphs)."""
    def export_at(inputs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = _partitioned(module, tuple(inputs), options, False, autocast, placed)
        return {"partitions": [part.graph for _, part in p.partitions],
                "between partitions": p.gm.code, "in PyTorch": [op for op, _, _ in p.fallbacks]}

    try:
        symbolic = symbolize(export_at, example_inputs, spec, scalars)
    except Exception as e:  # noqa: BLE001 -- any probe's failure leaves the static program, said once
        return str(e) if isinstance(e, (UnsupportedOp, ValueError)) else f"{type(e).__name__}: {e}"
    graphs = [_symbolic_forms(g) for g in symbolic["partitions"]]
    exe = _compile._compiler(options.get("tensorc_path"))
    for graph in graphs:
        text = json.dumps(graph)
        graph["dims"] = {s: d for s, d in symbolic["dims"].items() if f'"{s}' in text or f'*{s}' in text}
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "graph.json")
            with open(path, "w") as f:
                json.dump(graph, f)
            checked = subprocess.run([exe, "verify", path], capture_output=True, text=True)
        if checked.returncode != 0:
            message = (checked.stderr.strip() or checked.stdout.strip()).replace(path + ": ", "")
            return f"partition {graph['name']} cannot have symbolic dims ({message})"
    # The probes' program must be the example's (the partitions' inputs and
    # outputs are bound by name): one tensor passed as two inputs, say,
    # makes another graph than two tensors.
    names = lambda g: ([i["name"] for i in g["inputs"]], list(g["outputs"]))
    if len(graphs) != len(program.partitions) or \
            any(names(g) != names(part.graph) for (_, part), g in zip(program.partitions, graphs)):
        return "the program at the example's sizes is not the program at other sizes (an input passed twice?)"
    for (_, part), graph in zip(program.partitions, graphs):
        part.graph, part.symbolic = graph, True
    program.symbolic = True
    return ""


def _symbolic_forms(graph):
    """The graph file with the ops whose bounds became symbolic in forms
    that take a symbolic size: iota's `end` (from 0, step 1) as its
    `length`; a slice [0:T] of a dim (a position embedding's first T rows)
    as an index_select of iota(T), its attributes being numbers only.
    Other forms are left for `tensorc verify` to refuse."""
    nodes, taken = [], {n["name"] for n in graph["nodes"]} | {i["name"] for i in graph["inputs"]}

    def fresh(base):
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        return name

    for n in graph["nodes"]:
        a = n.get("attrs") or {}
        if n["op"] == "iota" and isinstance(a.get("end"), str) and a.get("start", 0) == 0 and a.get("step", 1) == 1:
            a = {k: v for k, v in a.items() if k not in ("start", "end", "step")}
            a["length"] = [n["attrs"]["end"]]
            nodes.append(dict(n, attrs=a))
            continue
        ends = a.get("ends") if n["op"] == "slice" else None
        if not ends or not any(isinstance(e, str) for e in ends):
            nodes.append(n)
            continue
        axes = a.get("axes") or list(range(len(ends)))
        steps = a.get("steps") or [1] * len(ends)
        symbolic = [k for k, e in enumerate(ends) if isinstance(e, str)]
        if any(a["starts"][k] != 0 or steps[k] != 1 for k in symbolic):
            nodes.append(n)
            continue
        x = n["args"][0]
        static = [k for k in range(len(ends)) if k not in symbolic]
        if static:
            x = fresh(n["name"] + "_static")
            nodes.append({"name": x, "op": "slice", "args": n["args"],
                          "attrs": {"axes": [axes[k] for k in static], "starts": [a["starts"][k] for k in static],
                                    "ends": [ends[k] for k in static], "steps": [steps[k] for k in static]}})
        for j, k in enumerate(symbolic):
            rows = fresh(f"{n['name']}_rows{j}")
            nodes.append({"name": rows, "op": "iota", "args": [], "attrs": {"length": [ends[k]]}})
            out = n["name"] if j == len(symbolic) - 1 else fresh(f"{n['name']}_sliced{j}")
            nodes.append({"name": out, "op": "index_select", "args": [x, rows], "attrs": {"axis": axes[k]}})
            x = out
    return dict(graph, nodes=nodes)


def _partitioned(module, example_inputs, options, strict, autocast, placed):
    captured = capture(module, example_inputs, autocast)
    gm = captured.gm
    name = type(module).__name__
    refused = {}
    if options.get("fallback_random"):
        # Inductor's fallback_random: random ops draw from PyTorch's
        # generator as in eager, so a seeded run reproduces eager's masks
        # (accuracy checks); tensorc's own dropout streams are not PyTorch's.
        # Their draws go first where they can (random_draws.py), so the rest
        # stays one partition.
        for n in hoist_random_draws(gm, _draws_random) or ():
            refused[n] = "fallback_random=True: the tensor a random op of PyTorch's fills first"
        for n in gm.graph.nodes:
            if n.op == "call_function" and _draws_random(n):
                refused[n] = "random: fallback_random=True leaves it to PyTorch's generator"
    while True:
        partitions = propose(gm, refused, options.get("target") if placed else None)
        failed = False
        for p in partitions:
            inputs, outputs = _boundary(p)
            try:
                lower_graph(p, inputs, outputs, name)
            except Unsupported as e:
                node = getattr(e, "node", None)
                if node is None or node in refused:  # not one node's fault: the group runs in PyTorch
                    for n in p:
                        refused.setdefault(n, str(e))
                else:
                    refused[node] = str(e)
                    log.debug("tensorc.torch: %s refused in its partition: %s", node.name, e)
                failed = True
        if not failed:
            break
    fallbacks = fallback_ops(gm, refused)
    if fallbacks:
        listing = "; ".join(f"{op} ({why})" + (f" at {where}" if where else "") for op, why, where in fallbacks)
        if strict:
            raise StrictFallbackError(f"tensorc.torch: strict: these ops would run in PyTorch: {listing}")
        warnings.warn(f"tensorc.torch: {len(fallbacks)} op(s) of {name} run in PyTorch, not tensorc: {listing}",
                      stacklevel=3)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    fused = _fused(gm, partitions) if partitions else gm
    if partitions and sum(1 for n in refused if n.op == "call_function" and _draws_random(n)) > 1:
        _keep_random_order(fused, partitions, order)
    # The graph's inputs it writes at the end (functionalization's copy_
    # back: batch norm's running statistics, in-place updates).
    written = {n.args[0] for n in fused.graph.nodes if n.op == "call_function"
               and getattr(n.target, "__name__", "").startswith("copy_") and n.args[0].op == "placeholder"}
    compiled = []
    for node in list(fused.graph.nodes):
        if node.op != "call_module":
            continue
        sub = getattr(fused, node.target)
        part = _lower_partition(sub, f"{name}_{node.target}", options, strict)
        part.written_positions = [k for k, a in enumerate(node.args) if a in written]
        setattr(fused, node.target, part)
        compiled.append((node.target, part))
    fused.recompile()
    log.debug("tensorc.torch: %s: %d partitions, %d ops in PyTorch", name, len(compiled), len(fallbacks))
    return AtenCompiled(module, captured, fused, fallbacks, compiled)
