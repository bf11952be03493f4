# PyTorch's SDPA backends (cuDNN, FlashAttention-2, memory-efficient) at
# attn_bf16_fb's shape: forward + backward of out.float().sum(), CUDA events,
# medians: the reference of issue 14's attention goal. `python3 sdpa_reference.py`
# on the GPU machine (PyTorch >= 2.3).
import statistics

import torch
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
q, k, v = (torch.randn(8, 12, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
def step():
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.float().sum().backward()
for name, b in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
    try:
        with sdpa_kernel([b]):
            for _ in range(5): step()
            ts = []
            for _ in range(30):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); step(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
        print(f"{name}: {statistics.median(ts):.3f} ms (fwd+bwd, median of 30)")
    except Exception as ex:
        print(name, "failed:", ex)
print(torch.cuda.get_device_name(), torch.__version__, "cudnn", torch.backends.cudnn.version())
