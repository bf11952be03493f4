"""The runtime's C API (runtime/include/tensorc/tensorc.h) through ctypes.

The library is found at $TENSORC_RUNTIME_LIB, else beside this package in a
source checkout (build/lib) or an install prefix (lib/), else by the
dynamic loader's search (libtensorc_runtime.so.0). Beside it, where the
build made it, the per-call fast path (`fast`: _fast.c, a stable-ABI
extension; None without it or with TENSORC_PYTHON_FAST=0)."""
import ctypes
import importlib.machinery
import importlib.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


class tc_tensor_t(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class tc_runtime_options_t(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_uint32), ("kernel_cache_dir", ctypes.c_char_p),
                ("mode", ctypes.c_char_p)]


def _candidates():
    env = os.environ.get("TENSORC_RUNTIME_LIB")
    if env:
        yield env
    for rel in ("../../build/lib", "../../lib", "../../../lib", "../../../../lib"):
        yield os.path.normpath(os.path.join(_HERE, rel, "libtensorc_runtime.so.0"))
    yield "libtensorc_runtime.so.0"


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise OSError("tensorc: cannot load the runtime library libtensorc_runtime.so.0 "
                  "(set TENSORC_RUNTIME_LIB to its path): " + "; ".join(errors or ["not found"]))


lib = _load()

_status = ctypes.c_void_p
_p = ctypes.c_void_p
_i32 = ctypes.c_int32


def _declare(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_declare("tc_status_code", ctypes.c_int, _status)
_declare("tc_status_message", ctypes.c_char_p, _status)
_declare("tc_status_free", None, _status)
_declare("tc_runtime_options_initialize", None, ctypes.POINTER(tc_runtime_options_t))
_declare("tc_runtime_create", _status, ctypes.POINTER(tc_runtime_options_t), ctypes.POINTER(_p))
_declare("tc_runtime_release", None, _p)
_declare("tc_runtime_set_autotune", _status, _p, ctypes.c_char_p, ctypes.c_char_p)
_declare("tc_executable_load", _status, _p, ctypes.c_char_p, ctypes.POINTER(_p))
_declare("tc_executable_load_from_memory", _status, _p, ctypes.c_char_p, ctypes.c_size_t,
         ctypes.POINTER(_p))
_declare("tc_executable_release", None, _p)
_declare("tc_executable_input_count", _i32, _p)
_declare("tc_executable_output_count", _i32, _p)
_declare("tc_executable_input_info", _status, _p, _i32, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_i32))
_declare("tc_executable_output_info", _status, _p, _i32, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_i32))
_declare("tc_executable_device", _status, _p, ctypes.POINTER(_i32), ctypes.POINTER(_i32))
_declare("tc_executable_allocate", _status, _p, ctypes.c_size_t, ctypes.POINTER(_p))
_declare("tc_executable_free", None, _p, _p)
_declare("tc_session_create", _status, _p, ctypes.POINTER(_p))
_declare("tc_session_release", None, _p)
_declare("tc_session_output_shape", _status, _p, ctypes.POINTER(tc_tensor_t), _i32, _i32,
         ctypes.POINTER(ctypes.c_int64))
_declare("tc_session_run", _status, _p, ctypes.POINTER(tc_tensor_t), _i32,
         ctypes.POINTER(tc_tensor_t), _i32)
_declare("tc_session_enqueue", _status, _p, ctypes.POINTER(tc_tensor_t), _i32,
         ctypes.POINTER(tc_tensor_t), _i32)
_declare("tc_session_synchronize", _status, _p)
_declare("tc_session_set_stream", _status, _p, _p)
_declare("tc_session_use_own_stream", _status, _p)
_declare("tc_session_set_cuda_graphs", _status, _p, _i32)
_declare("tc_session_last_device_ms", ctypes.c_double, _p)
_declare("tc_session_arena_bytes", ctypes.c_int64, _p)
_declare("tc_session_state_count", _i32, _p)
_declare("tc_session_state_name", ctypes.c_char_p, _p, _i32)
_declare("tc_session_set_state", _status, _p, ctypes.c_char_p, ctypes.POINTER(tc_tensor_t))
_declare("tc_session_read_state", _status, _p, ctypes.c_char_p, ctypes.POINTER(tc_tensor_t))
_declare("tc_session_enqueue_step", _status, _p, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(tc_tensor_t), _i32, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(tc_tensor_t), _i32)
_declare("tc_weights_open", _status, ctypes.c_char_p, ctypes.POINTER(_p))
_declare("tc_weights_release", None, _p)
_declare("tc_weights_count", _i32, _p)
_declare("tc_weights_tensor", _status, _p, _i32, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(tc_tensor_t))
_declare("tc_session_bind_input", _status, _p, ctypes.c_char_p, ctypes.POINTER(tc_tensor_t))
_declare("tc_session_bind_weights", _status, _p, _p, ctypes.POINTER(_i32))


def _load_fast():
    """The fast-path extension beside the loaded runtime library, or None."""
    if os.environ.get("TENSORC_PYTHON_FAST", "1") == "0" or os.sep not in lib._name:
        return None
    path = os.path.join(os.path.dirname(lib._name), "_tensorc_fast.abi3.so")
    if not os.path.exists(path):
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader("_tensorc_fast", path)
        spec = importlib.util.spec_from_file_location("_tensorc_fast", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError):  # another platform's build: the ctypes path
        return None
    return module


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


fast = _load_fast()
if fast is not None:
    fast_functions = tuple(_address(getattr(lib, n)) for n in (
        "tc_session_enqueue", "tc_session_set_stream", "tc_status_code", "tc_status_message", "tc_status_free"))
