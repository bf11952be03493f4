"""tensorc.torch.compile: a module compiled by tensorc, called like the
module (inference). The graph is exported (docs/pytorch.md), compiled by
the `tensorc` compiler ($TENSORC, else on PATH) and cached by the graph's
content, the target and the options, so a second process loads the
artifact without compiling."""
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time

import torch

import tensorc

from ._export import _Exporter, _prepare

log = logging.getLogger("tensorc.torch")


def _cache_dir(cache_dir):
    if cache_dir:
        return cache_dir
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tensorc", "artifacts")


def _compiler(path):
    exe = path or os.environ.get("TENSORC") or shutil.which("tensorc")
    if not exe:
        raise RuntimeError("tensorc.torch.compile: no tensorc compiler: set $TENSORC or put tensorc on PATH")
    return exe


def _version(exe):
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return r.stdout.strip()


class CompiledModule:
    """Calls the compiled artifact with the module's current parameters and
    buffers (so in-place weight updates are seen) and the call's inputs,
    which must have the example inputs' dtypes and shapes."""

    def __init__(self, model, executable, sources, outputs, single, artifact, cache_hit):
        self.model, self.executable = model, executable
        self.sources, self.outputs, self.single = sources, outputs, single
        self.artifact, self.cache_hit = artifact, cache_hit
        self.session = executable.session()
        self._named = {}
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            self._named[name] = p

    def __call__(self, *inputs):
        args = {}
        for name, (kind, key) in self.sources.items():
            t = inputs[key] if kind == "input" else self._named[key]
            args[name] = t.detach()
        if self.executable.device[0] == "cuda":
            self.session.set_stream(torch.cuda.current_stream().cuda_stream)
        out = self.session.run(**args)
        result = tuple(torch.from_dlpack(out[name]) for name in self.outputs)
        return result[0] if self.single else result


def compile(model, example_inputs, target="cpu", mode=None, cache_dir=None, tensorc_path=None, options=()):
    """Exports `model` on `example_inputs`, compiles it for `target` ("cpu"
    or "cuda"; `mode`: "reduce-overhead" for CUDA graphs) and returns a
    CompiledModule. Artifacts are cached by content in `cache_dir`
    (default $XDG_CACHE_HOME/tensorc/artifacts)."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    gm, values = _prepare(model, example_inputs)
    g = _Exporter(gm, values, type(model).__name__).run()
    graph = g.json()
    single = not isinstance(values[[n for n in gm.graph.nodes if n.op == "output"][0]], (tuple, list))
    exe = _compiler(tensorc_path)
    argv = ["--target", target] + (["--mode", mode] if mode else []) + list(options)
    text = json.dumps(graph, sort_keys=True)
    key = hashlib.sha256("\0".join([text, " ".join(argv), _version(exe)]).encode()).hexdigest()[:32]
    folder = _cache_dir(cache_dir)
    os.makedirs(folder, exist_ok=True)
    artifact = os.path.join(folder, f"{graph['name']}-{key}.tcx")
    cache_hit = os.path.exists(artifact)
    if cache_hit:
        log.debug("tensorc.torch: %s from the cache (%s)", graph["name"], artifact)
    else:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src = os.path.join(tmp, "graph.json")
            with open(src, "w") as f:
                f.write(text)
            out = os.path.join(tmp, "model.tcx")
            r = subprocess.run([exe, "compile", src, *argv, "-o", out], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"tensorc.torch.compile: {r.stderr.strip() or r.stdout.strip()}")
            os.replace(out, artifact)  # atomic: another process sees all of it or nothing
        log.debug("tensorc.torch: compiled %s in %.2f s (%s)", graph["name"], time.perf_counter() - start, artifact)
    executable = tensorc.Executable.load(artifact)
    return CompiledModule(model, executable, dict(g.sources), graph["outputs"], single, artifact, cache_hit)
