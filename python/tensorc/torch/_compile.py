"""tensorc.torch.compile: a module compiled by tensorc, called like the
module. The graph is exported (docs/pytorch.md), compiled by the `tensorc`
compiler ($TENSORC, else on PATH) and cached by the graph's content, the
target and the options, so a second process loads the artifact without
compiling. With train=True, tensorc derives the backward itself (its
autodiff and min-cut partition): the call is an autograd.Function whose
forward runs the forward artifact (keeping the saved tensors) and whose
backward runs the backward artifact, so loss.backward() fills .grad."""
import concurrent.futures
import hashlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import time

import torch

import tensorc

from ._dynamic import MIN_SIZE, dynamic_dims, symbol_sizes, symbolize
from ._export import _Exporter, _prepare

log = logging.getLogger("tensorc.torch")

TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
                "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}


def _cache_dir(cache_dir):
    """The artifact cache folder, created if missing. Its artifacts are code
    this process loads (a CPU artifact's native library runs): the folder
    must be a directory of this user's (or root's), not a symbolic link, not
    writable by group or others; else an error naming it."""
    if not cache_dir:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        cache_dir = os.path.join(base, "tensorc", "artifacts")
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    problem = _not_private(cache_dir, directory=True)
    if problem:
        raise RuntimeError(f"tensorc.torch: the artifact cache {cache_dir} {problem}: its artifacts would run "
                           "code others could plant; fix it or pass another cache_dir")
    return cache_dir


def _not_private(path, directory):
    """Why `path` itself (not what a link names) may not be trusted as this
    user's cache folder or entry; None if it may."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if directory != stat.S_ISDIR(st.st_mode) or (not directory and not stat.S_ISREG(st.st_mode)):
        return "is not a " + ("directory" if directory else "regular file")
    if st.st_uid not in (os.geteuid(), 0):
        return "belongs to another user"
    if st.st_mode & 0o022:
        return "is writable by group or others"
    return None


def _trusted_entries(paths):
    """Whether every cached artifact of `paths` exists and is private to
    this user (an entry that is not is compiled again, replacing it)."""
    return all(os.path.lexists(p) and _not_private(p, directory=False) is None for p in paths)


def _compiler(path):
    exe = path or os.environ.get("TENSORC") or shutil.which("tensorc")
    if not exe:
        raise RuntimeError("tensorc.torch.compile: no tensorc compiler: set $TENSORC or put tensorc on PATH")
    return exe


_identities = {}


def _compiler_identity(exe, target):
    """What an artifact cache key must name besides the graph and options:
    the compiler's version and its binary's digest (a rebuilt compiler of
    the same version makes other artifacts), and for the CPU target the
    host's CPU (an artifact's native code is built for the machine it was
    compiled on: a shared cache folder must not hand it to another)."""
    path = shutil.which(exe) or exe
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size, target)
    if key not in _identities:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        parts = [_tool([exe, "--version"]).strip(), digest.hexdigest()[:16]]
        if target == "cpu":
            parts.append(_host_cpu())
        _identities[key] = " ".join(parts)
    return _identities[key]


def _host_cpu():
    """The CPU model and its feature flags (Linux), else the platform's name."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
        flags = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("flags")), "")
        return hashlib.sha256(f"{model}|{flags}".encode()).hexdigest()[:16]
    except OSError:
        return platform.machine() + " " + platform.processor()


def _tool(argv):
    # With debug logging, a compile reports where its time went (each
    # stage, pass and part: `tensorc compile --timing`) into the log.
    timed = argv[1:2] == ["compile"] and log.isEnabledFor(logging.DEBUG)
    if timed:
        argv = [*argv, "--timing"]
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    log.debug("tensorc.torch: %.2f s: %s", time.perf_counter() - start, " ".join(argv))
    if r.returncode != 0:
        raise RuntimeError(f"tensorc.torch.compile: {r.stderr.strip() or r.stdout.strip()}")
    if timed and r.stderr.strip():
        log.debug("tensorc.torch: where that compile's time went:\n%s", r.stderr.rstrip())
    return r.stdout


