"""tensorc's runtime from Python: load a compiled model (.tcx) and run it on
host or GPU tensors, zero-copy through DLPack. No compiled extension: the C
API (libtensorc_runtime.so) through ctypes, for any CPython 3.

    import tensorc, numpy as np
    exe = tensorc.Executable.load("mlp.tcx")
    session = exe.session()
    out = session.run(x=np.ones((8, 784), np.float32), labels=np.zeros(8, np.int64))
    logits = np.from_dlpack(out["logits"])

Inputs and outputs are anything with `__dlpack__` (NumPy arrays, PyTorch,
CuPy, JAX tensors), by name or in declaration order. A tensor on the
executable's device is used in place; a host tensor of a cuda executable is
copied. Outputs are returned as `tensorc.Tensor` (runtime-owned, with
`__dlpack__`) on the executable's device, or written into `outputs=`. See
docs/python.md."""
import ctypes
import os
import sys
import threading

from . import _dlpack
from . import _lib
from ._lib import lib, tc_runtime_options_t, tc_tensor_t
from .layout import from_head_blocked, head_blocked
from .sharding import assemble, launched_rank, parse_mesh, shard_of

__all__ = ["Error", "Runtime", "Executable", "Session", "Tensor", "Weights", "head_blocked", "from_head_blocked",
           "shard_of", "assemble", "parse_mesh", "launched_rank"]


class Error(RuntimeError):
    """A runtime error: its message is the runtime's (it names the file,
    input or node)."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code


def _check(status):
    if status:
        code = lib.tc_status_code(status)
        message = lib.tc_status_message(status).decode("utf-8", "replace")
        lib.tc_status_free(status)
        raise Error(message, code)


class Runtime:
    """Options shared by executables: kernel threads (cpu), the compiled-kernel
    cache directory (cuda)."""

    def __init__(self, threads=0, kernel_cache_dir=None, mode=None, autotune=None, tune_db=None):
        """mode: "default" or "reduce-overhead" (CUDA graphs); None: the
        artifact's own. autotune: "default", "max-autotune" or "strict";
        tune_db: the autotune cache's file (docs/autotune.md)."""
        options = tc_runtime_options_t()
        lib.tc_runtime_options_initialize(ctypes.byref(options))
        options.threads = threads
        if kernel_cache_dir is not None:
            options.kernel_cache_dir = str(kernel_cache_dir).encode()
        if mode is not None:
            options.mode = str(mode).encode()
        self._handle = ctypes.c_void_p()
        _check(lib.tc_runtime_create(ctypes.byref(options), ctypes.byref(self._handle)))
        if autotune is not None or tune_db is not None:
            _check(lib.tc_runtime_set_autotune(
                self._handle, None if autotune is None else str(autotune).encode(),
                None if tune_db is None else str(tune_db).encode()))

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.tc_runtime_release(self._handle)
            self._handle = None


_default_runtime = None
_default_runtime_lock = threading.Lock()  # loads may run on several threads


class TensorInfo:
    def __init__(self, name, element_type, rank):
        self.name, self.element_type, self.rank = name, element_type, rank

    @property
    def dtype(self):
        return _dlpack.NAMES[self.element_type]

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, rank {self.rank})"


class Executable:
    """A loaded artifact. Thread-safe; run it through sessions."""

    def __init__(self, handle, runtime):
        self._handle, self._runtime = handle, runtime
        ni, no = lib.tc_executable_input_count(handle), lib.tc_executable_output_count(handle)
        self.inputs = [self._info(lib.tc_executable_input_info, i) for i in range(ni)]
        self.outputs = [self._info(lib.tc_executable_output_info, i) for i in range(no)]
        kind, ordinal = ctypes.c_int32(), ctypes.c_int32()
        _check(lib.tc_executable_device(handle, ctypes.byref(kind), ctypes.byref(ordinal)))
        self.device = ("cuda", ordinal.value) if kind.value == _dlpack.KDL_CUDA else ("cpu", 0)

    @staticmethod
    def load(path, runtime=None):
        global _default_runtime
        if runtime is None:
            with _default_runtime_lock:
                _default_runtime = _default_runtime or Runtime()
            runtime = _default_runtime
        handle = ctypes.c_void_p()
        _check(lib.tc_executable_load(runtime._handle, str(path).encode(), ctypes.byref(handle)))
        return Executable(handle, runtime)

    def _info(self, fn, index):
        name, dtype, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_int32()
        _check(fn(self._handle, index, ctypes.byref(name), ctypes.byref(dtype), ctypes.byref(rank)))
        return TensorInfo(name.value.decode(), dtype.value, rank.value)

    def session(self):
        return Session(self)

    def empty(self, dtype, shape):
        """A runtime-owned tensor on this executable's device."""
        element_type = dtype if isinstance(dtype, int) else \
            {v: k for k, v in _dlpack.NAMES.items()}[dtype]
        return Tensor(self, element_type, list(shape))

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.tc_executable_release(self._handle)
            self._handle = None


