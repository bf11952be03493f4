/* tensorc's per-call fast path from Python: queue a session's run with torch
 * tensors, reading each tensor's description (dtype, device, shape, strides,
 * data pointer) through the C API of CPython instead of ctypes structures
 * built in Python. Measured on an H200 host with the ctypes path: ~1.5 us
 * per tensor per call of Python attribute reads and ctypes field writes (a
 * GPT-2 block's forward with 27 tensors: 40 us of its 400 us of host time
 * before graphs; with CUDA graphs most of the rest). Here: a few hundred
 * nanoseconds per tensor.
 *
 * Stable ABI (Py_LIMITED_API 3.8): one build loads in every CPython >= 3.8
 * (Debian's 3.11 builds it, the GPU machine's 3.12 runs it). It links
 * nothing: the runtime's C functions come as addresses from ctypes
 * (tensorc/_lib.py loads libtensorc_runtime), so the extension and the
 * ctypes path always call the same library. Without it (no Python headers
 * at build time) tensorc falls back to ctypes.
 *
 *   bind(enqueue, set_stream, status_code, status_message, status_free,
 *        dtypes: {torch dtype: tc element type}, error: tensorc.Error)
 *   Enqueue(session_address)(inputs, outputs, stream=None, fresh_outputs=False)
 *     -> None or NotImplemented
 *
 * An Enqueue returns NotImplemented, having done nothing, for anything the
 * fast path does not describe (not a torch tensor, another dtype or layout,
 * a negative view, an output that requires grad): the caller takes the
 * ctypes path, which handles or refuses it. */
#define Py_LIMITED_API 0x03080000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* runtime/include/tensorc/tensorc.h's tc_tensor_t, repeated so the
 * extension builds without the runtime's headers on its include path. */
typedef struct {
  int dtype;
  int32_t rank;
  const int64_t *shape;
  void *data;
  int32_t device_type;
  int32_t device_id;
  const int64_t *strides;
  uint64_t byte_offset;
} tc_tensor;

enum { kDlCpu = 1, kDlCuda = 2, kMaxRank = 16 };

typedef void *status_t;
static status_t (*enqueue_fn)(void *, const tc_tensor *, int32_t, const tc_tensor *, int32_t);
static status_t (*set_stream_fn)(void *, void *);
static int (*status_code_fn)(status_t);
static const char *(*status_message_fn)(status_t);
static void (*status_free_fn)(status_t);
static PyObject *dtypes; /* torch dtype -> element type */
static PyObject *error;  /* tensorc.Error */
static PyObject *s_dtype, *s_shape, *s_stride, *s_data_ptr, *s_get_device, *s_is_neg, *s_requires_grad;

/* Py_NewRef and Py_XSETREF, which the limited API of 3.8 lacks. */
static PyObject *new_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}

static void replace(PyObject **slot, PyObject *o) {
  PyObject *old = *slot;
  *slot = new_ref(o);
  Py_XDECREF(old);
}

/* Raises tensorc.Error(message, code) for a failed status. */
static int check(status_t status) {
  if (!status)
    return 0;
  PyObject *args = Py_BuildValue("(si)", status_message_fn(status), status_code_fn(status));
  status_free_fn(status);
  if (args) {
    PyObject *e = PyObject_CallObject(error, args);
    Py_DECREF(args);
    if (e) {
      PyErr_SetObject(error, e);
      Py_DECREF(e);
    }
  }
  return -1;
}

static void *address(PyObject *o) {
  if (o == Py_None)
    return NULL;
  return PyLong_AsVoidPtr(o);
}

static PyObject *bind(PyObject *self, PyObject *args) {
  PyObject *e, *s, *c, *m, *f, *d, *err;
  (void)self;
  if (!PyArg_ParseTuple(args, "OOOOOO!O", &e, &s, &c, &m, &f, &PyDict_Type, &d, &err))
    return NULL;
  enqueue_fn = address(e);
  set_stream_fn = address(s);
  status_code_fn = address(c);
  status_message_fn = address(m);
  status_free_fn = address(f);
  if (PyErr_Occurred())
    return NULL;
  if (!enqueue_fn || !set_stream_fn || !status_code_fn || !status_message_fn || !status_free_fn) {
    PyErr_SetString(PyExc_ValueError, "tensorc._fast.bind: a null function address");
    return NULL;
  }
  replace(&dtypes, d);
  replace(&error, err);
  Py_RETURN_NONE;
}

typedef struct {
  PyObject_HEAD
  void *session;
  Py_ssize_t capacity;
  tc_tensor *tensors; /* inputs then outputs */
  int64_t *dims;      /* per tensor: kMaxRank sizes, then kMaxRank strides */
  Py_ssize_t described_inputs, described_outputs; /* what the last call described, or -1 */
} Enqueue;

