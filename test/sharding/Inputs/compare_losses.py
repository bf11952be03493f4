"""Two training logs (`step I loss L` lines) have the same steps and losses
within a relative 1e-4 (f32 sums in another order). Exits 1 otherwise."""
import sys


def losses(path):
    return [float(line.split()[3]) for line in open(path) if line.startswith("step ")]


a, b = losses(sys.argv[1]), losses(sys.argv[2])
if len(a) != len(b) or not a:
    print("steps differ: %d vs %d" % (len(a), len(b)))
    sys.exit(1)
worst = max(abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b))
print("%d steps, losses %.4g .. %.4g, worst relative difference %s" % (len(a), b[0], b[-1], "below 1e-4" if worst < 1e-4 else "%g" % worst))
sys.exit(0 if worst < 1e-4 else 1)
