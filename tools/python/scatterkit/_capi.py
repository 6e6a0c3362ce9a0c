"""ctypes bindings of libscatterkit.so, the C ABI of docs/capi.md.

Every function gets argtypes and restype here, once. The library is found
in the package directory (where ``pip install`` puts it) or at
``$SCATTERKIT_LIB`` (a file, or a directory holding libscatterkit.so), and
loaded on first use, so importing the package costs nothing and works
without it.

Errors: every export returns 0 or a negative code and fills an
``sk_error``; :func:`error` turns one into the Python exception a caller
expects (the table in docs/python.md).

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
ENV_LIB = "SCATTERKIT_LIB"


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
    "sk_server_close": (i32, [u64, P(sk_error)]),
    "sk_bench_lookup": (
        i32,
        [u64, u64, i64, i32, vp, i32, vp, i64, i64, i64, i64, vp, i64, P(i64), P(sk_error)],
    ),
}


class Lib:
    """The loaded library: one attribute per export, with argtypes set,
    plus ``lookup_raw`` and ``lookupv_raw`` (sk_lookup and sk_lookupv
    without argtypes, for the hot path)."""

    def __init__(self, path: str):
        self.path = path
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
        v = self.abi_version()
        if v != ABI_VERSION:
            raise ImportError(f"scatterkit: {path} has C ABI version {v}, this package needs {ABI_VERSION}")


_lib: Lib | None = None
_lock = threading.Lock()


def library_path() -> str:
    """Where the library is looked for: $SCATTERKIT_LIB, else the package."""
    p = os.environ.get(ENV_LIB)
    if p:
        return os.path.join(p, LIB_NAME) if os.path.isdir(p) else p
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), LIB_NAME)


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