static void enqueue_dealloc(PyObject *o) {
  Enqueue *self = (Enqueue *)o;
  PyMem_Free(self->tensors);
  PyMem_Free(self->dims);
  PyTypeObject *type = Py_TYPE(o);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(o);
  Py_DECREF(type);
}

static PyObject *enqueue_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  PyObject *session;
  if (kwargs && PyDict_Size(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "tensorc._fast.Enqueue(session_address)");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "O", &session))
    return NULL;
  void *handle = PyLong_AsVoidPtr(session);
  if (!handle) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "tensorc._fast.Enqueue: a null session");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  Enqueue *self = (Enqueue *)alloc(type, 0);
  if (!self)
    return NULL;
  self->session = handle;
  self->capacity = 0;
  self->tensors = NULL;
  self->dims = NULL;
  self->described_inputs = self->described_outputs = -1;
  return (PyObject *)self;
}

/* 1 if the method returns True, 0 for False, -1 on error. */
static int call_bool(PyObject *t, PyObject *name) {
  PyObject *r = PyObject_CallMethodObjArgs(t, name, NULL);
  if (!r)
    return -1;
  int v = PyObject_IsTrue(r);
  Py_DECREF(r);
  return v;
}

/* Reads an int tuple (torch.Size, a stride tuple) into out; its length, or
 * -1 with an error set, or -2 (past kMaxRank: not described here). */
static int read_dims(PyObject *tuple, int64_t *out) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, "tensorc._fast: expected a tuple of sizes");
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(tuple);
  if (n > kMaxRank)
    return -2;
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
    if (v == -1 && PyErr_Occurred())
      return -1;
    out[i] = v;
  }
  return (int)n;
}

/* Describes tensor t in *d (dims: its size and stride arrays). 1: done; 0:
 * not described here (the caller's NotImplemented). Any attribute that
 * cannot be read (a sparse or MKL-DNN tensor has no strides) is also 0:
 * the ctypes path then reports what is wrong. No layout or conjugate
 * check: only real dtypes are described, which have no conjugate views. */
static int describe(PyObject *t, int output, tc_tensor *d, int64_t *dims) {
  int result = 0;
  PyObject *shape = NULL, *stride = NULL, *ptr = NULL, *device = NULL, *grad = NULL;
  PyObject *dtype = PyObject_GetAttr(t, s_dtype);
  if (!dtype)
    goto done;
  PyObject *element = PyDict_GetItem(dtypes, dtype); /* borrowed */
  if (!element)
    goto done;
  if (output) { /* DLPack refuses outputs that require grad: the caller's path reports it */
    if (!(grad = PyObject_GetAttr(t, s_requires_grad)) || grad == Py_True)
      goto done;
  }
  int neg = call_bool(t, s_is_neg);
  if (neg != 0)
    goto done;
  if (!(shape = PyObject_GetAttr(t, s_shape)) || !(stride = PyObject_CallMethodObjArgs(t, s_stride, NULL)) ||
      !(ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL)) ||
      !(device = PyObject_CallMethodObjArgs(t, s_get_device, NULL)))
    goto done;
  int rank = read_dims(shape, dims);
  if (rank < 0 || read_dims(stride, dims + kMaxRank) != rank)
    goto done;
  long ordinal = PyLong_AsLong(device);
  void *data = PyLong_AsVoidPtr(ptr);
  if (PyErr_Occurred())
    goto done;
  d->dtype = (int)PyLong_AsLong(element);
  d->rank = rank;
  d->shape = dims;
  d->data = data;
  d->device_type = ordinal < 0 ? kDlCpu : kDlCuda;
  d->device_id = ordinal < 0 ? 0 : (int32_t)ordinal;
  d->strides = dims + kMaxRank;
  d->byte_offset = 0;
  result = 1;
done:
  if (!result)
    PyErr_Clear();
  Py_XDECREF(dtype);
  Py_XDECREF(grad);
  Py_XDECREF(shape);
  Py_XDECREF(stride);
  Py_XDECREF(ptr);
  Py_XDECREF(device);
  return result;
}

/* An output the caller allocated as the last call's (same shape, dtype and
 * device, contiguous, not requiring grad): only its address is new. */
