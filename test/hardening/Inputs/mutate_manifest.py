"""Random edits of a CPU artifact's manifest, each with its checksum
recomputed (as an attacker can): operands dropped or replaced, extents,
kernels and dtypes changed. Every run must end in a result or one error,
never a signal (SIGSEGV, heap corruption). Prints "N edits: K refused,
C crashed"; exits 1 on a crash.
usage: mutate_manifest.py TENSORC ARTIFACT COUNT WORKDIR"""
import json
import os
import random
import struct
import subprocess
import sys

tensorc, source, count, workdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
data = open(source, "rb").read()
magic, version, header, m_len, c_len, d_len, _ = struct.unpack("<8sIIQQQQ", data[:48])
base = json.loads(data[48:48 + m_len])
rest = data[48 + m_len:]
dtypes = ["f32", "f16", "bf16", "f64", "i64", "i32", "i1"]


def edit(m, r):
    loops = [s for s in m["steps"] if s["kind"] == "loop"]
    kind = r.randrange(6)
    if kind == 0 and loops:
        s = r.choice(loops)
        if s["operands"]:
            s["operands"].pop(r.randrange(len(s["operands"])))
    elif kind == 1 and loops:
        r.choice(loops)["extent"] = r.choice(["1", "4*B", "B", "1000000", "10"])
    elif kind == 2 and loops:
        r.choice(loops)["symbol"] = r.choice(loops)["symbol"]
    elif kind == 3:
        r.choice(m["values"])["dtype"] = r.choice(dtypes)
    elif kind == 4:
        t = r.choice(m["outputs"] + m["inputs"])
        t["dtype"] = m["values"][t["value"]]["dtype"] = r.choice(dtypes)
    elif kind == 5:
        s = r.choice(m["steps"])
        if s["operands"]:
            s["operands"][r.randrange(len(s["operands"]))] = r.randrange(len(m["values"]))


refused = crashed = 0
path = os.path.join(workdir, "mutated.tcx")
for seed in range(count):
    r = random.Random(seed)
    m = json.loads(json.dumps(base))
    for _ in range(r.randint(1, 3)):
        edit(m, r)
    manifest = json.dumps(m).encode()
    body = manifest + rest
    h = 0xcbf29ce484222325
    for byte in body:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    with open(path, "wb") as f:
        f.write(struct.pack("<8sIIQQQQ", magic, version, header, len(manifest), c_len, d_len, h) + body)
    run = subprocess.run([tensorc, "run", path, "--dim", "B=64"], capture_output=True, text=True, timeout=120)
    if run.returncode < 0 or run.returncode > 2:
        crashed += 1
        print(f"seed {seed}: exit {run.returncode}: {run.stderr[-300:]}")
    elif run.returncode != 0:
        refused += 1
print(f"{count} edits: {refused} refused, {crashed} crashed")
sys.exit(1 if crashed else 0)
