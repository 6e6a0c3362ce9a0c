"""Array descriptions (scatterkit._arrays) and the library binding (_capi)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from scatterkit import _arrays, _capi
from scatterkit._arrays import describe


def test_numpy_data_pointer():
    assert _arrays.np_data is _arrays._np_data_struct  # the fast path is in use on CPython
    base = np.arange(100, dtype=np.int64)
    for a in (base, base[7:], base[::3], base.reshape(10, 10)[2:, 3:].T, np.empty(0), np.zeros((2, 3), np.uint8, order="F")):
        assert _arrays.np_data(a) == a.__array_interface__["data"][0]


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24, dtype=np.int32).reshape(4, 6),
        lambda: np.arange(48, dtype=np.int64).reshape(6, 8)[1:5:2, ::-2],
        lambda: np.zeros((3, 4, 5), np.uint8).transpose(2, 0, 1),
        lambda: np.zeros((0, 4), np.int64),
    ],
)
def test_describe_agrees(make, torch):
    a = make()
    want = (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.name)

    class Iface:
        __array_interface__ = a.__array_interface__

    class DL:
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    kinds = [a, Iface()]
    if a.size:
        kinds.append(DL())
    if a.size and all(s >= 0 for s in a.strides):
        kinds.append(torch.from_numpy(a))
    for x in kinds:
        d = describe(x, "x")
        got = (d.ptr, tuple(d.shape), tuple(d.strides), d.dtype)
        assert (got[1], got[3]) == (want[1], want[3]), type(x)
        if a.size:  # an empty array's strides and pointer are anyone's guess
            assert got == want, type(x)
    assert describe(a, "x").c_contiguous() == a.flags.c_contiguous


def test_describe_buffers():
    b = bytearray(range(12))
    d = describe(b, "b")
    assert d.shape == (12,) and d.dtype == "uint8" and not d.readonly
    assert describe(bytes(12), "b").readonly
    mv = memoryview(b).cast("B", (3, 4))
    assert describe(mv, "mv").shape == (3, 4)
    import array

    d = describe(array.array("q", [1, 2, 3]), "a")
    assert d.dtype == "int64" and d.shape == (3,)


@pytest.mark.parametrize("x", [[1, 2], (1, 2), 3, 2.5, "ab", None, object()])
def test_describe_refuses_conversions(x):
    with pytest.raises(TypeError):
        describe(x, "x")


def test_non_native_byte_order():
    d = describe(np.zeros(3, ">i8"), "x")
    assert d.dtype != "int64" and "byte order" in d.dtype


def test_span_and_contiguity():
    a = np.zeros((4, 5, 6), np.uint8)
    v = a[1:3, ::2, 1:4]
    d = describe(v, "v")
    lo, hi = d.span()
    assert lo == _arrays.np_data(v) and hi == lo + 1 * 30 + 2 * 12 + 2 * 1 + 1
    assert not d.c_contiguous()
    assert describe(a[1:3], "x").c_contiguous()
    assert describe(a.reshape(4, 30)[:, None, :], "x").c_contiguous()  # a size-1 axis's stride does not matter
    assert not describe(a[:, :1], "x").c_contiguous()


def test_numpy_view_roundtrip(torch):
    t = torch.arange(20, dtype=torch.int64).reshape(4, 5)[:, 1:4]
    d = describe(t, "t")
    v = _arrays.numpy_view(d)
    assert (v == t.numpy()).all()


def test_library_path(tmp_path, monkeypatch):
    monkeypatch.setenv(_capi.ENV_LIB, str(tmp_path))
    assert _capi.library_path() == os.path.join(str(tmp_path), _capi.LIB_NAME)
    monkeypatch.setenv(_capi.ENV_LIB, "/x/y.so")
    assert _capi.library_path() == "/x/y.so"
    monkeypatch.delenv(_capi.ENV_LIB)
    assert _capi.library_path().endswith(os.path.join("scatterkit", _capi.LIB_NAME))


def test_import_is_lazy_and_torch_free():
    """Importing the package loads neither the library nor torch."""
    code = (
        "import sys, scatterkit, scatterkit.engram, scatterkit._capi as c; "
        "assert c._lib is None; assert 'torch' not in sys.modules; print('ok')"
    )
    env = dict(os.environ, SCATTERKIT_LIB="/nonexistent/libscatterkit.so")
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=src, env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_missing_library_is_an_import_error(tmp_path):
    code = (
        "import scatterkit.engram as e\n"
        "try:\n"
        "    e.EngramStore(tables={'a': {'num_rows': 1, 'row_bytes': 1}}, local_dir='.')\n"
        "except ImportError as x:\n"
        "    print('ImportError', 'not found' in str(x))\n"
    )
    env = dict(os.environ, SCATTERKIT_LIB=str(tmp_path / "missing.so"))
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=src, env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ImportError True", out.stderr


def test_error_mapping():
    e = _capi.sk_error()
    e.msg = b"engram: something"
    e.t, e.k, e.id = 3, 4, 99
    cases = {
        _capi.SK_EINVAL: ValueError,
        _capi.SK_EID: IndexError,
        _capi.SK_ENOTABLE: KeyError,
        _capi.SK_EEXIST: FileExistsError,
        _capi.SK_ECLOSED: RuntimeError,
        _capi.SK_EIO: RuntimeError,
        _capi.SK_ENOMEM: MemoryError,
        _capi.SK_ENOTSUP: NotImplementedError,
        -99: RuntimeError,
    }
    for rc, cls in cases.items():
        x = _capi.error(rc, e)
        assert isinstance(x, cls), rc
        assert "engram: something" in str(x)
    x = _capi.error(_capi.SK_EID, e)
    assert (x.t, x.k, x.id) == (3, 4, 99) and "(t=3, k=4)" in str(x) and isinstance(x, RuntimeError)
    assert str(_capi.error(_capi.SK_ENOTABLE, e)) == "engram: something"  # no KeyError quotes
    assert isinstance(_capi.error(_capi.SK_EEXIST, e), RuntimeError)  # for the layer API


def test_abi_version():
    lib = _capi.lib()
    assert lib.abi_version() == _capi.ABI_VERSION
    assert ctypes.sizeof(_capi.sk_error) == 4 + 4 + 3 * 8 + 1024
