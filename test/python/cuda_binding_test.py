"""The Python binding on a cuda artifact with PyTorch CUDA tensors (the GPU
bundle runs it: scripts/gpu-test.sh): device tensors used in place and host
tensors copied give the same results as PyTorch in f64; runtime-owned device
outputs export through DLPack; PyTorch's stream; clear errors for a host
pointer passed as a device one, a non-contiguous tensor, another device.
Resident training state on the GPU equals feeding X.next back by hand.
Tensors 4 bytes off a 16-byte boundary (views at an odd offset) take the
scalar paths of vectorized kernels, with the same results as aligned ones.
A session runs from another thread than the one that made it. Repeated
CUDA graphs replay runs on recent tensors with equal results.
usage: cuda_binding_test.py MLP.tcx TRAIN_STEP.tcx [VECTOR_ROWS.tcx [SIBLING_ROWS.tcx]]"""
import sys

import torch

import tensorc

exe = tensorc.Executable.load(sys.argv[1])
assert exe.device == ("cuda", 0), exe.device
B = 7
g = torch.Generator().manual_seed(0)
host = {"x": torch.randn(B, 784, generator=g), "labels": torch.randint(0, 10, (B,), generator=g),
        "w1": torch.randn(784, 128, generator=g) * 0.05, "b1": torch.randn(128, generator=g),
        "w2": torch.randn(128, 10, generator=g) * 0.1, "b2": torch.randn(10, generator=g)}
dev = {k: v.cuda() for k, v in host.items()}
h = torch.relu(host["x"].double() @ host["w1"].double() + host["b1"].double())
ref = h @ host["w2"].double() + host["b2"].double()
ref_loss = torch.nn.functional.cross_entropy(ref, host["labels"])

s = exe.session()
s.set_stream(torch.cuda.current_stream().cuda_stream)
# Device inputs in place, runtime-owned device outputs through DLPack.
out = s.run(**dev)
logits = torch.from_dlpack(out["logits"])
assert logits.is_cuda and logits.shape == (B, 10)
assert torch.allclose(logits.double().cpu(), ref, rtol=1e-4, atol=1e-4), (logits.double().cpu() - ref).abs().max()
assert abs(torch.from_dlpack(out["loss"]).item() - ref_loss.item()) < 1e-4
# Host inputs (copied) into caller-owned device outputs, and the reverse.
mine = {"logits": torch.full((B, 10), float("nan"), device="cuda"), "loss": torch.full((), float("nan"), device="cuda")}
s.run(**host, outputs=mine)
assert torch.equal(mine["logits"], logits)
back = {"logits": torch.full((B, 10), float("nan")), "loss": torch.full((), float("nan"))}
s.run(**dev, outputs=back)
assert torch.equal(back["logits"], logits.cpu())
# Enqueue many, synchronize once; the device time is reported.
step = s.prepare(outputs=mine, **dev)
for _ in range(10):
    step()
s.synchronize()
assert torch.equal(mine["logits"], logits) and s.last_device_ms > 0
# Another thread (PyTorch runs backward on its own): no CUDA context is
# current there until the runtime makes its own current.
import threading  # noqa: E402
from_thread = {}
def run_on_thread():
    try:
        on_thread = {"logits": torch.full((B, 10), float("nan"), device="cuda"),
                     "loss": torch.full((), float("nan"), device="cuda")}
        s.run(**dev, outputs=on_thread)
        s.synchronize()
        from_thread.update(on_thread)
    except Exception as e:  # reported on the main thread
        from_thread["error"] = e
worker = threading.Thread(target=run_on_thread)
worker.start()
worker.join()
assert "error" not in from_thread, from_thread.get("error")
assert torch.equal(from_thread["logits"], logits)

# Repeated CUDA graphs: a run on the tensors of a recent run replays a graph
# (captured at the second sighting), one on new tensors launches normally;
# the results are the same either way, and a replay reads the tensors'
# current contents.
rs = exe.session()
rs.set_stream(torch.cuda.current_stream().cuda_stream)
rs.set_cuda_graphs("repeated")
x = dev["x"].clone()
pairs = [{"logits": torch.empty(B, 10, device="cuda"), "loss": torch.empty((), device="cuda")} for _ in range(2)]
for i in range(6):
    o = pairs[i % 2]
    o["logits"].fill_(float("nan"))
    rs.run(**dict(dev, x=x), outputs=o)
    assert torch.equal(o["logits"], logits), i
x.mul_(2)  # same address, new contents: the replayed graph must see them
o = pairs[0]
rs.run(**dict(dev, x=x), outputs=o)
twice = torch.relu(2 * host["x"].double() @ host["w1"].double() + host["b1"].double()) @ host["w2"].double() + \
    host["b2"].double()