class _Runner:
    """Runs a session with torch-owned outputs (they outlive the session's
    next run). On a GPU the run is queued on torch's current stream and not
    waited for, as a torch op is (the caching allocator orders the memory of
    inputs and outputs by stream); on the CPU it completes before returning.
    Output shapes are computed per call only where dims are symbolic."""

    def __init__(self, session, symbolic, cuda_graphs=None):
        self.session, self.symbolic = session, symbolic
        device = session.executable.device
        self.cuda = device[0] == "cuda"
        if self.cuda and cuda_graphs is not None:
            session.set_cuda_graphs(cuda_graphs)
        self.device = torch.device("cuda", device[1]) if self.cuda else torch.device("cpu")
        self.outputs = [(info.name, TORCH_DTYPES[info.dtype]) for info in session.executable.outputs]
        self.input_names = [info.name for info in session.executable.inputs]
        self.enqueue = session.reusing_enqueue()
        self.shapes = None
        if self.cuda:
            # torch.cuda.current_stream() builds a Stream object (~13 us a
            # call on an H100 host); the raw handle is what the run needs.
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            index = self.device.index
            self.current_stream = (lambda: raw(index)) if raw else \
                (lambda: torch.cuda.current_stream(self.device).cuda_stream)

    def __call__(self, args):
        """Inputs by name ({name: tensor}); outputs by name."""
        outs = self.run_list([args[n] for n in self.input_names])
        return {name: t for (name, _), t in zip(self.outputs, outs)}

    def run_list(self, inputs):
        """Inputs in the executable's order; outputs in its order (the
        per-call path of a compiled module's inference)."""
        shapes = self.shapes
        if shapes is None:
            shapes = self.session.output_shapes(*inputs)
            if not self.symbolic:
                self.shapes = shapes
        outs = [torch.empty(shape, dtype=dtype, device=self.device) for (_, dtype), shape in zip(self.outputs, shapes)]
        try:
            self.enqueue(inputs, outs, self.current_stream() if self.cuda else None, not self.symbolic)
        except Exception as ex:
            # tensorc's device memory is its own, beside PyTorch's caching
            # allocator, which may hold the free memory as cached blocks:
            # handed back, the run is tried once more (as PyTorch's
            # allocator frees its cache and retries before it fails).
            if not self.cuda or "out of device memory" not in str(ex):
                raise
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
            self.enqueue(inputs, outs, self.current_stream(), not self.symbolic)
        if not self.cuda:
            self.session.synchronize()
        return outs


def _compile_graph(exe, argv, version, folder, graph, part):
    """The artifact of a graph file's dict, compiled with `argv` into the
    cache `folder` (keyed by its content, written atomically); its path."""
    text = json.dumps(graph, sort_keys=True)
    key = hashlib.sha256("\0".join([text, " ".join(argv), version]).encode()).hexdigest()[:32]
    path = os.path.join(folder, f"{graph['name']}-{key}.{part}.tcx")
    if not _trusted_entries([path]):
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src = os.path.join(tmp, "graph.json")
            with open(src, "w") as f:
                f.write(text)
            _tool([exe, "compile", src, *argv, "-o", src + ".tcx"])
            os.replace(src + ".tcx", path)
        log.debug("tensorc.torch: compiled %s (%s) in %.2f s", graph["name"], part, time.perf_counter() - start)
    return path


def _drop_repeated_outputs(path):
    """The partition lists what the backward needs after the model's outputs,
    a model output it needs again (softmax's): one output is enough, the
    artifact would copy the tensor into a second (CompiledModule saves the
    model output itself). "h" and "h:0" are the same value (result 0 of a
    node with several, e.g. attention with its log-sum-exp): the first
    spelling stays."""
    with open(path) as f:
        g = json.load(f)
    first = {}
    for ref in g["outputs"]:
        first.setdefault(ref if ":" in ref else ref + ":0", ref)
    unique = list(first.values())
    if unique != g["outputs"]:
        g["outputs"] = unique
        with open(path, "w") as f:
            json.dump(g, f)


