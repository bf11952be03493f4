#!/usr/bin/env python3
"""Per-call host overhead of torch.compile(backend="tensorc") on a one-op
graph (x + 1 on a 16-element CUDA tensor, so the GPU never waits): eager,
Dynamo with its "eager" backend (Dynamo's own guards and frame handling),
and tensorc; then where tensorc's calls spend their time (cProfile).

    TENSORC=... python3 backend_overhead.py [calls]
"""
import cProfile
import pstats
import sys
import time

import torch

import tensorc.torch  # noqa: F401 (registers the backend)


def per_call_us(fn, x, n):
    for _ in range(50):
        fn(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


class AddOne(torch.nn.Module):
    def forward(self, t):
        return t + 1


def layers(x, n):
    """The same one-op graph through each layer of the bridge, top down:
    what each layer adds (graphs off and repeated)."""
    import tensorc.torch as tt
    for graphs in ("repeated", "off"):
        cm = tt.compile(AddOne(), (x,), target="cuda", cuda_graphs=graphs)
        run = cm.run_forward
        out = torch.empty_like(x)
        rows = [("CompiledModule(x)", lambda t: cm(t)),
                ("_Runner({name: x})", lambda t: run({run.input_names[0]: t})),
                ("reusing enqueue, fresh output", lambda t: run.enqueue([t], [torch.empty_like(t)])),
                ("reusing enqueue, same output", lambda t: run.enqueue([t], [out])),
                ("torch.empty_like", lambda t: torch.empty_like(t)),
                ("set_stream", lambda t: run.session.set_stream(run.current_stream()))]
        for label, fn in rows:
            print(f"  graphs={graphs:8} {label:32} {per_call_us(fn, x, n):6.1f} us")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    x = torch.randn(16, device="cuda")
    with torch.no_grad():
        eager = per_call_us(lambda t: t + 1, x, n)
        dynamo = per_call_us(torch.compile(lambda t: t + 1, backend="eager"), x, n)
        ours = torch.compile(lambda t: t + 1, backend="tensorc")
        tc = per_call_us(ours, x, n)
        print(f"per call: eager {eager:.1f} us, Dynamo (backend=eager) {dynamo:.1f} us, "
              f"backend=tensorc {tc:.1f} us: tensorc adds {tc - dynamo:.1f} us to Dynamo's own")
        layers(x, n)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(n):
            ours(x)
        torch.cuda.synchronize()
        profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
