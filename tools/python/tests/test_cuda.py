"""CUDA lookups from Python: torch (and cupy, DLPack) device outputs,
streams, events and graphs, over both attachment kinds (cuda="host":
zero-copy from the registered snapshots; cuda="device": device copies).

Run on the GPU machine by scripts/gpu-run.sh with REQUIRE_CUDA=1 (then a
missing GPU, CUDA library or CUDA torch fails instead of skipping).
Every test draws fresh random tables and ids (conftest's seeded rng) and
poisons its outputs, so an untouched row is told from a written one.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import random_rows

torch = pytest.importorskip("torch")

from scatterkit import engram  # noqa: E402
from scatterkit.engram import EngramStore, RowIDError, StoreClosedError  # noqa: E402

R = 264


def _need_cuda():
    why = None
    if not torch.cuda.is_available():
        why = "torch has no CUDA device"
    elif engram.cuda_device_count() == 0:
        from scatterkit import _capi

        why = f"scatterkit loaded {_capi.lib().path}, which has no CUDA device"
    if why:
        if os.environ.get("REQUIRE_CUDA") == "1":
            pytest.fail(f"REQUIRE_CUDA=1: {why}")
        pytest.skip(why)


@pytest.fixture
def cuda():
    _need_cuda()
    return torch.device("cuda", 0)


@pytest.fixture(params=["host", "device"])
def mode(request):
    return request.param


@pytest.fixture
def gstore(tmp_path, rng, cuda, mode):
    """gstore({name: N}, **kw) -> (store, {name: rows as numpy}): populated
    R-byte tables, the store in this test's CUDA mode."""
    made = []

    def make(tables, r=R, populate=True, **kw):
        kw.setdefault("cuda", mode)
        s = EngramStore(
            tables={n: {"num_rows": nr, "row_bytes": r} for n, nr in tables.items()},
            namespace="cuda-test",
            local_dir=str(tmp_path / f"engram{len(made)}"),
            **kw,
        )
        made.append(s)
        rows = {}
        for n, nr in tables.items() if populate else ():
            rows[n] = random_rows(rng, nr, r)
            s.populate(n, rows[n])
        return s, rows

    yield make
    torch.cuda.synchronize()
    for s in made:
        s.close()


def rand_ids(rng, t, sizes, offsets=None, skip=0.1, dtype=np.int64):
    """[T,K] ids, column k in [offsets[k], offsets[k] + sizes[k]), a
    fraction skip of them -1."""
    k = len(sizes)
    ids = np.stack([rng.integers(0, n, size=t) for n in sizes], axis=1).astype(np.int64)
    if offsets is not None:
        ids += np.asarray(offsets, np.int64)
    ids[rng.random((t, k)) < skip] = -1
    return ids.astype(dtype)


def expected(poison, names, rows, ids, offsets=None, head_major=False):
    """The output after the lookup: poison with every id's row written."""
    want = poison.copy()
    t, k = ids.shape
    for j, name in enumerate(names):
        off = 0 if offsets is None else offsets[j]
        col = ids[:, j].astype(np.int64)
        hit = col != -1
        src = rows[name][col[hit] - off]
        if head_major:
            want[j, hit] = src
        else:
            want[hit, j] = src
    return want


def poison_on(rng, shape, dev):
    p = rng.integers(0, 256, size=shape, dtype=np.uint8)
    return p, torch.from_numpy(p.copy()).to(dev)


def to_dev(a, dev):
    return torch.from_numpy(np.ascontiguousarray(a)).to(dev)