# A backward variant's input for a cotangent passed as one value (a
# rank-0 tensor the variant broadcasts): "cotangent_y" becomes
# "cotangent_y__uniform".
UNIFORM_SUFFIX = "__uniform"


def uniform_cotangent_graph(graph, names):
    """The backward graph (a graph file's dict) with each cotangent input in
    `names` taken as a rank-0 tensor broadcast to its shape: the artifact
    then reads one value where PyTorch would materialize a whole tensor of
    it (a loss sum()'s gradient is ones broadcast). None where a shape is
    symbolic or a name is taken."""
    g = json.loads(json.dumps(graph))
    taken = {i["name"] for i in g["inputs"]} | {n["name"] for n in g["nodes"]}
    broadcasts = []
    for inp in g["inputs"]:
        if inp["name"] not in names:
            continue
        shape = inp["shape"]
        if not all(isinstance(d, int) for d in shape) or inp["name"] + UNIFORM_SUFFIX in taken:
            return None
        broadcasts.append({"name": inp["name"], "op": "broadcast_to", "args": [inp["name"] + UNIFORM_SUFFIX],
                           "attrs": {"shape": shape}})
        inp["name"], inp["shape"] = inp["name"] + UNIFORM_SUFFIX, []
    g["nodes"] = broadcasts + g["nodes"]
    return g


class _Step(torch.autograd.Function):
    """Forward and backward artifacts as one differentiable call."""

    @staticmethod
    def forward(ctx, module, *flat):
        args = {n: t.detach() for n, t in zip(module.input_names, flat)}
        outs = module.run_forward(args)
        ctx.module = module
        # An output the loss does not use gets None, not a tensor of zeros.
        ctx.set_materialize_grads(False)
        ctx.output_shapes = {n: outs[n].shape for n in module.outputs}
        ctx.device = next(iter(outs.values())).device
        saved = [outs[n] for n in module.saved_names]
        primals = [args[n] for n in module.backward_primals]
        ctx.save_for_backward(*saved, *primals)
        # Running statistics and outputs that depend on no differentiated input.
        constant = {ref for _, ref in module.state} | module.non_differentiable
        ctx.mark_non_differentiable(*[outs[n] for n in module.outputs
                                      if not outs[n].is_floating_point() or n in constant])
        return tuple(outs[n] for n in module.outputs)

    @staticmethod
    def backward(ctx, *grads):
        module = ctx.module
        tensors = ctx.saved_tensors
        k = len(module.saved_names)
        values = dict(zip(module.saved_inputs, tensors[:k]))
        values.update(zip(module.backward_primals, tensors[k:]))
        # An output "bn:0" (a multi-result op's first result) has the cotangent "cotangent_bn".
        out_grads = {n[:-2] if n.endswith(":0") else n: g for n, g in zip(module.outputs, grads)}
        shapes = {n[:-2] if n.endswith(":0") else n: s for n, s in ctx.output_shapes.items()}
        args, uniform = {}, {}
        for info in module.backward_exe.inputs:
            name = info.name
            if name.startswith("cotangent_") and name not in values:
                g = out_grads[name[len("cotangent_"):]]
                if g is None:  # the output took no part in the loss: zero
                    uniform[name] = torch.zeros((), dtype=TORCH_DTYPES[info.dtype], device=ctx.device)
                elif g.numel() > 1 and not any(g.stride()):
                    # One value broadcast (a sum()'s gradient): its
                    # element, not a materialized tensor.
                    uniform[name] = g.detach().as_strided((), ())
                else:
                    args[name] = g.detach().contiguous()
            else:
                args[name] = values[name].detach()
        run = module.backward_with_uniform(frozenset(uniform)) if uniform else module.run_backward
        if run is None:  # no such variant: the values broadcast to whole tensors
            run = module.run_backward
            args.update({n: g.expand(shapes[n[len("cotangent_"):]]).contiguous() for n, g in uniform.items()})
        else:
            args.update({n + UNIFORM_SUFFIX: g for n, g in uniform.items()})
        # Gradients by position (the backward's outputs are the --wrt
        # inputs' gradients in order): two gradients that are one value
        # (both operands of an add) share one name in the artifact, so a
        # lookup by name would lose one.
        grads = run.run_list([args[n] for n in run.input_names])
        by_input = dict(zip(module.wrt, grads))
        return (None,) + tuple(by_input.get(n) for n in module.input_names)


