"""The older layer/head API, signature-compatible with Mooncake's
EngramStore: its constructor, getters, populate, lookup_into, lookup,
lookup_many_into, remove_from_store and its error classes (TypeError for
implicit conversions, ValueError for unknown layers and bad configs,
RuntimeError for bad ids and failed reads), outputs untouched on error.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import poisoned, random_rows

from scatterkit.engram import EngramStore, EngramStoreConfig, LayerTableName

R = 264


def cfg(vocab=(17, 19, 23, 29), row_bytes=32):
    c = EngramStoreConfig()
    c.table_vocab_sizes = list(vocab)
    c.row_bytes = row_bytes
    return c


def tables_for(store, layer, rng):
    return [random_rows(rng, n, store.get_row_bytes(layer)) for n in store.get_table_vocab_sizes(layer)]


def ids_for(store, layer, rng, b=2, l=3):
    return np.stack([rng.integers(0, n, size=(b, l)) for n in store.get_table_vocab_sizes(layer)], axis=-1).astype(np.int64)


def gather(tables, ids):
    return np.stack([tables[h][ids[..., h]] for h in range(ids.shape[-1])], axis=-2)


@pytest.fixture
def layer_store(tmp_path):
    made = []

    def make(layers, **kw):
        kw.setdefault("local_dir", str(tmp_path / "layers"))
        s = EngramStore(layers=layers, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_config_and_getters(layer_store):
    c1, c2 = cfg(), cfg((7, 11), R)
    s = layer_store({5: c1, 2: c2})
    assert s.get_layer_ids() == [2, 5]
    assert s.get_num_heads(5) == 4 and s.get_num_heads(2) == 2
    assert s.get_row_bytes(5) == 32 and s.get_row_bytes(2) == R
    assert s.get_table_vocab_sizes(5) == [17, 19, 23, 29]
    assert s.get_store_keys(5) == [f"engram:l5:h{h}" for h in range(4)]
    assert s.get_table_names(2) == [LayerTableName(2, 0), LayerTableName(2, 1)] == ["layer2.head0", "layer2.head1"]
    assert s.get_table_spec("layer5.head3") == (29, 32, False)  # the table API over the same tables
    c1.row_bytes = 99  # the store kept its own copy
    assert s.get_row_bytes(5) == 32
    assert EngramStoreConfig([3, 4], 8).table_vocab_sizes == [3, 4]


def test_metadata_only(layer_store):
    s = EngramStore({9: cfg()})  # neither local_dir nor a store client
    assert s.get_store_keys(9)[0] == "engram:l9:h0"
    assert s.get_num_heads(9) == 4
    with pytest.raises(RuntimeError):
        s.populate(9, [np.zeros((n, 32), np.uint8) for n in s.get_table_vocab_sizes(9)])
    with pytest.raises(RuntimeError):
        s.lookup_into(9, np.zeros((1, 1, 4), np.int64), np.zeros((1, 1, 4, 32), np.uint8))
    with pytest.raises(RuntimeError):
        s.remove_from_store(9)
    with pytest.raises(NotImplementedError):
        s.bind_local(9, [])


@pytest.mark.parametrize(
    "layers",
    [
        {},
        {-1: cfg()},
        {1: cfg(row_bytes=0)},
        {1: cfg(row_bytes=-1)},
        {1: cfg(vocab=())},
        {1: cfg(vocab=(3, 0))},
        {1: cfg(vocab=(2**63 - 1,), row_bytes=R)},
    ],
)
def test_invalid_layer_configs(layers):
    with pytest.raises(ValueError):
        EngramStore(layers)


def test_constructor_forms(tmp_path, rng):
    c = cfg()
    s = EngramStore({1: c}, None, str(tmp_path))  # positional, Mooncake's order
    tables = tables_for(s, 1, rng)
    s.populate(1, tables)
    s.close()

    class Client:  # a store wrapper naming a directory (what an adapter passes)
        local_dir = str(tmp_path)

    for kw in (dict(store=Client()), dict(store_client=Client())):
        with EngramStore(layers={1: c}, **kw) as peer:
            out = np.zeros((1, 1, 4, 32), np.uint8)
            ids = np.zeros((1, 1, 4), np.int64)
            peer.lookup_into(1, ids, out)
            assert (out == gather(tables, ids)).all()
    with pytest.raises(ValueError):
        EngramStore(layers={1: c}, store_client=Client(), local_dir=str(tmp_path))
    with pytest.raises(ValueError):
        EngramStore(layers={1: c}, tables={"a": {"num_rows": 1, "row_bytes": 1}}, local_dir=str(tmp_path))
    with pytest.raises(TypeError):
        EngramStore(layers={1: c}, store_client=object())
    with pytest.raises(TypeError):
        EngramStore(layers={"1": c}, local_dir=str(tmp_path))
    with pytest.raises(TypeError):
        EngramStore(layers={1: {"row_bytes": 4}}, local_dir=str(tmp_path))


def test_populate_and_lookup_into(layer_store, rng):
    s = layer_store({3: cfg(row_bytes=R)})
    tables = tables_for(s, 3, rng)
    s.populate(3, tables, object())  # a ReplicateConfig-like third argument is accepted
    for b, l in ((1, 1), (2, 3), (4, 16)):
        ids = ids_for(s, 3, rng, b, l)
        ids[0, 0] = np.array(s.get_table_vocab_sizes(3)) - 1  # last rows
        out, _ = poisoned(rng, (b, l, 4, R))
        assert s.lookup_into(3, ids, out) is None
        assert (out == gather(tables, ids)).all()
    out, _ = poisoned(rng, (1, 1, 4, R))
    s.lookup_into(np.int64(3), ids[:1, :1], out)  # numpy ints are layer ids too
    assert (out == gather(tables, ids[:1, :1])).all()
    assert s.get_row_bytes(np.int32(3)) == R


def test_lookup_into_torch(layer_store, rng, torch):
    s = layer_store({3: cfg()})
    tables = tables_for(s, 3, rng)
    s.populate(3, [torch.from_numpy(t) for t in tables])
    ids = ids_for(s, 3, rng)
    out = torch.zeros((2, 3, 4, 32), dtype=torch.uint8)
    s.lookup_into(3, torch.from_numpy(ids), out)
    assert (out.numpy() == gather(tables, ids)).all()


def test_lookup_into_rejects_implicit_conversion(layer_store, rng):
    s = layer_store({3: cfg()})
    s.populate(3, tables_for(s, 3, rng))
    ids = np.zeros((1, 2, 4), np.int64)
    out, before = poisoned(rng, (1, 2, 4, 32))
    for bad in (ids.tolist(), ids.astype(np.int32), ids[..., ::-1]):
        with pytest.raises(TypeError):
            s.lookup_into(3, bad, out)
        assert (out == before).all()


def test_lookup_into_errors_leave_output(layer_store, rng):
    s = layer_store({3: cfg(row_bytes=R)})
    tables = tables_for(s, 3, rng)
    s.populate(3, tables)
    ids = ids_for(s, 3, rng, 1, 3)
    out, _ = poisoned(rng, (1, 3, 4, R))
    s.lookup_into(3, ids, out)
    good = out.copy()
    for bad_id in (-1, 17, 10**12):  # -1 is not a row here; 17 is one past head 0
        bad = ids.copy()
        bad[0, 0, 0] = bad_id
        with pytest.raises(RuntimeError):
            s.lookup_into(3, bad, out)
        assert (out == good).all()
    s.lookup_into(3, ids, out)  # a failure leaves the store usable
    assert (out == gather(tables, ids)).all()
    for bad_out in (out[..., ::-1], out.astype(np.float32), out[..., :-1], np.zeros((1, 3, 3, R), np.uint8)):
        with pytest.raises(RuntimeError):
            s.lookup_into(3, ids, bad_out)
    ro = out.view()
    ro.setflags(write=False)
    with pytest.raises(RuntimeError):
        s.lookup_into(3, ids, ro)
    with pytest.raises(Exception):  # wrong head dimension
        s.lookup_into(3, np.zeros((1, 1, 3), np.int64), np.zeros((1, 1, 3, R), np.uint8))
    assert (out == gather(tables, ids)).all()


def test_unknown_layer(layer_store, rng):
    s = layer_store({1: cfg(), 2: cfg((7, 11), R)})
    s.populate(2, tables_for(s, 2, rng))
    ids = np.zeros((1, 1, 2), np.int64)
    out, before = poisoned(rng, (1, 1, 2, R))
    with pytest.raises(ValueError, match="Unknown Engram layer"):
        s.lookup_into(3, ids, out)
    assert (out == before).all()
    for op in (s.get_store_keys, s.get_row_bytes, s.get_num_heads, s.get_table_vocab_sizes, s.remove_from_store):
        with pytest.raises(ValueError, match="Unknown Engram layer"):
            op(3)
    with pytest.raises(ValueError, match="Unknown Engram layer"):
        s.populate(3, [])
    with pytest.raises(ValueError, match="Unknown Engram layer"):
        s.lookup([3], np.zeros((1, 1), np.int64), np.zeros((1, 1, R), np.uint8))
    t = EngramStore(tables={"a": {"num_rows": 1, "row_bytes": 1}}, local_dir=s.local_dir, namespace="tables")
    with pytest.raises(ValueError, match="Unknown Engram layer"):  # a table store has no layers
        t.lookup_into(0, ids, out)
    t.close()


def test_populate_checks(layer_store, rng):
    s = layer_store({3: cfg(row_bytes=R)})
    good = tables_for(s, 3, rng)
    bad_sets = [
        good[:-1],  # a head missing
        [t.astype(np.float32) for t in good],  # no casts
        [np.zeros((n, 2 * R), np.uint8)[:, ::2] for n in s.get_table_vocab_sizes(3)],  # strided
        [good[0][:-1]] + good[1:],  # wrong shape
        [good[0].tolist()] + good[1:],
    ]
    for tables in bad_sets:
        with pytest.raises(RuntimeError):
            s.populate(3, tables)
        assert not any(s.get_table_spec(n).populated for n in s.get_table_names(3))
    s.populate(3, good)
    with pytest.raises(RuntimeError):  # create-only
        s.populate(3, good)
    with pytest.raises(FileExistsError):
        s.populate(3, good)


def test_populate_is_all_heads_or_none(layer_store, rng):
    s = layer_store({3: cfg()})
    good = tables_for(s, 3, rng)
    s.populate("layer3.head2", good[2])  # one head already there (through the table API)
    with pytest.raises(RuntimeError):
        s.populate(3, good)
    assert [s.get_table_spec(n).populated for n in s.get_table_names(3)] == [False, False, True, False]


def test_lookup_before_populate(layer_store, rng):
    s = layer_store({3: cfg()})
    out, before = poisoned(rng, (1, 1, 4, 32))
    with pytest.raises(RuntimeError):
        s.lookup_into(3, np.zeros((1, 1, 4), np.int64), out)
    assert (out == before).all()


def test_empty_batch_is_noop(layer_store):
    s = layer_store({3: cfg()})  # not populated: an empty batch reads nothing
    ids = np.empty((1, 0, 4), np.int64)
    assert s.lookup_into(3, ids, np.empty((1, 0, 4, 32), np.uint8)) is None
    assert s.lookup_many_into([3], [ids], [np.empty((1, 0, 4, 32), np.uint8)]) is None


def test_remove_from_store(layer_store, rng):
    s = layer_store({3: cfg(), 4: cfg((5,), 32)})
    s.populate(3, tables_for(s, 3, rng))
    s.populate(4, tables_for(s, 4, rng))
    assert s.remove_from_store(3, force=True) == 4
    assert s.remove_from_store(3) == 0
    assert not any(s.get_table_spec(n).populated for n in s.get_table_names(3))
    assert s.get_table_spec("layer4.head0").populated  # other layers stay
    s.populate(3, tables_for(s, 3, rng))  # and the layer can be made again
    assert s.remove_from_store(3) == 4


def test_layers_share_a_directory(tmp_path, rng):
    first, second = 11, 12
    configs = {first: cfg(), second: cfg((7, 11), R)}
    table = EngramStore(configs, local_dir=str(tmp_path))
    fills = {}
    for lid, c in configs.items():
        fills[lid] = [np.full((n, c.row_bytes), h + 31 + (lid - first) * 50, np.uint8) for h, n in enumerate(c.table_vocab_sizes)]
        table.populate(lid, fills[lid])
    peer = EngramStore(configs, local_dir=str(tmp_path))  # reads the same tables, no second copy
    for lid, c in configs.items():
        assert table.get_store_keys(lid) == peer.get_store_keys(lid)
        ids = np.zeros((1, 2, len(c.table_vocab_sizes)), np.int64)
        out = np.empty((1, 2, len(c.table_vocab_sizes), c.row_bytes), np.uint8)
        for reader in (table, peer):
            reader.lookup_into(lid, ids, out)
            for h in range(ids.shape[-1]):
                assert (out[..., h, :] == h + 31 + (lid - first) * 50).all()
    table.remove_from_store(first, force=True)
    out = np.empty((1, 1, 2, R), np.uint8)
    peer.lookup_into(second, np.zeros((1, 1, 2), np.int64), out)
    assert (out[..., 0, :] == 81).all()
    table.close()
    peer.close()


def test_head_major_lookup(layer_store, rng):
    """lookup(layer_ids, [H,T] ids, [H,T,R]): single-head layers, -1 skips, repeats allowed."""
    layers = {10: cfg((40,), R), 11: cfg((25,), R), 12: cfg((3, 3), R)}
    s = layer_store(layers)
    tabs = {lid: tables_for(s, lid, rng) for lid in layers}
    for lid in layers:
        s.populate(lid, tabs[lid])
    lids = [10, 11, 10]
    t = 6
    ids = np.stack([rng.integers(0, layers[l].table_vocab_sizes[0], t) for l in lids]).astype(np.int64)
    ids[1, 2] = -1
    out, before = poisoned(rng, (3, t, R))
    assert s.lookup(lids, ids, out) is None
    for h, lid in enumerate(lids):
        for ti in range(t):
            want = before[h, ti] if ids[h, ti] == -1 else tabs[lid][0][ids[h, ti]]
            assert (out[h, ti] == want).all()
    good = out.copy()
    bad = ids.copy()
    bad[0, 0] = 40
    with pytest.raises(RuntimeError):
        s.lookup(lids, bad, out)
    with pytest.raises(IndexError):  # the same error is an IndexError too
        s.lookup(lids, bad, out)
    assert (out == good).all()
    with pytest.raises(ValueError):  # a two-head layer
        s.lookup([12], np.zeros((1, t), np.int64), np.zeros((1, t, R), np.uint8))
    with pytest.raises(TypeError):
        s.lookup(lids, ids.astype(np.int32), out)
    with pytest.raises(ValueError):
        s.lookup(lids, ids[:2], out)
    with pytest.raises(ValueError):
        s.lookup(lids, ids, out[:, :, :-1])
    with pytest.raises(ValueError):
        s.lookup(lids, ids, out.transpose(1, 0, 2))  # must be C-contiguous [H,T,R]
    assert (out == good).all()
    assert s.lookup(lids, np.empty((3, 0), np.int64), np.empty((3, 0, R), np.uint8)) is None


def test_lookup_many_into(layer_store, rng):
    s = layer_store({1: cfg(), 2: cfg((7, 11), R)})
    tabs = {lid: tables_for(s, lid, rng) for lid in (1, 2)}
    for lid in (1, 2):
        s.populate(lid, tabs[lid])
    ids = [ids_for(s, 1, rng, 2, 2), ids_for(s, 2, rng, 1, 5)]
    outs = [poisoned(rng, (2, 2, 4, 32))[0], poisoned(rng, (1, 5, 2, R))[0]]
    assert s.lookup_many_into([1, 2], ids, outs) is None
    assert (outs[0] == gather(tabs[1], ids[0])).all() and (outs[1] == gather(tabs[2], ids[1])).all()
    # checked in full first: a bad second request writes nothing anywhere
    fresh = [poisoned(rng, o.shape)[0] for o in outs]
    before = [f.copy() for f in fresh]
    bad = ids[1].copy()
    bad[0, 4, 1] = 11
    with pytest.raises(RuntimeError):
        s.lookup_many_into([1, 2], [ids[0], bad], fresh)
    assert all((f == b).all() for f, b in zip(fresh, before))
    with pytest.raises(RuntimeError):
        s.lookup_many_into([1, 2], ids, fresh[:1])
    with pytest.raises(RuntimeError):  # overlapping outputs
        s.lookup_many_into([1, 1], [ids[0], ids[0]], [fresh[0], fresh[0]])
    with pytest.raises(TypeError):
        s.lookup_many_into([1, 2], [ids[0].tolist(), ids[1]], fresh)
    with pytest.raises(RuntimeError):  # the same refusal, as Mooncake raises it there
        s.lookup_many_into([1, 2], [ids[0].astype(np.int32), ids[1]], fresh)
    with pytest.raises(ValueError, match="Unknown Engram layer"):
        s.lookup_many_into([1, 9], ids, fresh)
    assert all((f == b).all() for f, b in zip(fresh, before))
