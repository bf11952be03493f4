#!/usr/bin/env python3
"""Where NVRTC spends its time on a CUDA artifact's kernels (issue 57), on
any machine with the CUDA toolkit (no GPU needed):

    python3 bench/compile/nvrtc_profile.py model.tcx [--arch sm_90] [--top 20]

Compiles the artifact's CUDA source (Artifact::code) in one translation unit
with NVRTC's `--fdevice-time-trace` and prints the phases (front end, NVVM
optimizer, code generation; the rest of the wall time is ptxas) and the
functions NVVM spent longest on, each kernel's with its variants summed
under the kernel's name. `--source FILE` writes the source out as well.
How the runtime splits it into parallel parts is runtime/cuda/
TranslationUnits.h; a part's wall time is its longest kernels' plus about
0.2 s of headers."""
import argparse
import ctypes
import json
import os
import re
import struct
import sys
import tempfile
import time

# The artifact's header (runtime/artifact/Artifact.cpp, 48 bytes): magic,
# version and header size (16 bytes), the manifest, code and data sizes,
# then a checksum; the manifest and the code follow it.
HEADER = 48


def artifact_code(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < HEADER:
        sys.exit(f"{path}: not a tensorc artifact (too short)")
    manifest, code, _ = struct.unpack("<QQQ", blob[16:40])
    if HEADER + manifest + code > len(blob):
        sys.exit(f"{path}: not a tensorc artifact (sizes past its end)")
    target = json.loads(blob[HEADER:HEADER + manifest]).get("target", {})
    if target.get("kind") not in (None, "cuda"):
        sys.exit(f"{path}: a {target.get('kind')} artifact, not a CUDA one")
    return blob[HEADER + manifest:HEADER + manifest + code]


def nvrtc():
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for name in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"):
        try:
            return ctypes.CDLL(os.path.join(cuda, "lib64", name)), cuda
        except OSError:
            continue
    sys.exit(f"NVRTC not found under {cuda}/lib64 (set CUDA_HOME)")


def compile_traced(source, arch):
    lib, cuda = nvrtc()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source, b"artifact.cu", 0, None, None) != 0:
        sys.exit("nvrtcCreateProgram failed")
    trace = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    options = [f"--gpu-architecture={arch}".encode(), f"-I{cuda}/include".encode(), b"--std=c++17",
               f"--fdevice-time-trace={trace}".encode()]
    start = time.perf_counter()
    rc = lib.nvrtcCompileProgram(prog, len(options), (ctypes.c_char_p * len(options))(*options))
    wall = time.perf_counter() - start
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit(f"NVRTC failed ({rc}):\n{log.value.decode(errors='replace')[-3000:]}")
    # NVRTC appends ".json" to the name it is given.
    path = trace + ".json" if os.path.exists(trace + ".json") else trace
    with open(path) as f:
        events = json.load(f)
    for p in (trace, trace + ".json"):
        if os.path.exists(p):
            os.unlink(p)
    return wall, events.get("traceEvents", events) if isinstance(events, dict) else events


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifact")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--source", help="also write the CUDA source here")
    args = ap.parse_args()
    source = artifact_code(args.artifact)
    if args.source:
        with open(args.source, "wb") as f:
            f.write(source)
    kernels = source.count(b'extern "C" __global__')
    wall, events = compile_traced(source, args.arch)
    phases, functions = {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        phases[e["name"]] = phases.get(e["name"], 0) + e.get("dur", 0)
        if e["name"] == "OptFunction":
            name = e.get("args", {}).get("detail", "?")
            # A kernel's variants (_b256_i4, _chain_b64_r1c, ...) under its name.
            name = re.sub(r"_b\d+(_[a-z]\d+)*c?$", "", name)
            functions[name] = functions.get(name, 0) + e["dur"]
    print(f"{args.artifact}: {len(source) / 1e6:.2f} MB of CUDA, {kernels} kernels, NVRTC {wall:.1f} s for {args.arch}")
    for phase in ("CUDA C++ Front-End", "NVVM Optimizer", "NVVM CodeGen"):
        print(f"  {phase:20s} {phases.get(phase, 0) / 1e6:7.1f} s")
    print(f"  {'ptxas and the rest':20s} {max(0.0, wall - phases.get('LibNVVM', 0) / 1e6 - phases.get('CUDA C++ Front-End', 0) / 1e6):7.1f} s")
    print(f"NVVM's longest functions (variants summed):")
    for name, us in sorted(functions.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {us / 1e6:7.2f} s  {name}")


if __name__ == "__main__":
    main()