class CompiledModule:
    """Calls the compiled artifact with the module's current parameters and
    buffers (so in-place weight updates are seen) and the call's inputs,
    which must have the example inputs' dtypes and shapes."""

    def __init__(self, model, sources, outputs, single, scalars, artifact, cache_hit, executables, symbolic=False,
                 cuda_graphs=None):
        self.model, self.sources, self.single, self.scalars = model, sources, single, scalars
        self.artifact, self.cache_hit = artifact, cache_hit
        self.input_names = list(sources)
        self.outputs = outputs
        self._named = dict(list(model.named_parameters()) + list(model.named_buffers()))
        self.dynamic, self.specialize, self.specialized = [], None, {}
        self.state, self.counters = [], []  # set by compile(): buffers a call updates
        self.forward_exe = executables[0]
        self.forward_session = self.forward_exe.session()
        self.cuda_graphs = cuda_graphs
        self.run_forward = _Runner(self.forward_session, symbolic, cuda_graphs)
        # Each model output's position among the artifact's outputs (None
        # where the executable's inputs or outputs are not the module's own).
        names = [name for name, _ in self.run_forward.outputs]
        self._output_positions = [names.index(n) for n in outputs] \
            if all(n in names for n in outputs) and self.run_forward.input_names == self.input_names else None
        self.training = len(executables) > 1
        self.wrt = []  # set by compile(): the inputs the backward differentiates, in its output order
        self.non_differentiable = set()  # outputs computed from no input in wrt
        # Set by compile(): the backward's graph file and a compile of a
        # variant graph (backward_with_uniform).
        self.backward_graph, self.compile_variant = None, None
        self._uniform_runners, self._uniform_executables = {}, []
        if self.training:
            self.backward_exe = executables[1]
            self.backward_session = self.backward_exe.session()
            self.run_backward = _Runner(self.backward_session, symbolic, cuda_graphs)
            # Saved for the backward: the forward's outputs the backward reads
            # (a model output it needs is not a second output: compile()
            # drops such duplicates, which the artifact would copy). The
            # backward names a saved result "bn:0" of a multi-result op "bn_0"
            # (and a model output "bn", its result 0, is that value too).
            backward_inputs = {i.name for i in self.backward_exe.inputs}
            fwd_outputs = list(dict.fromkeys(o.name for o in self.forward_exe.outputs))

            def saved_input(name):
                if name.startswith("cotangent_"):
                    return None
                if name.replace(":", "_") in backward_inputs:
                    return name.replace(":", "_")
                return name + "_0" if ":" not in name and name + "_0" in backward_inputs else None
            self.saved_names = [n for n in fwd_outputs if saved_input(n)]
            self.saved_inputs = [saved_input(n) for n in self.saved_names]
            self.backward_primals = [i.name for i in self.backward_exe.inputs
                                     if i.name in sources and i.name not in self.saved_inputs]

    def backward_with_uniform(self, names):
        """A runner of the backward variant taking the cotangents `names` as
        one value each (uniform_cotangent_graph), compiled the first time a
        backward sees them so (cached like every artifact); None where there
        is none (no backward graph kept, symbolic shapes, the compile
        failed: the caller materializes the tensors, as before)."""
        if names in self._uniform_runners:
            return self._uniform_runners[names]
        run = None
        graph = self._load_backward_graph() if self.compile_variant else None
        variant = uniform_cotangent_graph(graph, names) if graph else None
        if variant is not None:
            try:
                path = self.compile_variant(variant, "backward-uniform")
                exe = tensorc.Executable.load(path)
                run = _Runner(exe.session(), False, self.cuda_graphs)
                self._uniform_executables.append(exe)
            except (RuntimeError, tensorc.Error) as ex:
                log.warning("tensorc.torch: no backward for uniform cotangents %s: %s", sorted(names), ex)
        self._uniform_runners[names] = run
        return run

    def _load_backward_graph(self):
        try:
            with open(self.backward_graph) as f:
                return json.load(f)
        except (OSError, ValueError, TypeError):
            return None

    def _flat_inputs(self, inputs):
        flat = []
        for name, (kind, key) in self.sources.items():
            if kind == "seed":  # training-mode dropout: a fresh mask per call, from torch's generator
                flat.append(torch.randint(0, 2**62, (), dtype=torch.int64))
            else:
                flat.append(inputs[key] if kind == "input" else self._named[key])
        return flat

    def _update_state(self, result, inputs):
        """Writes back what a training-mode call updated (batch norm's
        running statistics: buffers, or the call's inputs in a Dynamo
        graph); returns the model's own outputs."""
        if not self.state:
            return result
        own = len(result) - len(self.state)
        with torch.no_grad():
            for (name, _), value in zip(self.state, result[own:]):
                kind, key = self.sources[name]
                target = inputs[key] if kind == "input" else self._named[key]
                target.copy_(value.reshape(target.shape))
            for qualname in self.counters:
                self._named[qualname].add_(1)
        return result[:own]

    def __call__(self, *inputs):
        if self.dynamic and min(symbol_sizes(inputs, self.dynamic).values()) < MIN_SIZE:
            key = tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in inputs)
            if key not in self.specialized:
                self.specialized[key] = self.specialize(inputs)
            return self.specialized[key](*inputs)
        flat = self._flat_inputs(inputs)
        if self.training and torch.is_grad_enabled():
            result = _Step.apply(self, *flat)
        elif self._output_positions is not None:
            # Inputs that require grad are read as they are (no detach()).
            outs = self.run_forward.run_list(flat)
            result = tuple(outs[i] for i in self._output_positions)
        else:
            out = self.run_forward(dict(zip(self.input_names, flat)))
            result = tuple(out[n] for n in self.outputs)
        result = self._update_state(result, inputs)
        # Scalars travel as [1] (so their gradient is a cotangent like any other).
        result = tuple(r.reshape(()) if i in self.scalars else r for i, r in enumerate(result))
        return result[0] if self.single else result