class Tensor:
    """Runtime-owned memory on an executable's device, with `__dlpack__`
    (zero-copy into NumPy, PyTorch, ...)."""

    def __init__(self, executable, element_type, shape):
        size = _dlpack.ELEMENT_TYPES[element_type][1] // 8
        for d in shape:
            size *= d
        self._executable = executable
        self.element_type, self.shape = element_type, list(shape)
        self._data = ctypes.c_void_p()
        _check(lib.tc_executable_allocate(executable._handle, size, ctypes.byref(self._data)))

    @property
    def dtype(self):
        return _dlpack.NAMES[self.element_type]

    @property
    def data_ptr(self):
        return self._data.value or 0

    def __dlpack_device__(self):
        kind, ordinal = self._executable.device
        return (_dlpack.KDL_CUDA if kind == "cuda" else _dlpack.KDL_CPU, ordinal)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # Results are complete when run() returns: no stream to wait on.
        if copy:
            raise BufferError("tensorc.Tensor exports its memory without copies")
        device_type, device_id = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != (device_type, device_id):
            raise BufferError(f"tensorc.Tensor is on {self._executable.device}")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return _dlpack.export(self, self.data_ptr, self.element_type, self.shape, device_type,
                              device_id, versioned)

    def __repr__(self):
        return f"tensorc.Tensor({self.dtype}, {tuple(self.shape)}, {self._executable.device})"

    def __del__(self):
        if getattr(self, "_data", None) and self._data.value:
            lib.tc_executable_free(self._executable._handle, self._data)
            self._data = None


_TORCH_ELEMENT_TYPES = {}  # torch dtype -> element type, filled once torch is loaded