# ---- the lookup contract on the device


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_layouts_offsets_repeats(gstore, rng, cuda, dtype):
    """Token-major, head-major and a strided view; repeated table names;
    offsets; -1 untouched; int32 and int64 ids."""
    s, rows = gstore({"a": 500, "b": 300, "c": 70})
    names = ("a", "b", "a", "c", "b", "a")
    sizes = [rows[n].shape[0] for n in names]
    offsets = [0, 500, 800, 1100, 1170, 1470]
    T, K = 37, len(names)
    ids = rand_ids(rng, T, sizes, offsets, dtype=dtype)
    ids_d = to_dev(ids, cuda)

    p, out = poison_on(rng, (T, K, R), cuda)
    s.lookup(names, ids_d, out, offsets=offsets)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, names, rows, ids, offsets))

    p, out = poison_on(rng, (K, T, R), cuda)  # head-major
    s.lookup(names, ids_d, out, offsets=np.asarray(offsets, np.int64))
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, names, rows, ids, offsets, head_major=True))

    # A view inside a larger buffer: rows at column 1..K of K+3, bytes 8..8+R of R+24.
    p, big = poison_on(rng, (T, K + 3, R + 24), cuda)
    view = big[:, 1 : K + 1, 8 : 8 + R]
    s.lookup(list(names), ids_d, view, offsets=tuple(offsets))
    torch.cuda.synchronize()
    want = p.copy()
    want[:, 1 : K + 1, 8 : 8 + R] = expected(p[:, 1 : K + 1, 8 : 8 + R], names, rows, ids, offsets)
    np.testing.assert_array_equal(big.cpu().numpy(), want)
    s.check_status()


@pytest.mark.parametrize("cuda_async", [False, True])
def test_large_lookups_any_host_path(gstore, rng, cuda, mode, cuda_async):
    """A lookup of 24,576 rows over 24 columns: with cuda_async every host
    lookup is zero-copy; without it the attachment may gather it on the
    CPU or split it (its calibration decides). The bytes are the same,
    -1 rows untouched, in stream order. cuda_async settles how host tables
    are read, so a device-copy store refuses it."""
    if cuda_async and mode == "device":
        with pytest.raises(ValueError, match="cuda_async"):
            gstore({"a": 1}, cuda_async=True)
        return
    s, rows = gstore({"a": 20000, "b": 30000}, cuda_async=cuda_async)
    names = ("a", "b") * 12
    sizes = [rows[n].shape[0] for n in names]
    T, K = 1024, len(names)
    ids = rand_ids(rng, T, sizes, None, dtype=np.int64)
    ids_d = to_dev(ids, cuda)
    for _ in range(2):  # the first may calibrate the tables
        p, out = poison_on(rng, (T, K, R), cuda)
        s.lookup(names, ids_d, out)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(out.cpu().numpy(), expected(p, names, rows, ids, None))
    s.check_status()


def test_bad_id_reported_rows_untouched(gstore, rng, cuda):
    s, rows = gstore({"a": 100, "b": 100})
    T, K = 16, 2
    ids = rand_ids(rng, T, [100, 100], skip=0)
    ids[5, 1] = 100  # one past the end
    ids[9, 0] = -7
    p, out = poison_on(rng, (T, K, R), cuda)
    s.lookup(("a", "b"), to_dev(ids, cuda), out)  # enqueued; no error yet
    with pytest.raises(RowIDError) as e:
        s.check_status()
    assert (e.value.t, e.value.k) == (5, 1)  # the first in token-major order
    assert isinstance(e.value, IndexError)
    got = out.cpu().numpy()
    np.testing.assert_array_equal(got[5, 1], p[5, 1])
    np.testing.assert_array_equal(got[9, 0], p[9, 0])
    good = ids.copy()
    good[5, 1] = good[9, 0] = -1
    np.testing.assert_array_equal(got, expected(p, ("a", "b"), rows, good))
    s.check_status()  # the record was cleared


def test_strict_bad_id_writes_nothing(gstore, rng, cuda):
    s, rows = gstore({"a": 100}, cuda_strict=True)
    ids = rand_ids(rng, 32, [100], skip=0)
    ids[20, 0] = 1000
    p, out = poison_on(rng, (32, 1, R), cuda)
    s.lookup(("a",), to_dev(ids, cuda), out)
    with pytest.raises(RowIDError):
        s.check_status()
    np.testing.assert_array_equal(out.cpu().numpy(), p)
    ids[20, 0] = 3
    s.lookup(("a",), to_dev(ids, cuda), out)
    s.check_status()
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, ("a",), rows, ids))