def _side_by_side(fn, items):
    """fn over items on threads (each waits on a process or a ctypes call
    that releases the GIL); the results in order; the first error raised."""
    if len(items) < 2:
        return [fn(i) for i in items]
    with concurrent.futures.ThreadPoolExecutor(len(items)) as pool:
        return list(pool.map(fn, items))


def load_all(artifacts):
    """Executables of `artifacts`, loaded side by side: a CUDA load compiles
    its kernels (NVRTC), a training partition's forward and backward at once
    (one at a time with TENSORC_PARTITION_JOBS=1)."""
    def load(path):
        start = time.perf_counter()
        executable = tensorc.Executable.load(path)
        # Where a first call's time goes (a CUDA load is mostly NVRTC).
        log.debug("tensorc.torch: loaded %s in %.2f s", os.path.basename(path), time.perf_counter() - start)
        return executable
    if os.environ.get("TENSORC_PARTITION_JOBS") == "1":
        return [load(a) for a in artifacts]
    return _side_by_side(load, artifacts)


class _Built:
    """Artifacts of one graph: [model] or [forward, backward]."""

    def __init__(self, artifacts, cache_hit, backward_graph, compile_variant):
        self.artifacts, self.cache_hit = artifacts, cache_hit
        self.backward_graph, self.compile_variant = backward_graph, compile_variant


