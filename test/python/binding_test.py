"""The Python binding (python/tensorc) on a cpu artifact, with NumPy arrays
through DLPack: results match `tensorc run` on the same inputs, outputs can
be written in place, errors are exceptions with the runtime's message.
Resident state: a training step's parameters and optimizer state set once,
stepped in the session, equal to feeding every X.next back by hand.
usage: binding_test.py MODEL.tcx WORKDIR TRAIN_STEP.tcx"""
import os
import subprocess
import sys

import numpy as np

import tensorc

model, work, train_step = sys.argv[1], sys.argv[2], sys.argv[3]
exe = tensorc.Executable.load(model)
assert [i.name for i in exe.inputs] == ["x", "labels", "w1", "b1", "w2", "b2"], exe.inputs
assert [(o.name, o.dtype) for o in exe.outputs] == [("logits", "f32"), ("loss", "f32")]
assert exe.device == ("cpu", 0)

rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
B = 5  # odd
inputs = {
    "x": rng.standard_normal((B, 784), dtype=np.float32),
    "labels": rng.integers(0, 10, B).astype(np.int64),
    "w1": rng.standard_normal((784, 128), dtype=np.float32) * 0.05,
    "b1": rng.standard_normal(128, dtype=np.float32),
    "w2": rng.standard_normal((128, 10), dtype=np.float32) * 0.1,
    "b2": rng.standard_normal(10, dtype=np.float32),
}
session = exe.session()

# Runtime-allocated outputs, by name; zero-copy into NumPy.
out = session.run(**inputs)
logits, loss = np.from_dlpack(out["logits"]), np.from_dlpack(out["loss"])
assert logits.shape == (B, 10) and loss.shape == ()

# The same inputs through the CLI (the runtime behind `tensorc run`).
args = []
for name, value in inputs.items():
    np.save(os.path.join(work, name + ".npy"), value)
    args += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
subprocess.run(["tensorc", "run", model, *args, "--output-dir", work], check=True,
               stdout=subprocess.DEVNULL)
assert np.array_equal(logits, np.load(os.path.join(work, "logits.npy")))
assert np.array_equal(loss, np.load(os.path.join(work, "loss.npy")))

# And by hand, in f64.
h = np.maximum(inputs["x"].astype(np.float64) @ inputs["w1"] + inputs["b1"], 0)
ref = h @ inputs["w2"] + inputs["b2"]
assert np.allclose(logits, ref, rtol=1e-4, atol=1e-4), np.abs(logits - ref).max()
lse = np.log(np.exp(ref - ref.max(1, keepdims=True)).sum(1)) + ref.max(1)
ref_loss = (lse - ref[np.arange(B), inputs["labels"]]).mean()
assert abs(float(loss) - ref_loss) < 1e-4 * max(1, abs(ref_loss)), (float(loss), ref_loss)

# Into caller-owned outputs (poisoned first), positional inputs.
mine = {"logits": np.full((B, 10), np.nan, np.float32), "loss": np.full((), np.nan, np.float32)}
assert session.run(*inputs.values(), outputs=mine) is mine
assert np.array_equal(mine["logits"], logits) and np.array_equal(mine["loss"], loss)

# Another batch size binds B again.
small = dict(inputs, x=inputs["x"][:2].copy(), labels=inputs["labels"][:2].copy())
assert np.from_dlpack(session.run(**small)["logits"]).shape == (2, 10)


def expect_error(fragment, f):
    try:
        f()
    except (tensorc.Error, TypeError) as e:
        assert fragment in str(e), f"{fragment!r} not in {str(e)!r}"
        return
    raise AssertionError(f"no error (expected {fragment!r})")


expect_error("input 'x': expected f32, got f64",
             lambda: session.run(**dict(inputs, x=inputs["x"].astype(np.float64))))
expect_error("not contiguous",
             lambda: session.run(**dict(inputs, w1=np.ascontiguousarray(inputs["w1"].T).T)))
expect_error("missing inputs: b2", lambda: session.run(**{k: v for k, v in inputs.items() if k != "b2"}))
expect_error("no input named nope", lambda: session.run(nope=1, **inputs))
expect_error("node \"loss\" (cross_entropy): a target is outside the classes [0, 10)",
             lambda: session.run(**dict(inputs, labels=np.array([0, 1, 2, 3, 10], np.int64))))
expect_error("cannot open artifact", lambda: tensorc.Executable.load(os.path.join(work, "none.tcx")))

# A runtime-owned Tensor exported twice, versioned and not, stays valid.
t = out["logits"]
cap = t.__dlpack__(max_version=(1, 0))
del cap
assert np.array_equal(np.from_dlpack(t), logits)
# Resident state: AdamW steps in the session vs by hand.
train = tensorc.Executable.load(train_step)
ts = train.session()
state_names = ts.state_names
params = ["w1", "b1", "w2", "b2"]
assert set(params + ["step"]) <= set(state_names), state_names
state = {n: inputs[n].copy() for n in params}
for n in params:
    state[n + ".exp_avg"] = np.zeros_like(inputs[n])
    state[n + ".exp_avg_sq"] = np.zeros_like(inputs[n])
state["step"] = np.zeros((), np.float32)
assert set(state) == set(state_names), (sorted(state), sorted(state_names))
for n, v in state.items():
    ts.set_state(n, v)
batches = [(rng.standard_normal((B, 784), dtype=np.float32), rng.integers(0, 10, B).astype(np.int64))
           for _ in range(3)]
losses = []
for x, labels in batches:
    got = {"loss": np.full((), np.nan, np.float32)}
    ts.step(x=x, labels=labels, outputs=got)
    ts.synchronize()
    losses.append(float(got["loss"]))
by_hand = dict(state)
manual = train.session()
for (x, labels), loss in zip(batches, losses):
    out = manual.run(x=x, labels=labels, **by_hand)
    assert float(np.from_dlpack(out["loss"])) == loss
    for n in state:
        by_hand[n] = np.from_dlpack(out[n + ".next"]).copy()
for n in state:
    current = np.empty_like(by_hand[n])
    ts.read_state(n, current)
    assert np.array_equal(current, by_hand[n]), n
expect_error("'x' is not state", lambda: ts.set_state("x", batches[0][0]))
expect_error("input 'labels' is neither given, bound nor state", lambda: ts.step(x=batches[0][0]))
# Autotuning through the binding: max-autotune fills the cache (same
# outputs as the heuristics), strict then loads from it; a bad mode is an error.
db = os.path.join(work, "tune.sqlite")
tuned = tensorc.Executable.load(model, runtime=tensorc.Runtime(threads=2, autotune="max-autotune", tune_db=db))
tuned_out = tuned.session().run(**inputs)
assert np.array_equal(np.from_dlpack(tuned_out["logits"]), logits)
strict = tensorc.Executable.load(model, runtime=tensorc.Runtime(threads=2, autotune="strict", tune_db=db))
assert np.array_equal(np.from_dlpack(strict.session().run(**inputs)["logits"]), logits)
expect_error("unknown autotune mode 'fast'", lambda: tensorc.Runtime(autotune="fast"))
print("python binding: ok")
