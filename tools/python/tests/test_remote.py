"""Remote mode: a local store serves its tables (serve), a store opened
with remote= reads them over tcp and shm into registered memory from
empty(); the layer API's store_client reads them into any output."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import poisoned, random_rows

from scatterkit.engram import EngramStore, EngramStoreConfig, StoreClosedError

R = 264
TRANSPORTS = ["tcp", "shm"]


@pytest.fixture
def owner(make_store):
    s, rows = make_store({"a": (800, R), "b": (90, R), "empty": (10, R)}, populate=False, namespace="remote")
    rng = np.random.default_rng(7)
    rows = {"a": random_rows(rng, 800, R), "b": random_rows(rng, 90, R)}
    for n, r in rows.items():
        s.populate(n, r)
    return s, rows


def remote_store(url, names=("a", "b"), **kw):
    specs = {"a": (800, R), "b": (90, R), "empty": (10, R)}
    return EngramStore(
        tables={n: {"num_rows": specs[n][0], "row_bytes": R} for n in names}, namespace="remote", remote=url, **kw
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_lookup(owner, rng, transport, torch):
    s, rows = owner
    with s.serve(transport) as sv:
        assert sv.url.startswith(transport + "://")
        with remote_store(sv.url) as c:
            assert c.get_table_spec("a") == (800, R, True)
            names = ("a", "b", "a", "a")
            for t in (1, 5, 300):
                ids = np.stack([rng.integers(0, n, t) for n in (800, 90, 800, 800)], axis=1)
                ids[rng.random(ids.shape) < 0.2] = -1
                out = c.empty(t, 4)
                out[:] = 0x3C
                c.lookup(names, ids, out)
                for ti in range(t):
                    for k, n in enumerate(names):
                        want = 0x3C if ids[ti, k] == -1 else rows[n][ids[ti, k]]
                        assert (out[ti, k] == want).all()
            # head-major into registered memory, offsets, int32 ids, torch views
            ids = rng.integers(0, 90, (7, 4)).astype(np.int32)
            hm = c.empty(4, 7, like="torch")
            c.lookup(("b",) * 4, ids, hm)
            assert (hm.permute(1, 0, 2).numpy() == rows["b"][ids]).all()
            offs = np.array([0, 10, 20, 30], np.int64)
            out = c.empty(7, 4)
            c.lookup(("a",) * 4, ids + offs, out, offsets=offs)
            assert (out == rows["a"][ids]).all()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_errors(owner, rng, transport):
    s, rows = owner
    with s.serve(transport) as sv, remote_store(sv.url) as c:
        ids = rng.integers(0, 90, (3, 2))
        out = c.empty(3, 2)
        out[:] = 0x11
        before = out.copy()
        bad = ids.copy()
        bad[1, 1] = 90
        with pytest.raises(IndexError) as e:
            c.lookup(("a", "b"), bad, out)
        assert (e.value.t, e.value.k, e.value.id) == (1, 1, 90)
        assert (out == before).all()
        mine, mine_before = poisoned(rng, (3, 2, R))  # not registered: refused, untouched
        with pytest.raises(ValueError, match="registered"):
            c.lookup(("a", "b"), ids, mine)
        assert (mine == mine_before).all()
        with pytest.raises(KeyError):
            c.lookup(("a", "empty"), ids, out)  # the store did not open it
        with pytest.raises(NotImplementedError):  # a remote store is read-only
            c.populate("a", rows["a"])
        with pytest.raises(NotImplementedError):
            c.remove("a")
        assert (out == before).all()
        with pytest.raises(ValueError):
            c.serve("tcp")


def test_remote_open_errors(owner):
    s, _ = owner
    with s.serve("tcp") as sv:
        with pytest.raises(KeyError):  # not served (never populated)
            remote_store(sv.url, names=("a", "empty"))
        with pytest.raises(ValueError):  # a different spec
            EngramStore(tables={"a": {"num_rows": 801, "row_bytes": R}}, namespace="remote", remote=sv.url)
        with pytest.raises(ValueError):
            EngramStore(tables={"a": {"num_rows": 800, "row_bytes": R}}, namespace="remote", remote={"transport": "tcp"})
        with pytest.raises(ValueError):
            EngramStore(tables={"a": {"num_rows": 800, "row_bytes": R}}, namespace="remote", remote={"addr": sv.addr, "lanes": 2})
        with remote_store({"transport": "tcp", "addr": sv.addr, "buffer_bytes": 1 << 20}, names=("a",)) as c:
            c.empty(10, 24)  # 63 KiB of 1 MiB
            with pytest.raises(MemoryError):
                c.empty(100, 100)  # 2.6 MB: more than the registered memory
        with pytest.raises(ValueError):  # capture_spin_us is microseconds, an int >= 0
            EngramStore(tables={"a": {"num_rows": 800, "row_bytes": R}}, namespace="remote", remote={"addr": sv.addr, "capture_spin_us": -1})
        with remote_store({"transport": "tcp", "addr": sv.addr, "capture_spin_us": 0}, names=("a",)) as c:
            assert c.get_table_spec("a").populated
        with remote_store(sv, names=("a",)) as c:  # a Server object is a remote spec too
            assert c.get_table_spec("a").populated
    with pytest.raises(RuntimeError):  # nothing listening any more
        remote_store(sv.url, names=("a",))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_buffers_and_close(owner, rng, transport):
    s, rows = owner
    sv = s.serve(transport)
    c = remote_store(sv.url)
    out = c.empty(2, 2)
    c.lookup(("a", "a"), np.array([[1, 2], [3, 4]]), out)
    c.close()
    assert (out[0, 0] == rows["a"][1]).all()  # still valid memory
    with pytest.raises(StoreClosedError):
        c.lookup(("a", "a"), np.array([[1, 2], [3, 4]]), out)
    del out
    s.close()  # closes its server too
    with pytest.raises(StoreClosedError):
        s.serve(transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_remote_layer_api(tmp_path, rng, transport):
    """The layer API over a remote owner: store_client is the remote spec;
    outputs are the caller's (read through registered memory and copied)."""
    cfgs = {0: EngramStoreConfig([50, 60], R), 1: EngramStoreConfig([70], R), 2: EngramStoreConfig([20], R)}
    local = EngramStore(cfgs, local_dir=str(tmp_path))
    tabs = {lid: [random_rows(rng, n, R) for n in c.table_vocab_sizes] for lid, c in cfgs.items()}
    for lid, t in tabs.items():
        local.populate(lid, t)
    with local.serve(transport) as sv, EngramStore(cfgs, sv.url) as c:
        ids = np.stack([rng.integers(0, 50, (2, 3)), rng.integers(0, 60, (2, 3))], axis=-1)
        out, _ = poisoned(rng, (2, 3, 2, R))
        c.lookup_into(0, ids, out)
        assert (out[..., 0, :] == tabs[0][0][ids[..., 0]]).all() and (out[..., 1, :] == tabs[0][1][ids[..., 1]]).all()
        hm_ids = np.stack([rng.integers(0, 70, 5), rng.integers(0, 20, 5)]).astype(np.int64)
        hm_ids[1, 3] = -1
        hm, before = poisoned(rng, (2, 5, R))
        c.lookup([1, 2], hm_ids, hm)
        assert (hm[0] == tabs[1][0][hm_ids[0]]).all()
        assert (hm[1, 3] == before[1, 3]).all() and (hm[1, [0, 1, 2, 4]] == tabs[2][0][hm_ids[1, [0, 1, 2, 4]]]).all()
        o1, o2 = poisoned(rng, (2, 3, 2, R))[0], poisoned(rng, (1, 1, 1, R))[0]
        c.lookup_many_into([0, 1], [ids, np.array([[[69]]])], [o1, o2])
        assert (o1 == out).all() and (o2[0, 0, 0] == tabs[1][0][69]).all()
        with pytest.raises(RuntimeError):  # the owner's tables are read-only here
            c.populate(2, tabs[2])
        with pytest.raises(RuntimeError):
            c.remove_from_store(2)
    local.close()


