"""Describing arrays without importing torch.

:func:`describe` turns anything array-like into an :class:`Array` (data
pointer, shape, byte strides, dtype name, read-only flag and the object
that keeps the memory alive) through, in order:

- numpy arrays (their C struct's data pointer, see ``_np_data``),
- torch tensors and look-alikes, by duck typing (``data_ptr()``,
  ``stride()``, ``element_size()``, ``dtype``, ``device``),
- ``__cuda_array_interface__`` (CUDA memory: cupy, numba, ...),
- ``__array_interface__``,
- DLPack (``__dlpack__`` / ``__dlpack_device__``, CPU or CUDA),
- the buffer protocol (through ``memoryview`` and a numpy view of it).

Lists, tuples and scalars are refused with :class:`NoConversionError`
(a TypeError): nothing is converted implicitly. An Array's ``device`` is
-1 for host memory and the CUDA ordinal for device memory; callers that
read host memory pass ``cuda=False`` (the default) and get a ValueError
for device memory instead of a pointer they must not dereference.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, NamedTuple

import numpy as np

from ._capi import NoConversionError

_ndarray = np.ndarray



class Array(NamedTuple):
    ptr: int
    shape: tuple
    strides: tuple  # in bytes
    dtype: str  # numpy-style name: "uint8", "int32", "int64", ...
    itemsize: int
    readonly: bool
    keep: Any  # keeps the memory alive while the description is used
    device: int = -1  # -1: host memory; else the CUDA device ordinal
    stream: Any = None  # __cuda_array_interface__'s stream (its producer's), when it gives one

    @property
    def nbytes(self) -> int:
        n = self.itemsize
        for d in self.shape:
            n *= d
        return n

    def c_contiguous(self) -> bool:
        """Whether the elements are dense, in C order (size-1 axes' strides ignored)."""
        if 0 in self.shape:
            return True
        want = self.itemsize
        for d, s in zip(reversed(self.shape), reversed(self.strides)):
            if d != 1 and s != want:
                return False
            want *= d
        return True

    def span(self) -> tuple[int, int]:
        """[lo, hi): the bytes the elements occupy (empty when any axis is 0)."""
        lo = hi = self.ptr
        for d, s in zip(self.shape, self.strides):
            if d == 0:
                return self.ptr, self.ptr
            if s < 0:
                lo += (d - 1) * s
            else:
                hi += (d - 1) * s
        return lo, hi + self.itemsize


# ---- numpy --------------------------------------------------------------
#
# ndarray.__array_interface__ builds a dict per access (about 1.7 us on
# the development VM, more than the foreign call); PyArray_DATA is a load
# of the struct field right after the object header. It is the field's
# place in every NumPy since 1.7 (PyArrayObject_fields); checked here on a
# few arrays, with the interface as the fallback.

_HEADER = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
_from_address = ctypes.c_void_p.from_address


def _np_data_iface(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _np_data_struct(a: np.ndarray) -> int:
    return _from_address(id(a) + _HEADER).value or 0


def _choose_np_data():
    if sys.implementation.name != "cpython":
        return _np_data_iface
    base = np.arange(64, dtype=np.int64)
    for a in (base, base[3:], base.reshape(8, 8)[:, 2], np.zeros(0, np.uint8), np.empty((3, 5), np.uint8)):
        if _np_data_struct(a) != _np_data_iface(a):
            return _np_data_iface
    return _np_data_struct


np_data = _choose_np_data()


_dtype_names: dict = {}  # dtype.name is computed in Python per access


def _dtype_name(dt: np.dtype) -> str:
    name = _dtype_names.get(dt)
    if name is None:
        name = dt.name if dt.isnative or dt.itemsize == 1 else dt.name + " (non-native byte order)"
        _dtype_names[dt] = name
    return name


def _from_numpy(a: np.ndarray) -> Array:
    dt = a.dtype
    return Array(np_data(a), a.shape, a.strides, _dtype_name(dt), dt.itemsize, not a.flags.writeable, a)


# ---- torch-like ---------------------------------------------------------


def is_torch_like(x: Any) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "stride") and hasattr(x, "element_size") and hasattr(x, "device")


def _device_type(x: Any) -> str:
    d = x.device
    return getattr(d, "type", str(d))


_torch_dtype_names: dict = {}  # str(dtype) is computed per call
_STRIDED: list = []  # torch.strided itself, once seen (its str() costs per call)


def _from_torch(x: Any) -> Array:
    if getattr(x, "is_cuda", False) and hasattr(x, "get_device"):
        ordinal = x.get_device()
    elif getattr(x, "is_cpu", False):
        ordinal = -1
    else:  # look-alikes, and devices other than CPU and CUDA
        d = x.device
        dev = getattr(d, "type", str(d))
        if dev == "cuda":
            ordinal = d.index
            if ordinal is None:
                ordinal = -2  # "cuda" without an index: not from a real tensor
        elif dev == "cpu":
            ordinal = -1
        else:
            raise NotImplementedError(f"scatterkit: tensors on device {dev!r} are not supported (CPU or CUDA)")
    layout = getattr(x, "layout", None)
    if layout is not None and layout not in _STRIDED:
        name = str(layout)
        if name != "torch.strided":
            raise ValueError(f"scatterkit: a {name} tensor: want a dense (strided) tensor")
        _STRIDED.append(layout)
    item = x.element_size()
    dt = x.dtype
    name = _torch_dtype_names.get(dt)
    if name is None:
        name = _torch_dtype_names[dt] = str(dt).rsplit(".", 1)[-1]
    return Array(x.data_ptr(), tuple(x.shape), tuple(s * item for s in x.stride()), name, item, False, x, ordinal)


def _device_of_pointer(ptr: int, what: str) -> int:
    from ._capi import driver

    drv = driver()
    if drv is None:
        raise NotImplementedError(f"scatterkit: {what} is CUDA memory, but the CUDA driver does not initialise here")
    d = drv.device_of(ptr) if ptr else 0
    if d < 0:
        raise ValueError(f"scatterkit: {what}: the CUDA driver does not know its pointer {ptr:#x}")
    return d


def c_strides(shape: tuple, itemsize: int) -> tuple:
    """The byte strides of a C-contiguous array of shape (what an interface
    without strides, or DLPack with NULL strides, means)."""
    strides, acc = [], itemsize
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def _from_cuda_interface(x: Any, iface: dict, what: str) -> Array:
    if iface.get("mask") is not None:
        raise ValueError(f"scatterkit: {what} has a mask: want a dense CUDA array")
    dt = np.dtype(iface["typestr"])
    shape = tuple(iface["shape"])
    strides = iface.get("strides") or c_strides(shape, dt.itemsize)
    ptr, ro = iface["data"]
    ptr = ptr or 0
    return Array(ptr, shape, tuple(strides), _dtype_name(dt), dt.itemsize, bool(ro), x,
                 _device_of_pointer(ptr, what), iface.get("stream"))


# ---- __array_interface__, DLPack, buffers -------------------------------


def _from_interface(x: Any, iface: dict) -> Array:
    data = iface.get("data")
    if not isinstance(data, tuple) or iface.get("mask") is not None:
        return _from_numpy(np.asarray(x))  # a buffer object or a mask: let numpy read it
    dt = np.dtype(iface["typestr"])
    shape = tuple(iface["shape"])
    strides = iface.get("strides") or c_strides(shape, dt.itemsize)
    return Array(data[0] or 0, shape, tuple(strides), _dtype_name(dt), dt.itemsize, bool(data[1]), x)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 6: "bool"}

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(x: Any) -> Array:
    dev, ordinal = x.__dlpack_device__()[:2] if hasattr(x, "__dlpack_device__") else (_DL_CPU, 0)
    if dev in (_DL_CUDA, _DL_CUDA_MANAGED):
        try:  # -1: no synchronisation (the caller orders its streams; lookup's stream= says where)
            capsule = x.__dlpack__(stream=-1)
        except TypeError:
            capsule = x.__dlpack__()
    elif dev in (_DL_CPU, _DL_CUDA_HOST):
        ordinal = -1
        capsule = x.__dlpack__()
    else:
        raise NotImplementedError(f"scatterkit: DLPack device type {dev} is not supported (CPU or CUDA)")
    # DLManagedTensor starts with its DLTensor. The capsule stays
    # unconsumed (named "dltensor"): its destructor calls the producer's
    # deleter when the description (keep) is dropped.
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    if t.dtype.lanes != 1 or t.dtype.bits % 8:
        raise ValueError(f"scatterkit: DLPack dtype code {t.dtype.code} bits {t.dtype.bits} lanes {t.dtype.lanes}")
    item = t.dtype.bits // 8
    name = _DL_CODES.get(t.dtype.code, f"code{t.dtype.code}-") + str(t.dtype.bits)
    if name == "bool8":
        name = "bool"
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] * item for i in range(t.ndim))
    else:
        strides = c_strides(shape, item)
    return Array((t.data or 0) + t.byte_offset, shape, strides, name, item, False, (x, capsule), ordinal)