def test_argument_errors_enqueue_nothing(gstore, rng, cuda):
    s, rows = gstore({"a": 50, "b": 50})
    T, K = 8, 2
    ids = rand_ids(rng, T, [50, 50], skip=0)
    ids_d = to_dev(ids, cuda)
    p, out = poison_on(rng, (T, K, R), cuda)
    bad = [
        (ValueError, lambda: s.lookup(("a", "b"), torch.from_numpy(ids), out)),  # ids on the host
        (ValueError, lambda: s.lookup(("a", "b"), ids, out)),  # numpy ids
        (ValueError, lambda: s.lookup(("a", "b"), ids_d.float(), out)),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d[:, :1].contiguous(), out)),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d.t(), out.transpose(0, 1))),  # ids not C-contiguous
        (ValueError, lambda: s.lookup(("a", "b"), ids_d, out.view(torch.int8))),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d, out[:, :, :-1])),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d, out[:, :, ::2])),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d, torch.empty(2 * R, dtype=torch.uint8, device=cuda).as_strided((T, K, R), (0, R, 1)))),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d, out, offsets=torch.zeros(2, dtype=torch.int64, device=cuda))),
        (ValueError, lambda: s.lookup(("a", "b"), ids_d, out, offsets=[0])),
        (TypeError, lambda: s.lookup(("a", "b"), ids_d, out, stream="s")),
        (KeyError, lambda: s.lookup(("a", "nope"), ids_d, out)),
    ]
    for cls, call in bad:
        with pytest.raises(cls):
            call()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), p)
    s.check_status()


# ---- streams, events, graphs


def test_stream_order_with_torch_kernels(gstore, rng, cuda):
    """On one stream, a lookup sees the ids a torch kernel wrote just
    before it, and a torch kernel after it sees its rows, though a long
    kernel delays them all; explicit stream, current stream and raw handle."""
    s, rows = gstore({"a": 4000})
    T = 512
    side = torch.cuda.Stream()
    for how in ("explicit", "current", "raw"):
        first = rand_ids(rng, T, [4000], skip=0)
        second = rand_ids(rng, T, [4000], skip=0.2)
        ids_d = to_dev(first, cuda)
        second_d = to_dev(second, cuda)
        p, out = poison_on(rng, (T, 1, R), cuda)
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # tens of ms on the GPU: the host runs far ahead
            ids_d.copy_(second_d)
            if how == "explicit":
                s.lookup(("a",), ids_d, out, stream=side)
            elif how == "current":
                s.lookup(("a",), ids_d, out)
            else:
                s.lookup(("a",), ids_d, out, stream=side.cuda_stream)
            after = out.clone()
        side.synchronize()
        np.testing.assert_array_equal(after.cpu().numpy(), expected(p, ("a",), rows, second), err_msg=how)
    s.check_status(side)


def test_event_orders_other_stream(gstore, rng, cuda):
    s, rows = gstore({"a": 1000})
    T = 256
    ids = rand_ids(rng, T, [1000])
    ids_d = to_dev(ids, cuda)
    p, out = poison_on(rng, (T, 1, R), cuda)
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(10_000_000)
        s.lookup(("a",), ids_d, out)
        done = torch.cuda.Event()
        done.record()
    with torch.cuda.stream(consumer):
        consumer.wait_event(done)
        copy = out.clone()
    consumer.synchronize()
    np.testing.assert_array_equal(copy.cpu().numpy(), expected(p, ("a",), rows, ids))