def build_artifacts(graph, target="cpu", mode=None, options=(), grad_argv=(), cache_dir=None, tensorc_path=None):
    """Compiles a graph file's dict (with `grad_argv`, `--wrt ... --of ...`:
    its forward and backward, tensorc's autodiff and partition) into the
    artifact cache, keyed by the graph's content, the options and the
    compiler's version; loads nothing."""
    exe = _compiler(tensorc_path)
    argv = ["--target", target] + (["--mode", mode] if mode else []) + list(options)
    train = bool(grad_argv)
    text = json.dumps(graph, sort_keys=True)
    version = _compiler_identity(exe, target)
    key = hashlib.sha256("\0".join([text, " ".join(argv), " ".join(grad_argv), version]).encode()).hexdigest()[:32]
    folder = _cache_dir(cache_dir)
    parts = ["forward", "backward"] if train else ["model"]
    artifacts = [os.path.join(folder, f"{graph['name']}-{key}.{p}.tcx") for p in parts]
    # The backward's graph file, kept for its variants (backward_with_uniform).
    backward_graph = os.path.join(folder, f"{graph['name']}-{key}.backward.json") if train else None
    cache_hit = _trusted_entries(artifacts)
    if cache_hit:
        log.debug("tensorc.torch: %s from the cache (%s)", graph["name"], artifacts[0])
    else:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src = os.path.join(tmp, "graph.json")
            with open(src, "w") as f:
                f.write(text)
            if train:
                # One process: the joint graph, its min-cut split, the
                # forward's and the backward's artifacts, the backward's
                # graph file (for its variants).
                prefix = os.path.join(tmp, "parts")
                _tool([exe, "compile", src, *argv, "--forward-backward", *grad_argv, "-o", prefix])
                built = [prefix + ".forward.tcx", prefix + ".backward.tcx"]
                os.replace(prefix + ".backward.json", backward_graph)  # atomic: all of a file or none
            else:
                built = [src + ".tcx"]
                _tool([exe, "compile", src, *argv, "-o", built[0]])
            # What was compiled, beside its artifacts: `tensorc compile` (and
            # `tensorc grad` with the same --wrt/--of) of it reproduces them.
            os.replace(src, os.path.join(folder, f"{graph['name']}-{key}.graph.json"))
            for b, a in zip(built, artifacts):
                os.replace(b, a)
        log.debug("tensorc.torch: compiled %s in %.2f s (%s)", graph["name"], time.perf_counter() - start,
                  artifacts[0])
    return _Built(artifacts, cache_hit, backward_graph,
                  lambda variant, part: _compile_graph(exe, argv, version, folder, variant, part))