def describe(x: Any, what: str, cuda: bool = False) -> Array:
    """Describe x (an array, tensor or buffer); what names it in errors.
    Device memory is a ValueError unless cuda is true."""
    if isinstance(x, _ndarray):
        return _from_numpy(x)
    a = _describe(x, what)
    if a.device != -1 and not cuda:
        raise ValueError(f"scatterkit: {what} is in CUDA memory (device {a.device}): want host memory here (.cpu() copies)")
    if a.device == -2:
        raise ValueError(f"scatterkit: {what} is on a CUDA device without an index")
    return a


def _describe(x: Any, what: str) -> Array:
    if isinstance(x, (list, tuple)) or x is None or isinstance(x, (int, float, complex, str)):
        raise NoConversionError(
            f"scatterkit: {what} is a {type(x).__name__}: want a numpy array, a torch tensor or a buffer "
            "(no implicit conversion)"
        )
    if is_torch_like(x):
        return _from_torch(x)
    ciface = getattr(x, "__cuda_array_interface__", None)
    if ciface is not None:
        return _from_cuda_interface(x, ciface, what)
    iface = getattr(x, "__array_interface__", None)
    if iface is not None:
        return _from_interface(x, iface)
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x)
    try:
        mv = memoryview(x)
    except TypeError:
        raise NoConversionError(
            f"scatterkit: {what} is a {type(x).__name__}: want a numpy array, a torch tensor, a DLPack "
            "tensor or a buffer-protocol object"
        ) from None
    return _from_numpy(np.asarray(mv))


