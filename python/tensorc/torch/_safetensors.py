"""Writing and reading .safetensors files (the Hugging Face format) without
the `safetensors` package: an 8-byte little-endian header length, a JSON
header {name: {"dtype", "shape", "data_offsets"}}, then the raw bytes. The
runtime reads these files itself (tc_weights_open, Session.bind_weights)."""
import json
import os
import struct
import tempfile

import torch

_NAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}
_DTYPES = {v: k for k, v in _NAMES.items()}
# Same-size integer views that numpy can serialize (numpy has no bfloat16).
_RAW = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
        torch.bfloat16: torch.int16, torch.int64: torch.int64, torch.int32: torch.int32,
        torch.bool: torch.uint8}


def _bytes(t):
    t = t.detach().to("cpu").contiguous()
    return t.view(_RAW[t.dtype]).numpy().tobytes() if t.numel() else b""


def save_file(tensors, path, metadata=None):
    """Writes {name: tensor} to `path` atomically (each tensor 8-byte aligned)."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        if t.dtype not in _NAMES:
            raise TypeError(f"tensorc: safetensors: tensor '{name}' has unsupported dtype {t.dtype}")
        pad = (8 - offset % 8) % 8
        if pad:
            chunks.append(b"\0" * pad)
            offset += pad
        data = _bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".safetensors")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for c in chunks:
                f.write(c)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_file(path):
    """{name: tensor} of a .safetensors file (for tests and tools)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES[e["dtype"]]
        begin, end = e["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        t = torch.frombuffer(raw, dtype=_RAW[dtype]) if raw else torch.empty(0, dtype=_RAW[dtype])
        out[name] = t.view(dtype).reshape(e["shape"])
    return out