def compile(model, example_inputs, target="cpu", mode=None, train=False, cache_dir=None, tensorc_path=None,
            options=(), dynamic=None, cuda_graphs="repeated", frontend="fx", strict=False, fallback_random=False):
    """Exports `model` on `example_inputs`, compiles it for `target` ("cpu"
    or "cuda"; `mode`: "reduce-overhead" for CUDA graphs) and returns a
    CompiledModule. train=True also compiles the backward: gradients flow
    to every parameter that requires grad and to inputs that do.
    `dynamic`: dims whose size may change between calls, symbolic in the
    one artifact: True (dim 0 of every input, one size), or {input
    position: {dim: symbol}} (_dynamic.py); other dims are fixed by the
    example inputs. Artifacts are cached by content in `cache_dir`
    (default $XDG_CACHE_HOME/tensorc/artifacts). `cuda_graphs` (cuda):
    "repeated" (a call whose tensors' addresses a recent call had replays
    its launches as one CUDA graph: a training loop's steps from the
    second on, as PyTorch's caching allocator hands out the same blocks),
    "off", or "always" (what mode="reduce-overhead" sets).
    `frontend`: "aten" captures the module at the ATen level with fake
    tensors (tensorc.torch._aten: autocast and in-place updates as PyTorch
    runs them, ops tensorc does not lower run in PyTorch with one warning,
    or an error with `strict`); the gradient then follows grad mode (no
    `train`); `dynamic` as above, probed over the captured program. "fx" (for now the default) maps torch
    functions and modules by name (docs/pytorch.md).
    `fallback_random` (aten): random ops (dropout) run in PyTorch, drawing
    from its generator as eager does (Inductor's fallback_random): a run
    after torch.manual_seed reproduces eager's masks, for accuracy checks."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if frontend == "aten":
        from ._aten import compile_program
        return compile_program(model, tuple(example_inputs),
                               {"target": target, "mode": mode, "cache_dir": cache_dir, "tensorc_path": tensorc_path,
                                "options": tuple(options), "cuda_graphs": cuda_graphs,
                                "fallback_random": fallback_random}, strict=strict, dynamic=dynamic)
    if frontend != "fx":
        raise ValueError(f"tensorc.torch.compile: unknown frontend '{frontend}' (aten, fx)")
    if fallback_random:
        raise ValueError("tensorc.torch.compile: fallback_random needs frontend='aten'")
    spec = dynamic_dims(example_inputs, dynamic)

    def export_at(inputs):
        gm, values = _prepare(model, inputs)
        g = _Exporter(gm, values, type(model).__name__).run()
        single = not isinstance(values[[n for n in gm.graph.nodes if n.op == "output"][0]], (tuple, list))
        scalars = set()
        if train:
            for i, (name, v) in enumerate(zip(list(g.outputs), g.output_values)):
                if v.dim() == 0:
                    g.outputs[i] = g.add("reshape", [name], {"shape": [1]}, name + "_1")
                    scalars.add(i)
        return g, single, scalars

    g, single, scalars = export_at(example_inputs)
    graph = g.json()
    if spec:
        graph = symbolize(lambda inputs: export_at(inputs)[0].json(), example_inputs, spec)
    grad_argv = []
    if train:
        wrt = [n for n, (kind, key) in g.sources.items()
               if (kind == "param" and g.inputs[list(g.sources).index(n)].get("trainable")) or
               (kind == "input" and example_inputs[key].requires_grad)]
        updated = {ref for _, ref in g.state}  # running statistics: no gradient
        of = [n for n, v in zip(g.outputs, g.output_values) if v.is_floating_point() and n not in updated]
        if not wrt or not of:
            raise RuntimeError("tensorc.torch.compile(train=True): nothing to differentiate "
                               "(no parameter or input requires grad, or no float output)")
        grad_argv = ["--wrt", *wrt, "--of", *of]
    built = build_artifacts(graph, target, mode, options, grad_argv, cache_dir, tensorc_path)
    artifacts, cache_hit, backward_graph = built.artifacts, built.cache_hit, built.backward_graph
    executables = [tensorc.Executable.load(a) for a in artifacts]
    graphs = "always" if mode == "reduce-overhead" else cuda_graphs
    module = CompiledModule(model, dict(g.sources), graph["outputs"], single, scalars, artifacts[0], cache_hit,
                            executables, symbolic=bool(spec), cuda_graphs=graphs)
    module.state, module.counters = list(g.state), list(g.counters)
    if train:
        module.wrt = list(wrt)
    if train and not spec:
        module.backward_graph = backward_graph
        module.compile_variant = built.compile_variant
    if spec:
        # Sizes below the traced minimum: a static artifact for that call's shapes.
        module.dynamic = spec
        module.specialize = lambda inputs: compile(model, inputs, target, mode, train, cache_dir, tensorc_path,
                                                   options, cuda_graphs=cuda_graphs)
    return module