def is_arraylike(x: Any) -> bool:
    """Whether describe(x) would treat x as one array (not as an iterable)."""
    if isinstance(x, (_ndarray, bytes, bytearray, memoryview)) or is_torch_like(x):
        return True
    if any(hasattr(x, a) for a in ("__array_interface__", "__cuda_array_interface__", "__dlpack__")):
        return True
    try:
        memoryview(x)
    except TypeError:
        return False
    return True


def fingerprint_ndarray(x: np.ndarray) -> Any:
    return x.shape


def _tensor_fingerprint(x: Any) -> Any:
    return (x.data_ptr(), x.shape, x.stride())


def _never(x: Any) -> Any:
    return object()  # equal to nothing


def on_cuda(x: Any) -> bool:
    """Whether x (not a numpy array) lives in CUDA memory, without
    describing it: a torch tensor's is_cuda, a CUDA array interface, a
    DLPack CUDA device."""
    if is_torch_like(x):
        return _device_type(x) == "cuda"
    if hasattr(x, "__cuda_array_interface__"):
        return True
    if hasattr(x, "__dlpack_device__") and not hasattr(x, "__array_interface__"):
        try:
            return x.__dlpack_device__()[0] in (_DL_CUDA, _DL_CUDA_MANAGED)
        except Exception:
            return False
    return False


def cuda_fingerprinter(*xs: Any):
    """The fingerprint function for a cached CUDA call over xs (ids and
    output), or None when one of them cannot be cached: torch tensors (a
    storage can move: pointer, shape and strides); anything else is
    described afresh on every call."""
    for x in xs:
        if not is_torch_like(x):
            return None
    return _tensor_fingerprint


def fingerprinter(x: Any):
    """A function of x giving what must be unchanged for a cached
    description of x to hold.

    A numpy array's data pointer is fixed for its life (resize() refuses
    while the cache holds a reference, and shape or dtype changes in place
    keep its bytes), so its shape is enough; a tensor's storage can move
    (resize_, set_): its pointer, shape and strides. Anything else is never
    cached."""
    if isinstance(x, _ndarray):
        return fingerprint_ndarray
    if is_torch_like(x) and _device_type(x) == "cpu":
        return _tensor_fingerprint
    return _never


def numpy_view(a: Array) -> np.ndarray:
    """A numpy array over a's memory; a.keep must stay alive while it is used."""
    if isinstance(a.keep, _ndarray):
        return a.keep
    dt = np.dtype(a.dtype)
    if a.nbytes == 0:
        return np.empty(a.shape, dt)
    lo, hi = a.span()
    raw = (ctypes.c_uint8 * (hi - lo)).from_address(lo)
    v = np.ndarray(a.shape, dt, buffer=raw, offset=a.ptr - lo, strides=a.strides)
    if a.readonly:
        v.flags.writeable = False
    return v
