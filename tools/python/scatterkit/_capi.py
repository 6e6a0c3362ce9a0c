"""ctypes bindings of libscatterkit.so, the C ABI of docs/capi.md.

Every function gets argtypes and restype here, once. The library is found
in the package directory (where ``pip install`` puts it) or at
``$SCATTERKIT_LIB`` (a file, or a directory holding libscatterkit.so), and
loaded on first use, so importing the package costs nothing and works
without it.

Errors: every export returns 0 or a negative code and fills an
``sk_error``; :func:`error` turns one into the Python exception a caller
expects (the table in docs/python.md).

Two libraries, one symbol set (docs/capi.md, CUDA): where the CUDA driver
(libcuda.so.1) loads and ``cuInit(0)`` succeeds, ``libscatterkit_cuda.so``
is loaded when it is there (CUDA lookups); else ``libscatterkit.so``
(``$SCATTERKIT_CUDA=0`` forces it). The driver is initialised here first
because the CUDA library's Go start-up exits the process when cuInit fails.

The lookup hot path does not go through argtypes: :data:`Lib.lookup_raw`
is a second function object of ``sk_lookup`` without them, called with
ctypes values the store prepared once (argtypes conversion of 13 values
costs about as much again as the foreign call itself).
"""

from __future__ import annotations

import ctypes
import os
import threading

ABI_VERSION = 1

SK_OK = 0
SK_EINVAL = -1
SK_EID = -2
SK_ENOTABLE = -3
SK_EEXIST = -4
SK_ECLOSED = -5
SK_EIO = -6
SK_ENOMEM = -7
SK_ENOTSUP = -8

LIB_NAME = "libscatterkit.so"
CUDA_LIB_NAME = "libscatterkit_cuda.so"
ENV_LIB = "SCATTERKIT_LIB"
ENV_CUDA = "SCATTERKIT_CUDA"

# sk_cuda_attach's flags
SK_CUDA_HOST = 1
SK_CUDA_STRICT = 2
SK_CUDA_ASYNC = 4