@pytest.mark.parametrize("T", [8, 1024])
def test_graph_replay_with_new_ids(gstore, rng, cuda, T):
    """warmup(), a lookup captured in torch.cuda.graph, replays gathering
    whatever ids the captured id tensor holds (T=1024, K=24: 24,576 rows,
    an ordered lookup from host tables with pool memory in the graph)."""
    names = tuple(f"t{i % 6}" for i in range(24))
    s, rows = gstore({f"t{i}": 3000 + 100 * i for i in range(6)})
    sizes = [rows[n].shape[0] for n in names]
    offsets = [int(x) for x in np.cumsum([0] + sizes[:-1])]
    s.warmup(names, device=0)
    ids_d = torch.zeros((T, len(names)), dtype=torch.int64, device=cuda)
    p, out = poison_on(rng, (T, len(names), R), cuda)
    first = rand_ids(rng, T, sizes, offsets)
    ids_d.copy_(to_dev(first, cuda))
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        s.lookup(names, ids_d, out, offsets=offsets)
    want = p
    for i in range(4):
        new = rand_ids(rng, T, sizes, offsets)
        ids_d.copy_(to_dev(new, cuda))
        g.replay()
        torch.cuda.synchronize()
        want = expected(want, names, rows, new, offsets)
        np.testing.assert_array_equal(out.cpu().numpy(), want, err_msg=f"replay {i}")
    del g
    s.check_status()


def test_capture_before_any_lookup_is_refused(tmp_path, rng, cuda):
    """The first CUDA lookup attaches the store, which a capture forbids:
    inside a capture without warmup() it raises, and afterwards the store
    works (eager and captured after warmup)."""
    s = EngramStore(tables={"a": {"num_rows": 100, "row_bytes": R}}, local_dir=str(tmp_path), cuda="device")
    rows = random_rows(rng, 100, R)
    s.populate("a", rows)
    ids = rand_ids(rng, 4, [100], skip=0)
    ids_d = to_dev(ids, cuda)
    p, out = poison_on(rng, (4, 1, R), cuda)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="warmup"):
        with torch.cuda.graph(g):
            s.lookup(("a",), ids_d, out)
    del g
    torch.cuda.synchronize()
    s.lookup(("a",), ids_d, out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, ("a",), {"a": rows}, ids))
    s.close()


# ---- dtypes and other array kinds


@pytest.mark.parametrize("kind", ["bfloat16", "float8_e4m3fn"])
def test_bf16_fp8_rows(gstore, rng, cuda, kind):
    """Rows that are bf16 or fp8 values (plus an fp32 scale for fp8, as
    Engram's 264-byte FP8+scale rows), viewed as bytes for the store and
    back as values in torch."""
    dt = getattr(torch, kind, None)
    if dt is None:
        pytest.skip(f"torch {torch.__version__} has no {kind}")
    N, T, K = 2000, 64, 3
    width = 128 if kind == "bfloat16" else 256  # 256 value bytes either way
    vals = torch.from_numpy(rng.standard_normal((N, width)).astype(np.float32)).to(dt)
    vb = vals.view(torch.uint8)
    if kind == "bfloat16":
        table, r = vb, 256
    else:
        scale = torch.from_numpy(rng.random((N, 2)).astype(np.float32))
        table, r = torch.cat([vb, scale.view(torch.uint8)], dim=1), 264  # 256 fp8 + two fp32 scales
    s, _ = gstore({"e": N}, r=r, populate=False)
    s.populate("e", table.numpy())
    ids = rand_ids(rng, T, [N] * K, skip=0)
    idx = torch.from_numpy(ids)
    out = torch.empty((T, K, r), dtype=torch.uint8, device=cuda)
    s.lookup(("e",) * K, to_dev(ids, cuda), out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), table[idx])
    got = out[..., :256].contiguous().view(dt)  # the values, dequantised by the caller
    want = vals[idx].to(cuda)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
    assert torch.equal(got.float(), want.float())  # as values too (no NaN: normal inputs)
    if kind != "bfloat16":
        sc = out[..., 256:].contiguous().view(torch.float32)
        assert torch.equal(sc.cpu(), scale[idx])
        deq = got.float() * sc[..., :1]  # an adapter's dequantisation, in torch
        assert torch.allclose(deq.cpu(), vals[idx].float() * scale[idx][..., :1])


