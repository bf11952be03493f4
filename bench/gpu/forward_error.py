#!/usr/bin/env python3
"""The forward output's error of a GPT-2 block (workloads.Block, bf16,
8 x 1024 x 768) against an f64 step, per element: the max (relative to
the largest value), the mean signed error (a systematic bias shows here,
and in the relative error of the output's sum, as models.py's loss) and
the mean absolute error. MODE: eager, compile (torch.compile default),
backend (backend="tensorc"), tc (tensorc.torch.compile, inference),
tc_nograph (CUDA graphs off), tc_train (its training forward).

    TENSORC=.../tensorc PYTHONPATH=.../python TENSORC_RUNTIME_LIB=... \
        python3 forward_error.py MODE
"""
import copy, os, sys
import torch
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pytorch"))
import workloads as W
import tensorc.torch as tt

torch.manual_seed(1)
mode = sys.argv[1] if len(sys.argv) > 1 else "backend"
m = W.Block(768, 12).to(torch.bfloat16).cuda()
x = torch.randn(8, 1024, 768, device="cuda", dtype=torch.bfloat16)
ref = copy.deepcopy(m).double()(x.double())
if mode == "backend":
    f = torch.compile(m, backend="tensorc", dynamic=False)
elif mode == "compile":
    f = torch.compile(m)
elif mode.startswith("tc"):
    kw = {}
    if "nograph" in mode:
        kw["cuda_graphs"] = "off"
    f = tt.compile(m, (x,), target="cuda", tensorc_path=os.environ["TENSORC"], train="train" in mode, **kw)
else:
    f = m
with torch.no_grad() if mode in ("eager", "compile") else torch.enable_grad():
    for _ in range(3):
        out = f(x)
    torch.cuda.synchronize()
o = out.double()
e = o - ref
s = ref.abs().max().item()
print(f"{mode:22s} max {e.abs().max().item()/s:.3g} mean {e.mean().item():.3g} meanabs {e.abs().mean().item():.3g} "
      f"sum rel {(o.sum()-ref.sum()).abs().item()/abs(ref.sum().item()):.3g}", flush=True)