class sk_error(ctypes.Structure):
    """The C ABI's error record (docs/capi.md)."""

    _fields_ = [
        ("code", ctypes.c_int32),
        ("t", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("id", ctypes.c_int64),
        ("msg", ctypes.c_char * 1024),
    ]


class sk_lookup_args(ctypes.Structure):
    """sk_lookupv's arguments (docs/capi.md): filled once per cached call,
    so a repeated lookup passes two pointers instead of thirteen values."""

    _fields_ = [
        ("store", ctypes.c_uint64),
        ("cols", ctypes.c_uint64),
        ("t", ctypes.c_int64),
        ("k", ctypes.c_int32),
        ("id_bits", ctypes.c_int32),
        ("ids", ctypes.c_void_p),
        ("out_base", ctypes.c_void_p),
        ("out_len", ctypes.c_int64),
        ("off", ctypes.c_int64),
        ("tstride", ctypes.c_int64),
        ("kstride", ctypes.c_int64),
        ("offsets", ctypes.c_void_p),
    ]


class sk_cuda_lookup_args(ctypes.Structure):
    """sk_cuda_lookupv's arguments (docs/capi.md): filled once per cached
    call; only the stream is set before each repeat."""

    _fields_ = [
        ("dev", ctypes.c_uint64),
        ("cols", ctypes.c_uint64),
        ("stream", ctypes.c_uint64),
        ("t", ctypes.c_int64),
        ("k", ctypes.c_int32),
        ("id_bits", ctypes.c_int32),
        ("ids", ctypes.c_uint64),
        ("out", ctypes.c_uint64),
        ("out_len", ctypes.c_int64),
        ("off", ctypes.c_int64),
        ("tstride", ctypes.c_int64),
        ("kstride", ctypes.c_int64),
        ("offsets", ctypes.c_void_p),
    ]


# ---- exceptions ---------------------------------------------------------
#
# Each is the built-in class a caller expects (docs/python.md has the
# table). Three also derive from RuntimeError: the older layer/head API
# (Mooncake's) raises RuntimeError where the table API raises the precise
# class, and one class serves both.


class StoreClosedError(RuntimeError):
    """The store (or one of its objects) is closed."""


class RowIDError(IndexError, RuntimeError):
    """An id outside its table: ``t``, ``k`` (its position) and ``id``."""

    def __init__(self, msg: str, t: int, k: int, id: int):
        super().__init__(msg)
        self.t, self.k, self.id = t, k, id


class UnknownTableError(KeyError):
    """A table name the store does not have."""

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


class TableExistsError(FileExistsError, RuntimeError):
    """populate() of a table that already holds rows (tables are create-only)."""


class NoConversionError(TypeError, RuntimeError):
    """An argument that would need an implicit conversion (a list, int32
    ids where int64 are required, a non-contiguous array)."""


def error(rc: int, err: sk_error | None, what: str = "") -> Exception:
    """The exception for return code rc with err's details."""
    msg = err.msg.decode("utf-8", "replace") if err is not None else ""
    if not msg:
        msg = f"scatterkit: error code {rc}"
    if what:
        msg = f"{what}: {msg}"
    if rc == SK_EINVAL:
        return ValueError(msg)
    if rc == SK_EID:
        t, k, bad = (err.t, err.k, err.id) if err is not None else (-1, -1, -1)
        return RowIDError(f"{msg} (id {bad} at (t={t}, k={k}))", t, k, bad)
    if rc == SK_ENOTABLE:
        return UnknownTableError(msg)
    if rc == SK_EEXIST:
        return TableExistsError(msg)
    if rc == SK_ECLOSED:
        return StoreClosedError(msg)
    if rc == SK_ENOMEM:
        return MemoryError(msg)
    if rc == SK_ENOTSUP:
        return NotImplementedError(msg)
    return RuntimeError(msg)


# ---- the library --------------------------------------------------------

u64 = ctypes.c_uint64
i64 = ctypes.c_int64
i32 = ctypes.c_int32
vp = ctypes.c_void_p
cp = ctypes.c_char_p
P = ctypes.POINTER

_SIGNATURES = {
    "sk_abi_version": (i32, []),
    "sk_open": (i32, [cp, P(u64), P(sk_error)]),
    "sk_close": (i32, [u64, P(sk_error)]),
    "sk_table_spec": (i32, [u64, cp, P(i64), P(i64), P(i32), P(sk_error)]),
    "sk_remove": (i32, [u64, cp, P(sk_error)]),
    "sk_populate": (i32, [u64, cp, vp, i64, P(sk_error)]),
    "sk_populate_begin": (i32, [u64, cp, P(u64), P(sk_error)]),
    "sk_populate_write": (i32, [u64, vp, i64, P(sk_error)]),
    "sk_populate_commit": (i32, [u64, P(sk_error)]),
    "sk_populate_abort": (i32, [u64]),
    "sk_columns": (i32, [u64, cp, i32, P(u64), P(sk_error)]),
    "sk_columns_free": (i32, [u64]),
    "sk_lookup": (i32, [u64, u64, i64, i32, vp, i32, vp, i64, i64, i64, i64, vp, P(sk_error)]),
    "sk_lookupv": (i32, [P(sk_lookup_args), P(sk_error)]),
    "sk_buffer_new": (i32, [u64, i64, P(u64), P(vp), P(sk_error)]),
    "sk_buffer_free": (i32, [u64]),
    "sk_serve": (i32, [u64, cp, cp, cp, i32, P(u64), P(sk_error)]),
    "sk_serve_publish": (i32, [u64, cp, cp, cp, cp, i32, P(u64), P(sk_error)]),
    "sk_server_close": (i32, [u64, P(sk_error)]),
    "sk_bench_lookup": (
        i32,
        [u64, u64, i64, i32, vp, i32, vp, i64, i64, i64, i64, vp, i64, P(i64), P(sk_error)],
    ),
    "sk_cuda_available": (i32, [P(i32), P(sk_error)]),
    "sk_cuda_attach": (i32, [u64, i32, i32, P(u64), P(sk_error)]),
    "sk_cuda_detach": (i32, [u64, P(sk_error)]),
    "sk_cuda_warmup": (i32, [u64, u64, P(sk_error)]),
    "sk_cuda_lookup": (i32, [u64, u64, u64, i64, i32, u64, i32, u64, i64, i64, i64, i64, vp, P(sk_error)]),
    "sk_cuda_lookupv": (i32, [P(sk_cuda_lookup_args), P(sk_error)]),
    "sk_cuda_status": (i32, [u64, u64, i32, P(sk_error)]),
    "sk_cuda_bench_replay": (i32, [u64, u64, u64, i64, P(i64), P(sk_error)]),
    "sk_cuda_bench_graph": (
        i32,
        [u64, u64, u64, i64, i32, u64, i32, u64, i64, i64, i64, i64, vp, i64, P(i64), P(sk_error)],
    ),
}


class Driver:
    """The CUDA driver (libcuda.so.1) as this package uses it: initialised
    once, then asked which device a pointer lives on and whether a stream
    is being captured. None of it is needed for CPU lookups."""

    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9

    def __init__(self, dll: ctypes.CDLL):
        self.dll = dll
        self._attr = dll.cuPointerGetAttribute
        self._attr.restype, self._attr.argtypes = ctypes.c_int, [vp, ctypes.c_int, u64]
        self._capturing = dll.cuStreamIsCapturing
        self._capturing.restype, self._capturing.argtypes = ctypes.c_int, [u64, P(ctypes.c_int)]

    def device_of(self, ptr: int) -> int:
        """The device ordinal of a device (or managed) pointer; -1 when the
        driver does not know it."""
        n = ctypes.c_int(-1)
        if self._attr(ctypes.byref(n), self.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) != 0:
            return -1
        return n.value

    def capturing(self, stream: int) -> bool:
        """Whether stream is being captured into a graph (False when the
        driver cannot tell, e.g. no context current on this thread)."""
        st = ctypes.c_int(0)
        return self._capturing(stream, ctypes.byref(st)) == 0 and st.value != 0


_driver: Driver | None = None
_driver_tried = False
_driver_lock = threading.Lock()  # not _lock: lib() asks for the driver under _lock


def driver() -> Driver | None:
    """The CUDA driver, initialised (cuInit(0) returned 0), or None: no
    libcuda.so.1, no device, or $SCATTERKIT_CUDA=0."""
    global _driver, _driver_tried
    if not _driver_tried:
        with _driver_lock:
            if not _driver_tried:
                _driver = _load_driver()
                _driver_tried = True
    return _driver


def _load_driver() -> Driver | None:
    if os.environ.get(ENV_CUDA, "").lower() in ("0", "off", "no", "false"):
        return None
    try:
        dll = ctypes.CDLL("libcuda.so.1")
        init = dll.cuInit
    except (OSError, AttributeError):
        return None
    init.restype, init.argtypes = ctypes.c_int, [ctypes.c_uint]
    if init(0) != 0:
        return None
    try:
        return Driver(dll)
    except AttributeError:  # a driver too old for cuStreamIsCapturing
        return None


class Lib:
    """The loaded library: one attribute per export, with argtypes set,
    plus ``lookup_raw``, ``lookupv_raw`` and ``cuda_lookupv_raw``
    (sk_lookup, sk_lookupv and sk_cuda_lookupv without argtypes, for the
    hot paths)."""

    def __init__(self, path: str):
        self.path = path
        self.cuda = os.path.basename(path) == CUDA_LIB_NAME  # the CUDA library (its lookups need the driver)
        self.dll = ctypes.CDLL(path)
        for name, (res, args) in _SIGNATURES.items():
            f = getattr(self.dll, name)
            f.restype, f.argtypes = res, args
            setattr(self, name[3:], f)
        raw = self.dll["sk_lookup"]  # a new function object, argtypes unset
        raw.restype = i32
        self.lookup_raw = raw
        rawv = self.dll["sk_lookupv"]  # likewise: two pointers per call
        rawv.restype = i32
        self.lookupv_raw = rawv
        rawc = self.dll["sk_cuda_lookupv"]
        rawc.restype = i32
        self.cuda_lookupv_raw = rawc
        v = self.abi_version()
        if v != ABI_VERSION:
            raise ImportError(f"scatterkit: {path} has C ABI version {v}, this package needs {ABI_VERSION}")


_lib: Lib | None = None
_lock = threading.Lock()


def library_path() -> str:
    """The library to load: in $SCATTERKIT_LIB (a file, or a directory) or
    else the package's directory, libscatterkit_cuda.so where it exists
    and the CUDA driver initialises, else libscatterkit.so. A file named
    by $SCATTERKIT_LIB is taken as it is, except that the CUDA library is
    replaced by libscatterkit.so beside it where the driver does not
    initialise (loading it then would exit the process)."""
    p = os.environ.get(ENV_LIB)
    if p and not os.path.isdir(p):
        if os.path.basename(p) == CUDA_LIB_NAME and driver() is None:
            return os.path.join(os.path.dirname(p), LIB_NAME)
        return p
    d = p or os.path.dirname(os.path.abspath(__file__))
    cuda = os.path.join(d, CUDA_LIB_NAME)
    if os.path.exists(cuda) and driver() is not None:
        return cuda
    return os.path.join(d, LIB_NAME)


def lib() -> Lib:
    """The library, loaded on first call (ImportError when absent)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                path = library_path()
                if not os.path.exists(path):
                    raise ImportError(
                        f"scatterkit: {path} not found: install the package with pip (it builds the "
                        f"library with Go) or point ${ENV_LIB} at a libscatterkit.so built by "
                        "scripts/build-capi.sh"
                    )
                _lib = Lib(path)
    return _lib


def check(rc: int, err: sk_error, what: str = "") -> None:
    """Raise error(rc, err) unless rc is 0."""
    if rc:
        raise error(rc, err, what)