def test_cupy_arrays(gstore, rng, cuda):
    """__cuda_array_interface__ (cupy): its current stream by default."""
    cp = pytest.importorskip("cupy")
    s, rows = gstore({"a": 600, "b": 600})
    T = 40
    ids = rand_ids(rng, T, [600, 600], dtype=np.int32)
    p = rng.integers(0, 256, size=(T, 2, R), dtype=np.uint8)
    out = cp.asarray(p)
    st = cp.cuda.Stream(non_blocking=True)
    with st:
        ids_c = cp.asarray(ids)
        s.lookup(("a", "b"), ids_c, out)  # the array's stream: cupy's current, st
        st.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), expected(p, ("a", "b"), rows, ids))
    p2 = rng.integers(0, 256, size=(T, 2, R), dtype=np.uint8)
    out2 = cp.asarray(p2)
    cp.cuda.Device(0).synchronize()
    s.lookup(("a", "b"), ids_c, out2, stream=st)  # a cupy Stream object
    st.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out2), expected(p2, ("a", "b"), rows, ids))


def test_dlpack_only_objects(gstore, rng, cuda):
    s, rows = gstore({"a": 300})

    class OnlyDLPack:  # what a framework other than torch and cupy may hand over
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    T = 20
    ids = rand_ids(rng, T, [300])
    p, out = poison_on(rng, (T, 1, R), cuda)
    torch.cuda.synchronize()
    s.lookup(("a",), OnlyDLPack(to_dev(ids, cuda)), OnlyDLPack(out), stream=0)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, ("a",), rows, ids))


# ---- lifetimes


def test_lifetime_and_reattach(gstore, rng, cuda, mode):
    s, rows = gstore({"a": 100, "late": 100})
    s.remove("late")  # declared, no rows: not mapped by the attach below
    ids = rand_ids(rng, 4, [100], skip=0)
    ids_d = to_dev(ids, cuda)
    p, out = poison_on(rng, (4, 1, R), cuda)
    s.lookup(("a",), ids_d, out)
    late = random_rows(rng, 100, R)
    s.populate("late", late)
    with pytest.raises(RuntimeError):  # populated after the attach: not mapped
        s.lookup(("late",), ids_d, out)
    with pytest.raises(RuntimeError):  # a mapped table cannot be removed
        s.remove("a")
    s.detach_cuda()  # waits for the device, unmaps; the next lookup attaches again
    s.lookup(("late",), ids_d, out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, ("late",), {"late": late}, ids))
    e = s.empty(4, 1, like="cuda")
    assert e.is_cuda and e.dtype == torch.uint8 and tuple(e.shape) == (4, 1, R)
    s.close()  # detaches (after the device's pending work)
    with pytest.raises(StoreClosedError):
        s.lookup(("a",), ids_d, out)


@pytest.fixture
def remote_pair(tmp_path, rng, cuda):
    """(owner, remote store, rows): two populated R-byte tables served
    over tcp and a remote store on them."""
    specs = {"a": {"num_rows": 3000, "row_bytes": R}, "b": {"num_rows": 1700, "row_bytes": R}}
    owner = EngramStore(tables=specs, namespace="cuda-remote", local_dir=str(tmp_path))
    rows = {n: random_rows(rng, sp["num_rows"], R) for n, sp in specs.items()}
    for n, r in rows.items():
        owner.populate(n, r)
    sv = owner.serve()
    rs = EngramStore(tables=specs, namespace="cuda-remote", remote=sv.url)
    yield owner, rs, rows
    torch.cuda.synchronize()
    rs.close()
    owner.close()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("head_major", [False, True])
