"""tensorc.shard_of / assemble (python/tensorc/sharding.py): the blocks by
their definition (devices row-major, a dim split over several axes with the
first listed outermost, as the compiler's shardOf), written out by hand for
a 2 x 3 mesh, round trips through assemble, and the errors; NumPy arrays, and
PyTorch tensors with --torch. test/sharding's MPI tests run train_spmd.py,
which feeds every rank its inputs through shard_of."""
import sys

import numpy as np

import tensorc

mesh = "data=2,model=3"
x = np.arange(6 * 12, dtype=np.float32).reshape(6, 12)

# Device r = data * 3 + model.
for r in range(6):
    data, model = divmod(r, 3)
    assert np.array_equal(tensorc.shard_of(x, "data,_", mesh, r), x[data * 3:(data + 1) * 3])
    assert np.array_equal(tensorc.shard_of(x, "_,model", mesh, r), x[:, model * 4:(model + 1) * 4])
    assert np.array_equal(tensorc.shard_of(x, "model,data", mesh, r),
                          x[model * 2:(model + 1) * 2, data * 6:(data + 1) * 6])
    # data+model: 6 blocks, data outermost; model+data: model outermost.
    assert np.array_equal(tensorc.shard_of(x, "data+model,_", mesh, r), x[r:r + 1])
    assert np.array_equal(tensorc.shard_of(x, "_,model+data", mesh, r),
                          x[:, (model * 2 + data) * 2:(model * 2 + data + 1) * 2])
    assert np.array_equal(tensorc.shard_of(x, "_,_", mesh, r), x)
    assert tensorc.shard_of(x, [["data"], []], mesh, r).flags["C_CONTIGUOUS"]
    assert tensorc.shard_of(x, "_,model", mesh, r).flags["C_CONTIGUOUS"]
s = np.float32(3)
scalar = tensorc.shard_of(np.array(s), "", mesh, 4)
assert scalar.shape == () and scalar == s, scalar

for dims in ["data,_", "_,model", "model,data", "data+model,_", "_,model+data", "_,_", "data,model"]:
    pieces = [tensorc.shard_of(x, dims, mesh, r) for r in range(6)]
    assert np.array_equal(tensorc.assemble(pieces, dims, mesh), x), dims

errors = [
    (lambda: tensorc.shard_of(x, "data", mesh, 0), "1 dim entries for a rank-2"),
    (lambda: tensorc.shard_of(x, "pipe,_", mesh, 0), "axis 'pipe' is not in mesh"),
    (lambda: tensorc.shard_of(x, "data,data", mesh, 0), "axis 'data' is used twice"),
    (lambda: tensorc.shard_of(x, "_,data+model", "data=5,model=1", 0), "dim 1 of size 12 does not split 5 ways"),
    (lambda: tensorc.shard_of(x, "data,_", mesh, 6), "rank 6 is not a device"),
    (lambda: tensorc.shard_of(x, "data,_", "data=two", 0), "is not AXIS=SIZE"),
    (lambda: tensorc.shard_of(x, "data,_", "data=2,data=2", 0), "distinct axes"),
    (lambda: tensorc.assemble([x] * 5, "_,_", mesh), "5 pieces for mesh"),
]
for call, message in errors:
    try:
        call()
    except ValueError as e:
        assert message in str(e), (message, str(e))
    else:
        raise AssertionError("no error: " + message)

if "--torch" in sys.argv:
    import torch
    t = torch.arange(6 * 12, dtype=torch.float32).reshape(6, 12)
    pieces = [tensorc.shard_of(t, "_,model+data", mesh, r) for r in range(6)]
    assert all(p.is_contiguous() for p in pieces)
    assert torch.equal(tensorc.assemble(pieces, "_,model+data", mesh), t)
    assert torch.equal(pieces[4], t[:, 6:8])  # data 1, model 1: block 1 * 2 + 1 = 3
print("python sharding: ok")