static int readdress(PyObject *t, tc_tensor *d) {
  PyObject *ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
  if (!ptr) {
    PyErr_Clear();
    return 0;
  }
  void *data = PyLong_AsVoidPtr(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  d->data = data;
  return 1;
}

static PyObject *enqueue_call(PyObject *o, PyObject *args, PyObject *kwargs) {
  Enqueue *self = (Enqueue *)o;
  PyObject *inputs, *outputs, *stream = Py_None;
  int fresh = 0;
  if (kwargs && PyDict_Size(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "tensorc._fast.Enqueue(inputs, outputs, stream, fresh_outputs)");
    return NULL;
  }
  if (!enqueue_fn) {
    PyErr_SetString(PyExc_RuntimeError, "tensorc._fast: bind() was not called");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "OO|Op", &inputs, &outputs, &stream, &fresh))
    return NULL;
  PyObject *in = PySequence_Fast(inputs, "tensorc._fast: inputs must be a sequence");
  if (!in)
    return NULL;
  PyObject *out = PySequence_Fast(outputs, "tensorc._fast: outputs must be a sequence");
  if (!out) {
    Py_DECREF(in);
    return NULL;
  }
  PyObject *result = NULL;
  Py_ssize_t n = PySequence_Size(in), m = PySequence_Size(out);
  if (n > 0x7fffffff || m > 0x7fffffff) {
    PyErr_SetString(PyExc_ValueError, "tensorc._fast: too many tensors");
    goto done;
  }
  if (n + m > self->capacity) {
    tc_tensor *t = PyMem_Realloc(self->tensors, (size_t)(n + m) * sizeof(tc_tensor));
    if (t)
      self->tensors = t;
    int64_t *dims = t ? PyMem_Realloc(self->dims, (size_t)(n + m) * 2 * kMaxRank * sizeof(int64_t)) : NULL;
    if (dims)
      self->dims = dims;
    if (!t || !dims) {
      PyErr_NoMemory();
      goto done;
    }
    self->capacity = n + m;
  }
  /* fresh_outputs: the caller allocated the outputs as the last call's
   * (tensorc.torch's runner with static shapes): only their addresses are
   * read. The inputs' descriptions are always read. */
  int same_outputs = fresh && self->described_inputs == n && self->described_outputs == m;
  self->described_inputs = self->described_outputs = -1;
  for (Py_ssize_t i = 0; i < n + m; ++i) {
    PyObject *t = PySequence_GetItem(i < n ? in : out, i < n ? i : i - n);
    if (!t)
      goto done;
    int r = i >= n && same_outputs ? readdress(t, &self->tensors[i])
                                   : describe(t, i >= n, &self->tensors[i], self->dims + i * 2 * kMaxRank);
    Py_DECREF(t);
    if (r == 0) {
      result = new_ref(Py_NotImplemented);
      goto done;
    }
  }
  void *handle = stream == Py_None ? NULL : PyLong_AsVoidPtr(stream);
  if (PyErr_Occurred())
    goto done;
  /* Without the GIL, as ctypes calls it: a cpu executable runs before
   * enqueue returns, and other Python threads go on meanwhile. */
  status_t status = NULL;
  Py_BEGIN_ALLOW_THREADS
  if (stream != Py_None)
    status = set_stream_fn(self->session, handle);
  if (!status)
    status = enqueue_fn(self->session, self->tensors + n, (int32_t)m, self->tensors, (int32_t)n);
  Py_END_ALLOW_THREADS
  if (check(status))
    goto done;
  self->described_inputs = n;
  self->described_outputs = m;
  result = new_ref(Py_None);
done:
  Py_DECREF(in);
  Py_DECREF(out);
  return result;
}

static PyType_Slot enqueue_slots[] = {
    {Py_tp_new, enqueue_new},
    {Py_tp_dealloc, enqueue_dealloc},
    {Py_tp_call, enqueue_call},
    {Py_tp_doc, "Enqueue(session_address)(inputs, outputs, stream=None, fresh_outputs=False): queues a run"},
    {0, NULL},
};

static PyType_Spec enqueue_spec = {"tensorc._fast.Enqueue", sizeof(Enqueue), 0, Py_TPFLAGS_DEFAULT, enqueue_slots};

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(enqueue, set_stream, status_code, status_message, status_free, dtypes, "
                                 "error): the runtime's functions and torch's dtypes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tensorc_fast", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tensorc_fast(void) {
  PyObject *m = PyModule_Create(&module);
  if (!m)
    return NULL;
  PyObject *type = PyType_FromSpec(&enqueue_spec);
  if (!type || PyModule_AddObject(m, "Enqueue", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(m);
    return NULL;
  }
  struct {
    PyObject **slot;
    const char *name;
  } names[] = {{&s_dtype, "dtype"},       {&s_shape, "shape"},           {&s_stride, "stride"},
               {&s_data_ptr, "data_ptr"}, {&s_get_device, "get_device"}, {&s_is_neg, "is_neg"},
               {&s_requires_grad, "requires_grad"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (!*names[i].slot && !(*names[i].slot = PyUnicode_InternFromString(names[i].name))) {
      Py_DECREF(m);
      return NULL;
    }
  return m;
}
