"""The RFC's table API, CPU side (issue 16): every bullet of the contract.

Outputs start poisoned with random bytes: a lookup must write exactly the
rows of ids other than -1, and a failed call must write nothing.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from conftest import poisoned, random_rows

from scatterkit.engram import (
    EngramStore,
    NoConversionError,
    RowIDError,
    StoreClosedError,
    TableExistsError,
    TableSpec,
    UnknownTableError,
)

R = 264


def expect(rows_by_col, ids, before, offsets=None):
    """What a lookup of ids ([T,K]) into a token-major copy of before must give."""
    want = before.copy()
    t, k = ids.shape
    for ti in range(t):
        for ki in range(k):
            i = int(ids[ti, ki])
            if i == -1:
                continue
            want[ti, ki] = rows_by_col[ki][i - (0 if offsets is None else int(offsets[ki]))]
    return want


def rand_ids(rng, t, sizes, dtype=np.int64, skip=0.2):
    ids = np.stack([rng.integers(0, n, size=t) for n in sizes], axis=1).astype(dtype)
    ids[rng.random(ids.shape) < skip] = -1
    return ids


# ---- construction and specs


def test_open_and_specs(make_store):
    s, _ = make_store({"ngram2": (1000, R), "ngram3": (17, 8)}, populate=False)
    assert s.get_table_spec("ngram2") == TableSpec(1000, R, False)
    assert s.get_table_spec("ngram3") == (17, 8, False)
    assert s.tables == ("ngram2", "ngram3")
    with pytest.raises(KeyError):
        s.get_table_spec("nope")


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        (dict(), ValueError),  # no tables
        (dict(tables={}), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": 8}}), ValueError),  # no local_dir or remote
        (dict(tables={"a": {"num_rows": 0, "row_bytes": 8}}, local_dir="X"), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": -1}}, local_dir="X"), ValueError),
        (dict(tables={"a": {"num_rows": 10}}, local_dir="X"), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": 8, "x": 1}}, local_dir="X"), ValueError),
        (dict(tables={"bad/name": {"num_rows": 10, "row_bytes": 8}}, local_dir="X"), ValueError),
        (dict(tables={".hidden": {"num_rows": 10, "row_bytes": 8}}, local_dir="X"), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": 8}}, namespace="no/slash", local_dir="X"), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": 8}}, local_dir="X", remote="tcp://127.0.0.1:1"), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": 8}}, remote="127.0.0.1:1"), ValueError),
        (dict(tables={"a": {"num_rows": 10, "row_bytes": 8}}, local_dir="X", pin="sometimes"), ValueError),
        (dict(tables={"a": "10x8"}, local_dir="X"), TypeError),
        (dict(tables={1: {"num_rows": 10, "row_bytes": 8}}, local_dir="X"), TypeError),
    ],
)
def test_bad_config(tmp_path, kwargs, exc):
    if kwargs.get("local_dir") == "X":
        kwargs["local_dir"] = str(tmp_path)
    with pytest.raises(exc):
        EngramStore(**kwargs)


def test_spec_objects_accepted(tmp_path):
    with EngramStore(tables={"a": TableSpec(5, 3)}, namespace="n", local_dir=tmp_path) as s:
        assert s.get_table_spec("a") == (5, 3, False)


# ---- populate


def test_populate_numpy_publishes_once(make_store, rng):
    s, rows = make_store({"t": (300, R)})
    assert s.get_table_spec("t").populated
    with pytest.raises(FileExistsError) as e:
        s.populate("t", random_rows(rng, 300, R))
    assert isinstance(e.value, TableExistsError)
    out, _ = poisoned(rng, (1, 1, R))
    s.lookup(("t",), np.array([[299]]), out)
    assert (out[0, 0] == rows["t"][299]).all()  # the first rows stay


def test_populate_sources(make_store, rng, torch):
    tables = {"np2d": (50, 16), "np1d": (50, 16), "bytes": (50, 16), "bytearray": (50, 16), "torch": (50, 16), "mv": (50, 16)}
    s, _ = make_store(tables, populate=False)
    want = {n: random_rows(rng, 50, 16) for n in tables}
    s.populate("np2d", want["np2d"])
    s.populate("np1d", want["np1d"].reshape(-1))
    s.populate("bytes", want["bytes"].tobytes())
    s.populate("bytearray", bytearray(want["bytearray"].tobytes()))
    s.populate("torch", torch.from_numpy(want["torch"]))
    s.populate("mv", memoryview(want["mv"].tobytes()))
    ids = rng.integers(0, 50, size=(20, 1))
    for n in tables:
        out, _ = poisoned(rng, (20, 1, 16))
        s.lookup((n,), ids, out)
        assert (out[:, 0] == want[n][ids[:, 0]]).all(), n


def test_populate_stream(make_store, rng, torch):
    s, _ = make_store({"big": (1000, R)}, populate=False)
    rows = random_rows(rng, 1000, R)
    flat = rows.reshape(-1)
    # chunks of mixed kinds and sizes, not aligned to rows
    cuts = sorted(rng.choice(np.arange(1, flat.size), size=7, replace=False))
    parts = np.split(flat, cuts)
    kinds = [lambda p: p, lambda p: p.tobytes(), lambda p: torch.from_numpy(p.copy()), lambda p: bytearray(p.tobytes())]
    s.populate("big", (kinds[i % len(kinds)](p) for i, p in enumerate(parts)))
    ids = rng.integers(0, 1000, size=(64, 3))
    out, _ = poisoned(rng, (64, 3, R))
    s.lookup(("big",) * 3, ids, out)
    assert (out == rows[ids]).all()


def test_populate_stream_aborts_on_error(make_store, rng):
    s, _ = make_store({"t": (100, 8)}, populate=False)
    rows = random_rows(rng, 100, 8)

    def broken():
        yield rows[:50]
        raise OSError("source went away")

    with pytest.raises(OSError, match="source went away"):
        s.populate("t", broken())
    assert not s.get_table_spec("t").populated
    with pytest.raises(ValueError):  # short: nothing published
        s.populate("t", iter([rows[:99]]))
    assert not s.get_table_spec("t").populated
    with pytest.raises(ValueError):  # long: refused before it lands
        s.populate("t", iter([rows, rows[:1]]))
    assert not s.get_table_spec("t").populated
    with pytest.raises(ValueError):  # a bad chunk
        s.populate("t", iter([rows[:50], rows[50:].astype(np.int16)]))
    assert not s.get_table_spec("t").populated
    s.populate("t", iter([rows[:50], rows[50:]]))  # then a whole stream works
    assert s.get_table_spec("t").populated


def test_populate_rejects(make_store, rng):
    s, _ = make_store({"t": (10, 8)}, populate=False)
    rows = random_rows(rng, 10, 8)
    with pytest.raises(ValueError):
        s.populate("t", rows[:9])
    with pytest.raises(ValueError):
        s.populate("t", rows.astype(np.float32))
    with pytest.raises(ValueError):
        s.populate("t", np.zeros((10, 16), np.uint8)[:, ::2])
    with pytest.raises(ValueError):
        s.populate("t", rows.reshape(5, 16))
    with pytest.raises(TypeError):
        s.populate("t", rows.tolist()[0][0])
    with pytest.raises(KeyError):
        s.populate("nope", rows)
    assert not s.get_table_spec("t").populated


# ---- lookups


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_lookup_token_major(make_store, rng, dtype):
    sizes = {"a": (500, R), "b": (37, R), "c": (1, R)}
    s, rows = make_store(sizes)
    names = ("a", "b", "a", "c", "b")
    ids = rand_ids(rng, 40, [sizes[n][0] for n in names], dtype)
    out, before = poisoned(rng, (40, len(names), R))
    assert s.lookup(names, ids, out) is None
    assert (out == expect([rows[n] for n in names], ids, before)).all()


def test_lookup_head_major_and_views(make_store, rng):
    sizes = {"a": (300, R), "b": (200, R)}
    s, rows = make_store(sizes)
    names = ("a", "b", "b")
    cols = [rows[n] for n in names]
    t, k = 9, len(names)
    ids = rand_ids(rng, t, [sizes[n][0] for n in names])

    hm, before = poisoned(rng, (k, t, R))  # [K,T,R]
    s.lookup(names, ids, hm)
    assert (hm.transpose(1, 0, 2) == expect(cols, ids, before.transpose(1, 0, 2))).all()

    big, before = poisoned(rng, (t, 2 * k + 1, R + 7))  # a strided view inside a larger buffer
    view = big[:, 1::2, 3 : 3 + R]
    s.lookup(names, ids, view)
    want = before.copy()
    want[:, 1::2, 3 : 3 + R] = expect(cols, ids, before[:, 1::2, 3 : 3 + R])
    assert (big == want).all()

    rev, before = poisoned(rng, (t, k, R))  # negative strides: the Go store refuses them
    with pytest.raises(ValueError, match="negative"):
        s.lookup(names, ids, rev[::-1, ::-1])
    assert (rev == before).all()

    hmv, before = poisoned(rng, (k, t, R))  # head-major passed as a [T,K,R] view
    s.lookup(names, ids, hmv.transpose(1, 0, 2))
    assert (hmv.transpose(1, 0, 2) == expect(cols, ids, before.transpose(1, 0, 2))).all()


def test_lookup_square_is_token_major(make_store, rng):
    s, rows = make_store({"a": (50, 16)})
    ids = rand_ids(rng, 3, [50] * 3, skip=0)
    out, before = poisoned(rng, (3, 3, 16))
    s.lookup(("a",) * 3, ids, out)
    assert (out == rows["a"][ids]).all()


def test_lookup_minus_one_leaves_rows(make_store, rng):
    s, rows = make_store({"a": (100, R)})
    ids = np.full((5, 4), -1, np.int64)
    out, before = poisoned(rng, (5, 4, R))
    s.lookup(("a",) * 4, ids, out)
    assert (out == before).all()
    ids[2, 1] = 7
    s.lookup(("a",) * 4, ids, out)
    want = before.copy()
    want[2, 1] = rows["a"][7]
    assert (out == want).all()


@pytest.mark.parametrize("form", ["list", "tuple", "ndarray", "torch"])
def test_lookup_offsets(make_store, rng, form, request):
    # SGLang's layout: one table holding every column's rows, global ids
    s, rows = make_store({"all": (3 * 40, R), "small": (40, R)})
    k = 6
    offs = [0, 40, 80, 0, 40, 80]
    ids = rng.integers(0, 40, size=(11, k)) + np.array(offs)
    ids[0, 0] = -1
    arg = {"list": list, "tuple": tuple, "ndarray": lambda o: np.array(o, np.int64)}.get(form)
    if form == "torch":
        torch = request.getfixturevalue("torch")
        arg = lambda o: torch.tensor(o, dtype=torch.int64)
    out, before = poisoned(rng, (11, k, R))
    s.lookup(("all",) * k, ids, out, offsets=arg(offs))
    assert (out == expect([rows["all"]] * k, ids, before, offsets=offs)).all()
    s.lookup(("all",) * k, ids, out, offsets=arg(offs))  # the hot path: offsets kept
    assert (out == expect([rows["all"]] * k, ids, before, offsets=offs)).all()
    # an id below its column's offset is out of range: nothing written
    ids2 = ids.copy()
    ids2[3, 4] = 39
    out2, before2 = poisoned(rng, (11, k, R))
    with pytest.raises(IndexError):
        s.lookup(("all",) * k, ids2, out2, offsets=arg(offs))
    assert (out2 == before2).all()
    with pytest.raises(ValueError):
        s.lookup(("all",) * k, ids, out2, offsets=arg(offs[:-1]))
    with pytest.raises(ValueError):
        s.lookup(("all",) * k, ids, out2, offsets=np.array(offs, np.int32))
    assert (out2 == before2).all()


def test_lookup_empty(make_store, rng):
    s, _ = make_store({"a": (10, 8)})
    out = np.empty((0, 2, 8), np.uint8)
    assert s.lookup(("a", "a"), np.empty((0, 2), np.int64), out) is None
    with pytest.raises(KeyError):  # names are still checked
        s.lookup(("a", "zz"), np.empty((0, 2), np.int64), out)


def test_lookup_list_of_names_and_cache(make_store, rng):
    s, rows = make_store({"a": (60, 8), "b": (60, 8)})
    names = ["a", "b"]
    ids = rand_ids(rng, 4, [60, 60], skip=0)
    out, _ = poisoned(rng, (4, 2, 8))
    s.lookup(names, ids, out)
    assert (out[:, 1] == rows["b"][ids[:, 1]]).all()
    names[1] = "a"  # a list may change between calls
    s.lookup(names, ids, out)
    assert (out[:, 1] == rows["a"][ids[:, 1]]).all()
    assert len(s._cols) == 2  # one column set per distinct tuple of names
    s.lookup(("a", "a"), ids, out)
    assert len(s._cols) == 2


def test_hot_path_sees_changes(make_store, rng, torch):
    """The per-thread cache of the last call's arguments never serves a
    stale pointer, shape or value."""
    s, rows = make_store({"a": (100, 8)})
    names = ("a",) * 4
    ids = rand_ids(rng, 6, [100] * 4, skip=0)
    out, _ = poisoned(rng, (6, 4, 8))
    for _ in range(2):
        s.lookup(names, ids, out)
    ids[:] = rand_ids(rng, 6, [100] * 4, skip=0)  # new values, same array
    s.lookup(names, ids, out)
    assert (out == rows["a"][ids]).all()
    ids.shape = (3, 8)  # reshaped in place: now K = 8 does not match
    with pytest.raises(ValueError):
        s.lookup(names, ids, out)
    ids.shape = (6, 4)
    s.lookup(names, ids, out)
    # torch: a resize_ moves the storage (compared with torch.equal: a
    # tensor shared with numpy cannot be resized)
    want = torch.from_numpy(rows["a"][ids])
    tids, tout = torch.tensor(ids), torch.zeros((6, 4, 8), dtype=torch.uint8)
    s.lookup(names, tids, tout)
    s.lookup(names, tids, tout)
    assert torch.equal(tout, want)
    tout.resize_(60, 4, 8)
    with pytest.raises(ValueError):
        s.lookup(names, tids, tout)
    tout.resize_(6, 4, 8)
    tout.zero_()
    s.lookup(names, tids, tout)
    assert torch.equal(tout, want)
    p = tids.data_ptr()
    tids.resize_(100000, 4)  # grows: new storage
    assert tids.data_ptr() != p
    tids.zero_()
    tids.resize_(6, 4)
    s.lookup(names, tids, tout)
    assert torch.equal(tout, torch.from_numpy(rows["a"][np.zeros((6, 4), np.int64)]))


def test_hot_path_new_ids_arrays(make_store, rng):
    """A new ids array per call (same shape and dtype) goes through the
    prepared arguments: each call reads its own array, an old array used
    again is read again, -1 still skips, and ids that overlap the output,
    are strided or of another dtype take the checked path."""
    s, rows = make_store({"a": (300, 16), "b": (300, 16)})
    names = ("a", "b")
    out, _ = poisoned(rng, (5, 2, 16))
    olds = []
    for i in range(6):
        ids = rand_ids(rng, 5, [300, 300], skip=0.2)
        before = out.copy()
        s.lookup(names, ids, out)
        want = before.copy()
        for k, n in enumerate(names):
            hit = ids[:, k] != -1
            want[hit, k] = rows[n][ids[hit, k]]
        assert (out == want).all(), i
        olds.append(ids)
    s.lookup(names, olds[1], out)  # an earlier array again
    for k, n in enumerate(names):
        hit = olds[1][:, k] != -1
        assert (out[hit, k] == rows[n][olds[1][hit, k]]).all()
    with pytest.raises(ValueError, match="int32 or int64"):
        s.lookup(names, olds[2].astype(np.float64), out)
    with pytest.raises(ValueError, match="C-contiguous"):
        s.lookup(names, np.zeros((5, 4), np.int64)[:, ::2], out)
    buf = np.zeros(5 * 2 * 16 + 80, np.uint8)  # ids inside the output's bytes
    o2 = buf[:160].reshape(5, 2, 16)
    s.lookup(names, olds[0], o2)
    with pytest.raises(ValueError, match="overlaps"):
        s.lookup(names, buf[:80].view(np.int64).reshape(5, 2), o2)
    with pytest.raises(ValueError, match="overlaps"):
        s.lookup(names, buf[80:160].view(np.int64).reshape(5, 2), o2)


def test_lookup_torch(make_store, rng, torch):
    s, rows = make_store({"a": (90, R), "b": (30, R)})
    names = ("b", "a", "a")
    for dt in (torch.int32, torch.int64):
        ids = torch.from_numpy(rand_ids(rng, 7, [30, 90, 90]).astype(np.int64)).to(dt)
        out_np, before = poisoned(rng, (7, 3, R))
        out = torch.from_numpy(out_np)
        s.lookup(names, ids, out)
        assert (out.numpy() == expect([rows[n] for n in names], ids.numpy(), before)).all()
        hm = torch.from_numpy(poisoned(rng, (3, 7, R))[0])
        before = hm.clone()
        s.lookup(names, ids, hm)
        assert (hm.permute(1, 0, 2).numpy() == expect([rows[n] for n in names], ids.numpy(), before.permute(1, 0, 2).numpy())).all()
    with pytest.raises(ValueError):  # non-contiguous ids
        s.lookup(names, torch.zeros((3, 7), dtype=torch.int64).t(), out)


def test_lookup_other_array_kinds(make_store, rng):
    """__array_interface__, DLPack and buffer-protocol objects."""
    s, rows = make_store({"a": (40, 16)})
    ids = rand_ids(rng, 5, [40] * 2)

    class Iface:
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    for wrap_ids, wrap_out in [(Iface, Iface), (DL, DL), (lambda a: a, lambda a: memoryview(a))]:
        out, before = poisoned(rng, (5, 2, 16))
        s.lookup(("a", "a"), wrap_ids(ids), wrap_out(out))
        assert (out == expect([rows["a"]] * 2, ids, before)).all()
    buf = bytearray(5 * 2 * 16)
    s.lookup(("a", "a"), ids, memoryview(buf).cast("B", (5, 2, 16)))
    got = np.frombuffer(buf, np.uint8).reshape(5, 2, 16)
    assert (got == expect([rows["a"]] * 2, ids, np.zeros_like(got))).all()


# ---- errors: the exception a user expects, and nothing written


def test_lookup_errors_write_nothing(make_store, rng):
    s, rows = make_store({"a": (50, 16), "b": (20, 16), "c": (20, 8)})
    s.get_table_spec("a")
    names = ("a", "b")
    good = rand_ids(rng, 4, [50, 20], skip=0)
    out, before = poisoned(rng, (4, 2, 16))

    def fails(exc, table_ids=names, ids=good, output=out, **kw):
        with pytest.raises(exc) as e:
            s.lookup(table_ids, ids, output, **kw)
        assert (out == before).all(), "a failed lookup wrote"
        return e.value

    bad = good.copy()
    bad[2, 1] = 20  # one past table b
    e = fails(IndexError, ids=bad)
    assert isinstance(e, RowIDError) and (e.t, e.k, e.id) == (2, 1, 20)
    assert "(t=2, k=1)" in str(e) and "20" in str(e)
    bad[2, 1] = -2
    e = fails(IndexError, ids=bad)
    assert (e.t, e.k, e.id) == (2, 1, -2)
    fails(ValueError, ids=good.astype(np.int16))
    fails(ValueError, ids=good.astype(np.uint64))
    fails(ValueError, ids=good.astype(np.float64))
    fails(ValueError, ids=good.astype(">i8"))
    fails(TypeError, ids=good.tolist())
    fails(NoConversionError, ids=tuple(map(tuple, good)))
    fails(ValueError, ids=np.asfortranarray(np.concatenate([good, good])).T[:, :4].T)  # non-contiguous
    fails(ValueError, ids=good[:, :1])  # K mismatch
    fails(ValueError, ids=good.reshape(-1))
    fails(KeyError, table_ids=("a", "nope"))
    fails(UnknownTableError, table_ids=("a", "nope"))
    fails(ValueError, table_ids=("a", "c"))  # mixed row sizes
    fails(TypeError, table_ids="ab")
    fails(TypeError, table_ids=("a", 3))
    fails(ValueError, table_ids=())
    fails(ValueError, output=out.view(np.int8))
    fails(ValueError, output=out[:, :, :8])
    fails(ValueError, output=out[:3])
    fails(ValueError, output=out[..., ::-1])  # row bytes reversed
    fails(TypeError, output=out.tolist())
    ro = out.view()
    ro.flags.writeable = False
    fails(ValueError, output=ro)
    fails(ValueError, output=bytes(out))
    overlap = np.lib.stride_tricks.as_strided(out, shape=(4, 2, 16), strides=(16, 8, 1))  # rows overlap
    fails(ValueError, output=overlap)
    # output overlapping the ids
    blob = np.zeros(4 * 2 * 16 + 64, np.uint8)
    ids_in = blob[:64].view(np.int64).reshape(4, 2)
    ids_in[:] = good
    with pytest.raises(ValueError):
        s.lookup(names, ids_in, blob[:128].reshape(4, 2, 16))


def test_lookup_unpopulated(make_store, rng):
    s, _ = make_store({"a": (10, 8)}, populate=False)
    out, before = poisoned(rng, (1, 1, 8))
    with pytest.raises(RuntimeError):
        s.lookup(("a",), np.zeros((1, 1), np.int64), out)
    assert (out == before).all()


class FakeCudaTensor:
    """torch-like, on CUDA device 0 (nothing behind its pointer)."""

    is_cuda = True
    dtype = "torch.uint8"
    layout = "torch.strided"

    class device:
        type = "cuda"
        index = 0

    def __init__(self, shape=(1, 1, 8), item=1, dtype="torch.uint8", ptr=0x7F0000000000):
        self.shape, self.item, self.dtype, self.ptr = shape, item, dtype, ptr

    def data_ptr(self):
        return self.ptr

    def stride(self):
        acc, out = 1, []
        for d in reversed(self.shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def element_size(self):
        return self.item


def test_cuda_descriptions():
    """Device memory is described with its device, and refused where host
    memory is read (a pointer there must not be dereferenced)."""
    from scatterkit._arrays import describe, on_cuda

    x = FakeCudaTensor()
    assert on_cuda(x) and not on_cuda(np.zeros(3)) and not on_cuda(b"ab")
    with pytest.raises(ValueError, match="CUDA memory"):
        describe(x, "ids")
    a = describe(x, "ids", cuda=True)
    assert a.device == 0 and a.ptr == 0x7F0000000000 and a.shape == (1, 1, 8) and a.strides == (8, 8, 1)
    assert describe(np.zeros(3), "x", cuda=True).device == -1


def test_cuda_interface_without_driver(monkeypatch):
    """A __cuda_array_interface__ object where no CUDA driver initialises:
    NotImplementedError, never a host read of its pointer."""
    from scatterkit import _capi
    from scatterkit._arrays import describe

    monkeypatch.setattr(_capi, "_driver", None)
    monkeypatch.setattr(_capi, "_driver_tried", True)

    class FakeCupy:
        __cuda_array_interface__ = {"shape": (1, 1), "typestr": "<i8", "data": (0x1000, False), "version": 3}

    with pytest.raises(NotImplementedError, match="CUDA driver"):
        describe(FakeCupy(), "ids", cuda=True)
    with pytest.raises(NotImplementedError, match="CUDA driver"):
        describe(FakeCupy(), "ids")


def test_cuda_calls_on_cpu_library(make_store, rng):
    """Where only libscatterkit.so is loaded (no CUDA), CUDA calls raise
    NotImplementedError or ValueError and change nothing; CPU calls go on."""
    from scatterkit import engram

    s, rows = make_store({"a": (10, 8)})
    if s._lib.cuda:
        pytest.skip("the CUDA library is loaded: tests/test_cuda.py covers it")
    assert engram.cuda_device_count() == 0
    with pytest.raises(NotImplementedError, match="libscatterkit_cuda"):
        s.lookup(("a",), FakeCudaTensor((1, 1), 8, "torch.int64", 0x7F0000100000), FakeCudaTensor())
    with pytest.raises(NotImplementedError, match="libscatterkit_cuda"):  # ids on the host, output on a device
        s.lookup(("a",), np.zeros((1, 1), np.int64), FakeCudaTensor())
    with pytest.raises(ValueError, match="CUDA memory"):  # ids on a device, output on the host
        s.lookup(("a",), FakeCudaTensor((1, 1), 8, "torch.int64"), np.zeros((1, 1, 8), np.uint8))
    with pytest.raises(NotImplementedError):
        s.empty(1, 1, like="cuda")
    with pytest.raises(NotImplementedError):
        s.warmup(device=0)
    s.warmup(device="cpu")
    s.check_status()  # no attachment: nothing to report
    s.detach_cuda()
    ids = np.array([[3]], np.int64)
    out, _ = poisoned(rng, (1, 1, 8))
    s.lookup(("a",), ids, out)
    assert (out[0, 0] == rows["a"][3]).all()


def test_cuda_options(tmp_path):
    with pytest.raises(ValueError, match="cuda="):
        EngramStore(tables={"a": {"num_rows": 1, "row_bytes": 8}}, local_dir=tmp_path, cuda="pinned")
    with pytest.raises(ValueError, match="cuda_async"):  # it chooses how host tables are read
        EngramStore(tables={"a": {"num_rows": 1, "row_bytes": 8}}, local_dir=tmp_path, cuda="device", cuda_async=True)


def test_stream_handles(make_store):
    """stream= accepts raw handles and stream objects, refuses the rest."""
    s, _ = make_store({"a": (10, 8)})

    class TorchStream:
        cuda_stream = 0x1234
        device = type("dev", (), {"index": 0})()

    class CupyStream:
        ptr = 0x5678

    assert s._stream_handle(7, 0, None) == 7
    assert s._stream_handle(TorchStream(), 0, None) == 0x1234
    assert s._stream_handle(CupyStream(), 0, None) == 0x5678
    with pytest.raises(ValueError, match="device 0"):
        s._stream_handle(TorchStream(), 1, None)
    with pytest.raises(TypeError):
        s._stream_handle(True, 0, None)
    with pytest.raises(TypeError):
        s._stream_handle("s", 0, None)
    with pytest.raises(ValueError):
        s._stream_handle(-1, 0, None)

    class Cai:
        def __init__(self, stream):
            self.__cuda_array_interface__ = {"shape": (1,), "typestr": "|u1", "data": (0, False), "version": 3, "stream": stream}

    # An array's own stream (torch's current one is for torch tensors only).
    assert s._stream_handle(None, 0, Cai(1)) == 0  # legacy default
    assert s._stream_handle(None, 0, Cai(2)) == 2  # per-thread default
    assert s._stream_handle(None, 0, Cai(0xABC)) == 0xABC
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():  # else torch's current stream
        assert s._stream_handle(None, 0, None) == 0


# ---- remove, close, lifetimes


def test_remove_and_repopulate(make_store, rng):
    s, rows = make_store({"a": (30, 8), "b": (30, 8)})
    ids = rand_ids(rng, 3, [30, 30], skip=0)
    out, _ = poisoned(rng, (3, 2, 8))
    s.lookup(("a", "b"), ids, out)
    s.remove("a")
    assert s.get_table_spec("a") == (30, 8, False)
    out, before = poisoned(rng, (3, 2, 8))
    with pytest.raises(RuntimeError):
        s.lookup(("a", "b"), ids, out)
    assert (out == before).all()
    with pytest.raises(RuntimeError):  # nothing to remove
        s.remove("a")
    with pytest.raises(KeyError):
        s.remove("nope")
    new = random_rows(rng, 30, 8)
    s.populate("a", new)
    s.lookup(("a", "b"), ids, out)  # the cached column set sees the new table
    assert (out[:, 0] == new[ids[:, 0]]).all() and (out[:, 1] == rows["b"][ids[:, 1]]).all()


def test_shared_directory(tmp_path, rng):
    """Stores of one directory share published tables; create-only holds across them."""
    kw = dict(tables={"a": {"num_rows": 20, "row_bytes": 8}}, namespace="shared", local_dir=tmp_path)
    rows = random_rows(rng, 20, 8)
    with EngramStore(**kw) as w:
        w.populate("a", rows)
        with EngramStore(**kw) as r:
            assert r.get_table_spec("a").populated
            with pytest.raises(FileExistsError):
                r.populate("a", rows)
            out = np.zeros((1, 1, 8), np.uint8)
            r.lookup(("a",), np.array([[19]]), out)
            assert (out[0, 0] == rows[19]).all()
    with EngramStore(**dict(kw, namespace="other")) as o:  # namespaces are apart
        assert not o.get_table_spec("a").populated


def test_close_and_use_after_close(make_store, rng):
    s, _ = make_store({"a": (10, 8)})
    ids = np.zeros((1, 1), np.int64)
    out = np.zeros((1, 1, 8), np.uint8)
    s.lookup(("a",), ids, out)  # warm the hot path
    s.close()
    s.close()  # idempotent
    assert s.closed
    calls = [
        lambda: s.lookup(("a",), ids, out),
        lambda: s.populate("a", np.zeros((10, 8), np.uint8)),
        lambda: s.get_table_spec("a"),
        lambda: s.remove("a"),
        lambda: s.empty(1, 1),
        lambda: s.warmup(),
        lambda: s.serve("tcp"),
    ]
    for c in calls:
        with pytest.raises(StoreClosedError):
            c()


def test_context_manager(tmp_path):
    with EngramStore(tables={"a": {"num_rows": 4, "row_bytes": 4}}, namespace="n", local_dir=tmp_path) as s:
        s.populate("a", np.arange(16, dtype=np.uint8))
    assert s.closed
    with pytest.raises(StoreClosedError):
        s.get_table_spec("a")


def test_empty_buffers(make_store, rng, torch):
    s, rows = make_store({"a": (70, R)})
    ids = rand_ids(rng, 6, [70] * 24)
    out = s.empty(6, 24)
    assert out.shape == (6, 24, R) and out.dtype == np.uint8 and out.flags.writeable
    out[:] = 0x5A
    s.lookup(("a",) * 24, ids, out)
    assert (out == expect([rows["a"]] * 24, ids, np.full_like(out, 0x5A))).all()
    hm = s.empty(24, 6)  # head-major
    s.lookup(("a",) * 24, ids, hm)
    t = s.empty(6, 24, like="torch")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and tuple(t.shape) == (6, 24, R)
    s.lookup(("a",) * 24, ids, t)
    assert (t.numpy()[ids != -1] == rows["a"][ids[ids != -1]]).all()
    assert s.empty(0, 24).shape == (0, 24, R)
    with pytest.raises(ValueError):
        s.empty(-1, 2)
    with pytest.raises(ValueError):
        s.empty(1, 1, like="jax")


def test_buffers_outlive_close(make_store, rng, torch):
    """Arrays from empty() stay valid memory after close (the native store
    is released with the last of them); lookups into them raise."""
    s, rows = make_store({"a": (10, 8)})
    out = s.empty(2, 3)
    t = s.empty(2, 3, like="torch")
    s.lookup(("a",) * 3, np.ones((2, 3), np.int64), out)
    native = s._native
    s.close()
    assert native.h != 0  # deferred: buffers live
    assert (out == rows["a"][1]).all()
    out[:] = 7
    t[:] = 9
    assert out.sum() == 7 * out.size and int(t.sum()) == 9 * t.numel()
    with pytest.raises(StoreClosedError):
        s.lookup(("a",) * 3, np.ones((2, 3), np.int64), out)
    view = out[1]
    del out
    assert native.h != 0  # a view keeps its buffer
    del view, t
    import gc

    gc.collect()
    assert native.h == 0  # the last buffer took the store with it


def test_store_dropped_without_close(tmp_path, rng):
    import gc

    from scatterkit import _capi

    s = EngramStore(tables={"a": {"num_rows": 4, "row_bytes": 4}}, namespace="n", local_dir=tmp_path)
    s.populate("a", np.arange(16, dtype=np.uint8))
    out = s.empty(1, 1)
    h = s._native.h

    def alive():
        return _capi.lib().table_spec(h, b"a", None, None, None, None) == 0

    del s
    gc.collect()
    assert alive()  # the buffer keeps the native store
    out[:] = 1
    del out
    gc.collect()
    assert not alive()


def test_warmup(make_store, rng):
    s, rows = make_store({"a": (10, 8)})
    s.warmup()
    s.warmup(("a", "a"))
    assert ("a", "a") in s._cols
    with pytest.raises(KeyError):
        s.warmup(("zz",))


def test_concurrent_lookups(make_store, rng):
    """Threads share a store; each thread's cached arguments are its own."""
    s, rows = make_store({"a": (500, R), "b": (300, R)})
    names = ("a", "b", "a", "b")
    errors = []
    seeds = rng.integers(0, 2**31, size=4)

    def work(seed):
        r = np.random.default_rng(int(seed))
        ids = np.stack([r.integers(0, 500, 16), r.integers(0, 300, 16), r.integers(0, 500, 16), r.integers(0, 300, 16)], axis=1)
        out = np.zeros((16, 4, R), np.uint8)
        want = expect([rows[n] for n in names], ids, out)
        try:
            for _ in range(200):
                out[:] = 0
                s.lookup(names, ids, out)
                if not (out == want).all():
                    errors.append("wrong rows")
                    return
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(x,)) for x in seeds]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_close_while_looking_up(make_store, rng):
    s, rows = make_store({"a": (1000, R)})
    stop = threading.Event()
    seen = []

    def work():
        ids = np.random.default_rng(1).integers(0, 1000, (256, 24))
        out = np.zeros((256, 24, R), np.uint8)
        while not stop.is_set():
            try:
                s.lookup(("a",) * 24, ids, out)
            except StoreClosedError:
                seen.append("closed")
                return

    th = threading.Thread(target=work)
    th.start()
    import time

    time.sleep(0.05)
    s.close()
    th.join(10)
    stop.set()
    assert seen == ["closed"]