@pytest.mark.parametrize("T", [1, 16, 512])
def test_remote_store_into_cuda(remote_pair, rng, cuda, dtype, head_major, T):
    """A remote store's lookup into a CUDA tensor, ids on the device: the
    owner's rows, -1 rows as they were, offsets applied, both layouts; the
    call returns with the rows in place (read on the same stream)."""
    owner, rs, rows = remote_pair
    names = ("a", "b", "a", "a", "b", "b", "a", "b")
    k = len(names)
    offsets = [0, 5000, 0, 0, 5000, 5000, 0, 5000]
    sizes = [rows[n].shape[0] for n in names]
    ids = rand_ids(rng, T, sizes, offsets, dtype=dtype)
    shape = (k, T, R) if head_major else (T, k, R)
    poison, out = poison_on(rng, shape, cuda)
    view = out.permute(1, 0, 2) if head_major else out
    rs.lookup(names, to_dev(ids, cuda), view, offsets=offsets)
    got = out.cpu().numpy()
    want = expected(poison, names, rows, ids, offsets, head_major=head_major)
    np.testing.assert_array_equal(got, want)
    rs.check_status()


def test_remote_store_cuda_errors(remote_pair, rng, cuda):
    """A bad id raises RowIDError at the call and writes nothing;
    empty(like="cuda") gives a device tensor the lookup fills; the store
    keeps working after each."""
    owner, rs, rows = remote_pair
    names = ("a", "b")
    ids = np.array([[1, 2], [3, 1700]], np.int64)  # b has 1700 rows
    poison, out = poison_on(rng, (2, 2, R), cuda)
    with pytest.raises(RowIDError):
        rs.lookup(names, to_dev(ids, cuda), out)
    np.testing.assert_array_equal(out.cpu().numpy(), poison)

    e = rs.empty(2, 2, like="cuda")
    assert e.is_cuda and tuple(e.shape) == (2, 2, R)
    ids[1, 1] = 5
    ids_d = to_dev(ids, cuda)
    before = e.cpu().numpy()
    rs.lookup(names, ids_d, e)
    np.testing.assert_array_equal(e.cpu().numpy(), expected(before, names, rows, ids))
    rs.lookup(names, ids_d, e)  # still works
    torch.cuda.synchronize()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_remote_store_cuda_graph(tmp_path, rng, cuda, dtype):
    """A remote store's lookup captured in torch.cuda.graph (T=16, K=24,
    offsets, -1 ids) replays with whatever ids the captured id tensor
    holds: the owner's rows every replay. A bad id in the id tensor leaves
    the output as it was and check_status() raises RowIDError; the owner
    closed between replays: the replay leaves the output as it was,
    check_status() raises, and the process and the device go on (an eager
    lookup raises; torch work runs)."""
    specs = {"a": {"num_rows": 3000, "row_bytes": R}, "b": {"num_rows": 1700, "row_bytes": R}}
    owner = EngramStore(tables=specs, namespace="cuda-graph", local_dir=str(tmp_path))
    rows = {n: random_rows(rng, sp["num_rows"], R) for n, sp in specs.items()}
    for n, r in rows.items():
        owner.populate(n, r)
    sv = owner.serve()
    # int32 ids with a proxy that never polls busily (capture_spin_us 0).
    remote = sv.url if dtype == np.int64 else {"transport": "tcp", "addr": sv.addr, "capture_spin_us": 0}
    rs = EngramStore(tables=specs, namespace="cuda-graph", remote=remote)
    try:
        T = 16
        names = tuple(("a", "b")[k % 2] for k in range(24))
        offsets = [(0, 5000)[k % 2] for k in range(24)]
        sizes = [rows[n].shape[0] for n in names]
        ids_d = to_dev(rand_ids(rng, T, sizes, offsets, dtype=dtype), cuda)
        p, out = poison_on(rng, (T, len(names), R), cuda)
        rs.warmup(names, device=0)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            rs.lookup(names, ids_d, out, offsets=offsets)
        want = p
        for i in range(4):
            new = rand_ids(rng, T, sizes, offsets, dtype=dtype)
            ids_d.copy_(to_dev(new, cuda))
            g.replay()
            torch.cuda.synchronize()
            want = expected(want, names, rows, new, offsets)
            np.testing.assert_array_equal(out.cpu().numpy(), want, err_msg=f"replay {i}")
        rs.check_status()
        bad = rand_ids(rng, T, sizes, offsets, dtype=dtype)
        bad[3, 1] = 5000 + 1700  # past b's rows
        ids_d.copy_(to_dev(bad, cuda))
        g.replay()
        with pytest.raises(RowIDError):
            rs.check_status()
        np.testing.assert_array_equal(out.cpu().numpy(), want)
        new = rand_ids(rng, T, sizes, offsets, dtype=dtype)
        ids_d.copy_(to_dev(new, cuda))
        g.replay()
        rs.check_status()
        want = expected(want, names, rows, new, offsets)
        np.testing.assert_array_equal(out.cpu().numpy(), want)
        owner.close()
        ids_d.copy_(to_dev(rand_ids(rng, T, sizes, offsets, dtype=dtype), cuda))
        g.replay()
        with pytest.raises(RuntimeError):
            rs.check_status()
        np.testing.assert_array_equal(out.cpu().numpy(), want)
        with pytest.raises(RuntimeError):
            rs.lookup(names, ids_d, out, offsets=offsets)
        x = torch.ones(1024, device=cuda)
        assert float((x * 2).sum()) == 2048.0
        del g
    finally:
        torch.cuda.synchronize()
        rs.close()
        owner.close()


