"""Compares two runs' per-device outputs (DIR/deviceD/NAME.npy): every file of
the reference exists in the other with the same shape and values within a
float32 tolerance. Prints one line per device and exits 1 on a difference."""
import os
import sys

import numpy as np

got_dir, want_dir, devices = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad = False
for d in range(devices):
    names = sorted(os.listdir(os.path.join(want_dir, "device%d" % d)))
    worst = 0.0
    for name in names:
        want = np.load(os.path.join(want_dir, "device%d" % d, name))
        got = np.load(os.path.join(got_dir, "device%d" % d, name))
        if got.shape != want.shape:
            print("device %d: %s has shape %s, expected %s" % (d, name, got.shape, want.shape))
            bad = True
            continue
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale if want.size else 0.0
        worst = max(worst, err)
        if err > 1e-4:
            print("device %d: %s differs by %g (relative to %g)" % (d, name, err, scale))
            bad = True
    print("device %d: %d outputs match" % (d, len(names)) if not bad else "device %d: mismatch" % d)
sys.exit(1 if bad else 0)