assert torch.allclose(o["logits"].double().cpu(), twice, rtol=1e-4, atol=1e-4)
fresh = {"logits": torch.empty(B, 10, device="cuda"), "loss": torch.empty((), device="cuda")}
rs.run(**dev, outputs=fresh)
assert torch.equal(fresh["logits"], logits)
try:
    rs.set_cuda_graphs("sometimes")
    raise AssertionError("accepted a bad CUDA graphs mode")
except ValueError as e:
    assert "expected one of" in str(e), e


def expect_error(fragment, f):
    try:
        f()
    except tensorc.Error as e:
        assert fragment in str(e), f"{fragment!r} not in {str(e)!r}"
        return
    raise AssertionError(f"no error (expected {fragment!r})")


import tensorc._dlpack as dl  # noqa: E402
lying = dl.Borrowed(host["x"])
lying.device_type = dl.KDL_CUDA
expect_error("is not memory of cuda:0", lambda: s.run(**dict(dev, x=lying)))
expect_error("not contiguous", lambda: s.run(**dict(dev, w1=dev["w1"].t().contiguous().t())))
expect_error("a target is outside the classes [0, 10)",
             lambda: s.run(**dict(dev, labels=torch.full((B,), 12, device="cuda"))))
train = tensorc.Executable.load(sys.argv[2])
ts = train.session()
ts.set_stream(torch.cuda.current_stream().cuda_stream)
state = {n: dev[n].clone() for n in ("w1", "b1", "w2", "b2")}
for n in list(state):
    state[n + ".exp_avg"] = torch.zeros_like(state[n])
    state[n + ".exp_avg_sq"] = torch.zeros_like(state[n])
state["step"] = torch.zeros((), device="cuda")
assert set(state) == set(ts.state_names), ts.state_names
for n, v in state.items():
    ts.set_state(n, v)
losses = []
for i in range(4):
    got = {"loss": torch.empty((), device="cuda")}
    ts.step(x=dev["x"] * (i + 1), labels=dev["labels"], outputs=got)
    ts.synchronize()
    losses.append(got["loss"].item())
manual = train.session()
by_hand = dict(state)
for i in range(4):
    out = manual.run(x=dev["x"] * (i + 1), labels=dev["labels"], **by_hand)
    assert torch.from_dlpack(out["loss"]).item() == losses[i], (i, losses)
    by_hand = {n: torch.from_dlpack(out[n + ".next"]).clone() for n in state}
for n in state:
    current = torch.empty_like(state[n])
    ts.read_state(n, current)
    assert torch.equal(current, by_hand[n]), n

def check_rows(path, want):
    """Runs the artifact at `path` (inputs x [rows, 256], a [256]) on inputs
    and outputs aligned and 4 bytes off; `want(x, a)` gives the f64 outputs."""
    session = tensorc.Executable.load(path).session()
    session.set_stream(torch.cuda.current_stream().cuda_stream)
    rows = 4099
    x = torch.randn(rows * 256 + 1, generator=g).cuda()
    a = torch.randn(257, generator=g).cuda()
    aligned = {"x": x[:-1].view(rows, 256), "a": a[:-1]}
    odd = {"x": torch.empty_like(x).copy_(x)[1:].view(rows, 256), "a": torch.empty_like(a).copy_(a)[1:]}
    odd["x"].copy_(aligned["x"])
    odd["a"].copy_(aligned["a"])
    assert odd["x"].data_ptr() % 16 == 4 and odd["a"].data_ptr() % 16 == 4
    expected = want(aligned["x"].double(), aligned["a"].double())
    for inputs in (aligned, odd):
        for offset in (0, 1):
            store = torch.full((len(expected), rows * 256 + 1), float("nan"), device="cuda")
            got = {n: store[k, offset:offset + rows * 256].view(rows, 256) for k, n in enumerate(expected)}
            session.run(**inputs, outputs=got)
            session.synchronize()
            for n, w in expected.items():
                assert torch.allclose(got[n].double(), w, rtol=1e-5, atol=1e-6), (path, n, offset, (got[n] - w).abs().max())


if len(sys.argv) > 3:
    # h = gelu(x * a), p = softmax(h) over 256-wide rows (test/gpu/Inputs/
    # vector_rows.json): elementwise kernels, a row reduction and a chain
    # kernel that read and write four elements at once where aligned.
    def rows_softmax(x, a):
        h = torch.nn.functional.gelu(x * a)
        return {"h": h, "p": torch.softmax(h, dim=-1)}
    check_rows(sys.argv[3], rows_softmax)
if len(sys.argv) > 4:
    # h = gelu(x * a), t = sigmoid(x * a) (test/gpu/Inputs/sibling_rows.json):
    # a chain of sibling elementwise nests, computed together per vector.
    def siblings(x, a):
        return {"h": torch.nn.functional.gelu(x * a), "t": torch.sigmoid(x * a)}
    check_rows(sys.argv[4], siblings)
print("cuda python binding: ok")