def test_repeated_calls_and_moved_tensors(gstore, rng, cuda):
    """A repeated call (same tensors) takes the cached path: new ids written
    in place are read, a stream change is followed, and a tensor whose
    storage moved (set_) or a detach is noticed, never served stale."""
    s, rows = gstore({"a": 900, "b": 900})
    names = ("a", "b")
    T = 64
    ids_d = torch.zeros((T, 2), dtype=torch.int64, device=cuda)
    p, out = poison_on(rng, (T, 2, R), cuda)
    want = p
    side = torch.cuda.Stream()
    for i in range(6):
        new = rand_ids(rng, T, [900, 900])
        ids_d.copy_(to_dev(new, cuda))
        if i == 3:  # the output's storage moves: the cache must see it
            p2 = rng.integers(0, 256, size=(T, 2, R), dtype=np.uint8)
            out.set_(torch.from_numpy(p2).to(cuda))
            want = p2
        if i == 4:
            s.detach_cuda()  # the cached attachment handle is stale now
        torch.cuda.synchronize()
        with torch.cuda.stream(side if i % 2 else torch.cuda.current_stream()):
            s.lookup(names, ids_d, out)
        torch.cuda.synchronize()
        want = expected(want, names, rows, new)
        np.testing.assert_array_equal(out.cpu().numpy(), want, err_msg=f"call {i}")
    s.check_status()


def test_bench_replay_launches_torch_graph(gstore, rng, cuda):
    """sk_cuda_bench_replay launches torch's captured graph: the lookup it
    holds runs (with the ids in place at launch)."""
    s, rows = gstore({"a": 500})
    s.warmup(("a",), device=0)
    T = 8
    ids_d = torch.zeros((T, 1), dtype=torch.int64, device=cuda)
    p, out = poison_on(rng, (T, 1, R), cuda)
    st = torch.cuda.Stream()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=st):
        s.lookup(("a",), ids_d, out)
    if not hasattr(g, "raw_cuda_graph_exec"):
        pytest.skip(f"torch {torch.__version__} gives no raw CUgraphExec")
    new = rand_ids(rng, T, [500])
    ids_d.copy_(to_dev(new, cuda))
    torch.cuda.synchronize()
    sec = s.bench_replay(g, 5, stream=st)
    assert 0 < sec < 1
    np.testing.assert_array_equal(out.cpu().numpy(), expected(p, ("a",), rows, new))
    with pytest.raises(ValueError):
        s.bench_replay(g, 0, stream=st)
    del g
