"""DLPack (https://dmlc.github.io/dlpack/latest/) in ctypes: reading the
tensors of any producer (`__dlpack__`: PyTorch, CuPy, JAX, NumPy >= 1.22)
and exporting the runtime's tensors as capsules, versioned (DLPack 1.x,
"dltensor_versioned") or not ("dltensor"), whichever the consumer asks."""
import ctypes

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

# DLDataTypeCode
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6

# tc_element_type_t <-> (code, bits)
ELEMENT_TYPES = {0: (_FLOAT, 64), 1: (_FLOAT, 32), 2: (_FLOAT, 16), 3: (_BFLOAT, 16),
                 4: (_INT, 64), 5: (_INT, 32), 6: (_BOOL, 8)}
_BY_DL = {v: k for k, v in ELEMENT_TYPES.items()}
_BY_DL[(_UINT, 8)] = 6  # bool as uint8 (older producers)
NAMES = {0: "f64", 1: "f32", 2: "f16", 3: "bf16", 4: "i64", 5: "i32", 6: "i1"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_DeleterV = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _DeleterV), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]
# On the raw PyObject* a capsule destructor gets (no new reference to an
# object being destroyed).
_name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_GetName", _api))
_pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))


class Borrowed:
    """A producer's tensor, read through its capsule; the capsule (and so
    the producer's memory) stays alive as long as this object."""

    def __init__(self, obj, stream=None):
        try:
            capsule = obj.__dlpack__(max_version=(1, 0)) if stream is None else \
                obj.__dlpack__(stream=stream, max_version=(1, 0))
        except TypeError:  # a producer of DLPack < 1.0 takes no max_version
            capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
        self.capsule = capsule
        if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
            p = _api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
            managed = ctypes.cast(p, ctypes.POINTER(DLManagedTensorVersioned)).contents
            if managed.version.major > 1:
                raise TypeError(f"tensorc: DLPack version {managed.version.major} is newer than 1.x")
            self.read_only = bool(managed.flags & 1)
            t = managed.dl_tensor
        elif _api.PyCapsule_IsValid(capsule, b"dltensor"):
            p = _api.PyCapsule_GetPointer(capsule, b"dltensor")
            t = ctypes.cast(p, ctypes.POINTER(DLManagedTensor)).contents.dl_tensor
            self.read_only = False
        else:
            raise TypeError("tensorc: __dlpack__ did not return a DLPack capsule")
        key = (t.dtype.code, t.dtype.bits)
        if t.dtype.lanes != 1 or key not in _BY_DL:
            raise TypeError(f"tensorc: unsupported DLPack dtype (code {t.dtype.code}, "
                            f"{t.dtype.bits} bits, {t.dtype.lanes} lanes)")
        self.element_type = _BY_DL[key]
        self.shape = [t.shape[i] for i in range(t.ndim)]
        self.strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
        if t.device.device_type in (KDL_CPU, KDL_CUDA_HOST):
            self.device_type = KDL_CPU  # page-locked host memory is host memory
        elif t.device.device_type in (KDL_CUDA, KDL_CUDA_MANAGED):
            self.device_type = KDL_CUDA
        else:
            raise TypeError(f"tensorc: tensors on DLPack device type {t.device.device_type} "
                            "are not supported (host and CUDA are)")
        self.device_id = t.device.device_id
        self.data = t.data
        self.byte_offset = t.byte_offset


# Capsules we export own a reference to their tensor until consumed or
# collected: id(managed struct) -> (struct, keep-alive objects).
_exported = {}


@_Deleter
def _delete(managed):
    _exported.pop(ctypes.addressof(managed.contents), None)


@_DeleterV
def _delete_versioned(managed):
    _exported.pop(ctypes.addressof(managed.contents), None)


@_CapsuleDestructor
def _capsule_destructor(capsule):
    # A capsule no consumer took (its name is still the producer's): delete
    # the tensor here. A consumer renames it "used_dltensor[_versioned]".
    name = _name_of(capsule)
    if name in (b"dltensor", b"dltensor_versioned"):
        _exported.pop(_pointer_of(capsule, name), None)


def export(owner, data, element_type, shape, device_type, device_id, versioned):
    """A capsule for `data` (kept alive through `owner`)."""
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    code, bits = ELEMENT_TYPES[element_type]
    t = DLTensor(ctypes.c_void_p(data), DLDevice(device_type, device_id), ndim,
                 DLDataType(code, bits, 1), shape_arr, None, 0)
    if versioned:
        m = DLManagedTensorVersioned(DLPackVersion(1, 0), None, _delete_versioned, 0, t)
        name = b"dltensor_versioned"
    else:
        m = DLManagedTensor(t, None, _delete)
        name = b"dltensor"
    address = ctypes.addressof(m)
    _exported[address] = (m, shape_arr, owner)
    return _api.PyCapsule_New(address, name, _capsule_destructor)