def test_remote_sharded(make_store, rng):
    """A table cut over two owners (the first shard on both), read by a
    store opened with remote={"shards": ...}: lookups return the whole
    table's rows, also after the first owner closes (its replica serves)."""
    rows = random_rows(rng, 800, R)
    a, _ = make_store({"a.s0": (300, R)}, populate=False, namespace="shard")
    a.populate("a.s0", rows[:300])
    b, _ = make_store({"a.s0": (300, R), "a.s1": (500, R)}, populate=False, namespace="shard")
    b.populate("a.s1", rows[300:])  # a.s0 is the snapshot a populated (one directory)
    sa, sb = a.serve("tcp"), b.serve("tcp")
    try:
        shards = [
            {"table": "a", "served": "a.s0", "lo": 0, "hi": 300, "addrs": [sa.addr, sb.addr]},
            {"table": "a", "served": "a.s1", "lo": 300, "hi": 800, "addrs": [sb.addr]},
        ]
        with EngramStore(
            tables={"a": {"num_rows": 800, "row_bytes": R}},
            namespace="shard",
            remote={"transport": "tcp", "shards": shards},
        ) as c:
            assert c.get_table_spec("a") == (800, R, True)
            for closed in (False, True):
                if closed:
                    sa.close()
                ids = rng.integers(0, 800, (64, 8))
                out = c.empty(64, 8)
                c.lookup(("a",) * 8, ids, out)
                assert (out == rows[ids]).all(), f"owner a closed: {closed}"
        with pytest.raises(ValueError, match="exactly one of addr, shards and directory"):
            EngramStore(tables={"a": {"num_rows": 800, "row_bytes": R}}, namespace="shard", remote={"transport": "tcp"})
        with pytest.raises(ValueError, match="addrs"):
            EngramStore(
                tables={"a": {"num_rows": 800, "row_bytes": R}},
                namespace="shard",
                remote={"shards": [{"table": "a", "lo": 0, "hi": 800, "addrs": "x"}]},
            )
    finally:
        sa.close()
        sb.close()