def _torch_struct(v, keep, read_only=False):
    """A tc_tensor_t read straight from a torch tensor's attributes (what its
    DLPack capsule would hold, without making and parsing one: a few
    microseconds per tensor per call of a compiled module), or None for
    anything else (and for what __dlpack__ refuses or marks specially:
    tensors requiring grad, conjugate/negative views, other layouts). An
    input (`read_only`) may require grad: the run only reads it, as a torch
    op under no_grad would (no detach() per call)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(v, torch.Tensor) or (v.requires_grad and not read_only) or \
            v.layout != torch.strided or v.is_conj() or v.is_neg() or v.device.type not in ("cpu", "cuda"):
        return None
    element_type = _torch_element_types(torch).get(v.dtype)
    if element_type is None:
        return None
    n = v.dim()
    shape = (ctypes.c_int64 * max(n, 1))(*v.shape)
    strides = (ctypes.c_int64 * max(n, 1))(*v.stride())
    keep.extend((v, shape, strides))
    cuda = v.device.type == "cuda"
    return tc_tensor_t(element_type, n, shape, ctypes.c_void_p(v.data_ptr()),
                       _dlpack.KDL_CUDA if cuda else _dlpack.KDL_CPU, (v.device.index or 0) if cuda else 0,
                       strides, 0)


def _torch_element_types(torch):
    if not _TORCH_ELEMENT_TYPES:
        _TORCH_ELEMENT_TYPES.update({torch.float64: 0, torch.float32: 1, torch.float16: 2, torch.bfloat16: 3,
                                     torch.int64: 4, torch.int32: 5, torch.bool: 6})
    return _TORCH_ELEMENT_TYPES


_fast_bound = False


def _fast_enqueue(session):
    """The extension's enqueue for `session` (tensorc/_fast.c: torch tensors
    described in C), or None without the extension or torch."""
    global _fast_bound
    torch = sys.modules.get("torch")
    if _lib.fast is None or torch is None:
        return None
    if not _fast_bound:
        _lib.fast.bind(*_lib.fast_functions, dict(_torch_element_types(torch)), Error)
        _fast_bound = True
    return _lib.fast.Enqueue(session._handle.value)


class _ReusingEnqueue:
    def __init__(self, session):
        self.session, self.signature = session, None
        self.fast = _fast_enqueue(session)

    def __call__(self, inputs, outputs, stream=None, fresh_outputs=False):
        # fresh_outputs: the outputs were allocated as the last call's (same
        # shapes, dtypes, device; contiguous): the extension reads only their
        # addresses.
        if self.fast is not None and self.fast(inputs, outputs, stream, fresh_outputs) is None:
            return  # queued (the extension returns NotImplemented for what it does not describe)
        session = self.session
        if stream is not None:
            session.set_stream(stream)
        tensors = list(inputs) + list(outputs)
        try:
            signature = [(t.shape, t.stride(), t.dtype, t.device) for t in tensors]
            exported = any(t.requires_grad for t in outputs)  # DLPack's (refused) path
        except AttributeError:  # not torch tensors
            signature, exported = None, True
        if signature is None or signature != self.signature:
            keep = []
            self.inputs, self.n = session._structs(list(inputs), keep, read_only=True)
            self.outputs, self.m = session._structs(list(outputs), keep)
            # The descriptions (shape and stride arrays), not the tensors: a
            # later call's tensors replace these.
            self.arrays = [k for k in keep if isinstance(k, ctypes.Array)]
            self.signature = signature
            if exported:
                self.signature = None  # described through DLPack: not reused
                session._keep = keep
        else:
            for i, t in enumerate(inputs):
                self.inputs[i].data = t.data_ptr()
            for i, t in enumerate(outputs):
                self.outputs[i].data = t.data_ptr()
        # The tensors themselves are not kept: the caller queues the run on
        # the stream torch allocates them for (tensorc.torch does), where the
        # caching allocator orders their reuse as for a torch op. A reference
        # held here would also make autograd copy each gradient this returns
        # (AccumulateGrad steals a gradient only where nothing else holds it).
        _check(lib.tc_session_enqueue(session._handle, self.outputs, self.m, self.inputs, self.n))


def _tensor_struct(b, keep):
    """A tc_tensor_t for a Borrowed DLPack tensor (arrays kept in `keep`)."""
    n = len(b.shape)
    shape = (ctypes.c_int64 * max(n, 1))(*b.shape)
    keep.append(shape)
    t = tc_tensor_t(b.element_type, n, shape, ctypes.c_void_p(b.data), b.device_type, b.device_id,
                    None, b.byte_offset)
    if b.strides is not None:
        strides = (ctypes.c_int64 * max(n, 1))(*b.strides)
        keep.append(strides)
        t.strides = strides
    return t


class Weights:
    """A .safetensors file, memory-mapped and checked (see docs/runtime.md)."""

    def __init__(self, path):
        self._handle = ctypes.c_void_p()
        _check(lib.tc_weights_open(os.fsencode(path), ctypes.byref(self._handle)))

    @property
    def names(self):
        out = []
        for i in range(lib.tc_weights_count(self._handle)):
            name = ctypes.c_char_p()
            _check(lib.tc_weights_tensor(self._handle, i, ctypes.byref(name), None))
            out.append(name.value.decode())
        return out

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.tc_weights_release(self._handle)
            self._handle = None


class Session:
    """One run's state (bound sizes, the memory arena); one thread at a time."""

    def __init__(self, executable):
        self.executable = executable
        self._handle = ctypes.c_void_p()
        _check(lib.tc_session_create(executable._handle, ctypes.byref(self._handle)))

    def _ordered(self, infos, args, kwargs, what):
        if args and kwargs:
            raise TypeError(f"tensorc: give the {what} by position or by name, not both")
        if kwargs:
            names = [i.name for i in infos]
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise TypeError(f"tensorc: no {what[:-1]} named {', '.join(unknown)} "
                                f"(the executable's {what}: {', '.join(names)})")
            missing = [n for n in names if n not in kwargs]
            if missing:
                raise TypeError(f"tensorc: missing {what}: {', '.join(missing)}")
            return [kwargs[n] for n in names]
        if len(args) != len(infos):
            raise TypeError(f"tensorc: expected {len(infos)} {what}, got {len(args)}")
        return list(args)

    def _structs(self, values, keep, stream=None, read_only=False):
        arr = (tc_tensor_t * max(len(values), 1))()
        for i, v in enumerate(values):
            t = _torch_struct(v, keep, read_only) if stream is None else None
            if t is None:
                b = v if isinstance(v, _dlpack.Borrowed) else _dlpack.Borrowed(v, stream)
                keep.append(b)
                t = _tensor_struct(b, keep)
            arr[i] = t
        return arr, len(values)

    def output_shapes(self, *args, **kwargs):
        keep = []
        inputs, n = self._structs(self._ordered(self.executable.inputs, args, kwargs, "inputs"), keep,
                                  read_only=True)
        shapes = []
        for i, info in enumerate(self.executable.outputs):
            out = (ctypes.c_int64 * max(info.rank, 1))()
            _check(lib.tc_session_output_shape(self._handle, inputs, n, i, out))
            shapes.append([out[k] for k in range(info.rank)])
        return shapes

    def run(self, *args, outputs=None, **kwargs):
        """Runs and waits. Returns {output name: Tensor} (or `outputs`)."""
        result = self.enqueue(*args, outputs=outputs, **kwargs)
        self.synchronize()
        return result

    def enqueue(self, *args, outputs=None, **kwargs):
        """Queues a run on the session's stream (see set_stream) and returns;
        the tensors must stay alive and unchanged until synchronize()."""
        values = self._ordered(self.executable.inputs, args, kwargs, "inputs")
        keep = []
        inputs, n = self._structs(values, keep)
        if outputs is None:
            shapes = self.output_shapes(*values)
            result = {info.name: Tensor(self.executable, info.element_type, shape)
                      for info, shape in zip(self.executable.outputs, shapes)}
            out_values = list(result.values())
        else:
            out_values = self._ordered(self.executable.outputs, (),
                                       outputs, "outputs") if isinstance(outputs, dict) else \
                self._ordered(self.executable.outputs, tuple(outputs), {}, "outputs")
            result = outputs
        outs, m = self._structs(out_values, keep)
        self._keep = keep  # until synchronize()
        _check(lib.tc_session_enqueue(self._handle, outs, m, inputs, n))
        return result

    def reusing_enqueue(self):
        """A callable(inputs, outputs, stream=None, fresh_outputs=False) that
        queues a run with torch tensors (lists in the executable's order;
        `stream`: as for set_stream, set first; fresh_outputs: outputs
        allocated as the last call's, whose addresses alone are read) like
        enqueue(), described by the fast-path
        extension where the build made it (_fast.c), else reusing their
        descriptions while every tensor's shape, strides, dtype and device
        stay those of the call before: then only the data pointers change
        (the per-call cost of tensorc.torch's compiled modules). Other
        tensors take enqueue's path. Unlike enqueue(), the torch tensors
        are not kept alive until synchronize(): queue on the stream torch
        allocated them for (set_stream(torch.cuda.current_stream()...)),
        or synchronize before they are freed."""
        return _ReusingEnqueue(self)

    def prepare(self, *args, outputs, **kwargs):
        """A run with fixed tensors, for loops: the returned callable queues
        it again without re-reading the tensors' DLPack descriptions (the
        tensors stay alive with it and must keep their memory)."""
        values = self._ordered(self.executable.inputs, args, kwargs, "inputs")
        out_values = self._ordered(self.executable.outputs, (), outputs, "outputs") \
            if isinstance(outputs, dict) else \
            self._ordered(self.executable.outputs, tuple(outputs), {}, "outputs")
        keep = []
        inputs, n = self._structs(values, keep)
        outs, m = self._structs(out_values, keep)
        handle = self._handle

        def enqueue():
            _check(lib.tc_session_enqueue(handle, outs, m, inputs, n))

        enqueue.keep = keep
        return enqueue

    # Resident state (training steps): see docs/python.md.
    @property
    def state_names(self):
        return [lib.tc_session_state_name(self._handle, i).decode()
                for i in range(lib.tc_session_state_count(self._handle))]

    def set_state(self, name, value):
        """Copies `value` (any DLPack tensor) into the session's state `name`."""
        keep = []
        arr, _ = self._structs([value], keep)
        _check(lib.tc_session_set_state(self._handle, name.encode(), arr))
        if not hasattr(self, "_state_shapes"):
            self._state_shapes = {}
        self._state_shapes[name] = list(keep[0].shape)

    def read_state(self, name, out=None):
        """The current value of state `name`, copied into `out` (a DLPack
        tensor) or into a new runtime-owned Tensor on the executable's device."""
        if out is None:
            info = next(i for i in self.executable.inputs if i.name == name)
            shape = self._state_shapes.get(name) if hasattr(self, "_state_shapes") else None
            if shape is None:
                raise TypeError("tensorc: read_state needs `out` for state set from another session")
            out = Tensor(self.executable, info.element_type, shape)
        keep = []
        arr, _ = self._structs([out], keep)
        _check(lib.tc_session_read_state(self._handle, name.encode(), arr))
        return out

    def step(self, outputs=None, **inputs):
        """Queues one step with the state as inputs (`inputs`: the others, by
        name; `outputs`: the results wanted, by name). Call synchronize()."""
        keep = []
        names_in = (ctypes.c_char_p * max(len(inputs), 1))(*[k.encode() for k in inputs])
        arr_in, n = self._structs(list(inputs.values()), keep)
        outputs = outputs or {}
        names_out = (ctypes.c_char_p * max(len(outputs), 1))(*[k.encode() for k in outputs])
        arr_out, m = self._structs(list(outputs.values()), keep)
        self._keep = (keep, names_in, names_out)
        _check(lib.tc_session_enqueue_step(self._handle, names_in, arr_in, n, names_out, arr_out, m))
        return outputs

    def bind(self, name, value):
        """Copies `value` (any DLPack tensor) into session memory as input
        `name`: step() uses it whenever `name` is not given (parameters)."""
        keep = []
        arr, _ = self._structs([value], keep)
        _check(lib.tc_session_bind_input(self._handle, name.encode(), arr))

    def bind_weights(self, weights):
        """Binds every input that `weights` (a Weights or a .safetensors
        path) has a tensor for; returns how many were bound."""
        if not isinstance(weights, Weights):
            weights = Weights(weights)
        bound = ctypes.c_int32()
        _check(lib.tc_session_bind_weights(self._handle, weights._handle, ctypes.byref(bound)))
        return bound.value

    @property
    def arena_bytes(self):
        return lib.tc_session_arena_bytes(self._handle)

    def synchronize(self):
        try:
            _check(lib.tc_session_synchronize(self._handle))
        finally:
            self._keep = None

    def set_stream(self, stream):
        """cuda executables: the CUDA stream to queue runs on, as an integer
        handle (torch.cuda.current_stream().cuda_stream; 0 is CUDA's default
        stream), or None for the session's own stream (the default)."""
        if stream is None:
            _check(lib.tc_session_use_own_stream(self._handle))
        else:
            _check(lib.tc_session_set_stream(self._handle, ctypes.c_void_p(int(stream))))

    def set_cuda_graphs(self, mode):
        """cuda executables: replay the launch sequence as a CUDA graph:
        True or "always", False or "off", or "repeated" (only runs whose
        tensor addresses and sizes one of the last 8 runs had: a loop on the
        same tensors replays from its second run; docs/runtime.md)."""
        modes = {"off": 0, "always": 1, "repeated": 2}
        if isinstance(mode, str):
            if mode not in modes:
                raise ValueError(f"tensorc: set_cuda_graphs: expected one of {sorted(modes)} or a bool, got {mode!r}")
            value = modes[mode]
        else:
            value = 1 if mode else 0
        _check(lib.tc_session_set_cuda_graphs(self._handle, value))

    @property
    def last_device_ms(self):
        return lib.tc_session_last_device_ms(self._handle)

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.tc_session_release(self._handle)
            self._handle = None
