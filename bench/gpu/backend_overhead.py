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
        from tensorc._lib import lib
        handle = run.session._handle
        prepared = run.session.prepare(x, outputs=[out])
        import tensorc
        plain = tensorc._ReusingEnqueue(run.session)
        plain.fast = None  # the ctypes path, beside the extension's (_fast.c)
        rows = [("ctypes call doing nothing", lambda t: lib.tc_session_arena_bytes(handle)),
                ("prepared enqueue (runtime + ctypes)", lambda t: prepared()),
                ("CompiledModule(x)", lambda t: cm(t)),
                ("_Runner({name: x})", lambda t: run({run.input_names[0]: t})),
                ("reusing enqueue, fresh output", lambda t: run.enqueue([t], [torch.empty_like(t)])),
                ("reusing enqueue, same output", lambda t: run.enqueue([t], [out])),
                ("  the same through ctypes", lambda t: plain([t], [out])),
                ("torch.empty_like", lambda t: torch.empty_like(t)),
                ("set_stream", lambda t: run.session.set_stream(run.current_stream()))]
        for label, fn in rows:
            print(f"  graphs={graphs:8} {label:32} {per_call_us(fn, x, n):6.1f} us")


def interleaved(fns, x, n, rounds=7):
    """Per-call us of each fn: rounds alternate between them (a noisy host
    moves them alike), the best round of each (the least disturbed)."""
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            best[k] = min(best[k], per_call_us(fn, x, n))
    return best


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    x = torch.randn(16, device="cuda")
    with torch.no_grad():
        import tensorc._lib
        ours = torch.compile(lambda t: t + 1, backend="tensorc")
        ours(x)
        fast, tensorc._lib.fast = tensorc._lib.fast, None  # the next compile's runner: the ctypes path
        ctypes_only = torch.compile(lambda t: (t + 1), backend="tensorc")
        ctypes_only(x)
        tensorc._lib.fast = fast
        fns = {"eager": lambda t: t + 1,
               "Dynamo (backend=eager)": torch.compile(lambda t: t + 1, backend="eager"),
               "backend=inductor": torch.compile(lambda t: t + 1),
               "backend=tensorc": ours,
               "backend=tensorc, ctypes path": ctypes_only}
        times = interleaved(fns, x, n // 5)
        for k, us in times.items():
            print(f"per call: {k:30} {us:6.1f} us")
        dynamo = times["Dynamo (backend=eager)"]
        print(f"tensorc adds {times['backend=tensorc'] - dynamo:.1f} us to Dynamo's own "
              f"({times['backend=tensorc, ctypes path'] - dynamo:.1f} us through ctypes); "
              f"inductor adds {times['backend=inductor'] - dynamo:.1f} us")
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