def test_remote_by_directory(make_store, rng, tmp_path):
    """Two owners serve the same table (replicas) and publish it in a
    discovery file; stores opened by namespace from the file alone (the
    "file://" string form and the dict form) read it, also after one owner
    closed; once both closed, opening by the directory raises."""
    rows = random_rows(rng, 500, R)
    a, _ = make_store({"t": (500, R)}, populate=False, namespace="dirns")
    a.populate("t", rows)
    b, _ = make_store({"t": (500, R)}, populate=False, namespace="dirns")  # the same directory: a's snapshot
    disc = tmp_path / "discovery.json"
    sa, sb = a.serve("tcp", directory=disc), b.serve("tcp", directory=str(disc))
    tables = {"t": {"num_rows": 500, "row_bytes": R}}
    try:
        for remote in (f"file://{disc}", {"directory": disc, "transport": "tcp"}):
            with EngramStore(tables=tables, namespace="dirns", remote=remote) as c:
                for closed in (False, True):
                    if closed and remote != f"file://{disc}":
                        sa.close()
                    ids = rng.integers(0, 500, (32, 4))
                    out = c.empty(32, 4)
                    c.lookup(("t",) * 4, ids, out)
                    assert (out == rows[ids]).all()
        sb.close()
        with pytest.raises(KeyError):
            EngramStore(tables=tables, namespace="dirns", remote={"directory": disc})
        with pytest.raises(ValueError, match="exactly one of addr, shards and directory"):
            EngramStore(tables=tables, namespace="dirns", remote={"directory": disc, "addr": "127.0.0.1:1"})
        with pytest.raises(ValueError):
            a.serve("tcp", directory="http://nowhere/")
    finally:
        sa.close()
        sb.close()