def test_column_cache_eviction(make_store, rng, monkeypatch):
    """Past the cache's size the oldest column set leaves the cache, but a
    thread's cached call that holds it keeps working."""
    import scatterkit.engram as engram

    monkeypatch.setattr(engram, "_COLUMN_CACHE", 2)
    s, rows = make_store({"a": (40, 8), "b": (40, 8)})
    ids = rand_ids(rng, 3, [40, 40], skip=0)
    out, _ = poisoned(rng, (3, 2, 8))
    first = ("a", "b")
    s.lookup(first, ids, out)
    for names in (("b", "a"), ("a", "a"), ("b", "b")):
        s.lookup(names, ids, np.zeros((3, 2, 8), np.uint8))
    assert first not in s._cols and len(s._cols) == 2
    out[:] = 0
    s.lookup(first, ids, out)  # not the hot path any more (another call came between): rebuilt
    assert (out[:, 0] == rows["a"][ids[:, 0]]).all() and (out[:, 1] == rows["b"][ids[:, 1]]).all()
    hot = ("a", "b")
    s.lookup(hot, ids, out)
    for names in (("b", "a"), ("a", "a"), ("b", "b")):
        s._columns(names)  # evicts hot's set while this thread's cached call holds it
    assert hot not in s._cols
    out[:] = 0
    s.lookup(hot, ids, out)
    assert (out[:, 1] == rows["b"][ids[:, 1]]).all()
