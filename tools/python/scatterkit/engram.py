"""The Engram store for Python: the RFC's table API and the older layer/head API.

``EngramStore(tables=..., namespace=..., local_dir=... | remote=...)`` is the
Engram RFC's contract (issue 16): immutable, namespaced byte tables owned by
the Go store (mmap snapshots, published atomically and create-only), looked
up by ``[T,K]`` ids into ``[T,K,R]`` outputs. ``EngramStore(layers=...)`` is
the layer/head API of Mooncake's EngramStore, signature-compatible, over the
same tables (one per layer and head).

CPU lookups are synchronous and release the GIL (ctypes does, around every
foreign call). Lookups into CUDA outputs (torch tensors, cupy arrays,
anything with ``__cuda_array_interface__`` or DLPack) enqueue their work on
a stream and return (libscatterkit_cuda.so, loaded where the driver is).
docs/python.md has the examples, the error table and the lifetime rules.
"""

from __future__ import annotations

import ctypes
import json
import operator
import os
import sys
import threading
import weakref
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from . import _arrays, _capi
from ._arrays import describe, np_data
from ._capi import (
    NoConversionError,
    RowIDError,
    StoreClosedError,
    TableExistsError,
    UnknownTableError,
    sk_error,
)

__all__ = [
    "EngramStore",
    "EngramStoreConfig",
    "TableSpec",
    "Server",
    "LayerTableName",
    "StoreClosedError",
    "RowIDError",
    "UnknownTableError",
    "TableExistsError",
    "NoConversionError",
    "cuda_device_count",
]

DEFAULT_NAMESPACE = "engram"

_ndarray = np.ndarray
_u64, _i64, _vp = ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p
_ID_BITS = {"int32": 32, "int64": 64}
_NOMATCH = object()  # stands in the lookup cache for a mutable argument (never `is` anything)
_COLUMN_CACHE = 1024  # column sets kept per store; the oldest is freed beyond


_CUDA_MODES = {"host": _capi.SK_CUDA_HOST, "device": 0}


def cuda_device_count() -> int:
    """How many CUDA devices lookups can use here: 0 without the CUDA
    library (libscatterkit_cuda.so), without a driver or without devices."""
    lib = _capi.lib()
    if not lib.cuda:
        return 0
    err, n = sk_error(), ctypes.c_int32()
    _capi.check(lib.cuda_available(n, err), err)
    return n.value


def LayerTableName(layer: int, head: int) -> str:
    """The table of (layer, head) in a layer store: Go's engram.LayerTableName."""
    return f"layer{layer}.head{head}"


class TableSpec(NamedTuple):
    """A table's shape: num_rows rows of row_bytes bytes; populated when it holds rows."""

    num_rows: int
    row_bytes: int
    populated: bool = False


class EngramStoreConfig:
    """A layer of the layer/head API (Mooncake's EngramStoreConfig): one
    table per head, table_vocab_sizes[h] rows of row_bytes bytes."""

    __slots__ = ("table_vocab_sizes", "row_bytes")

    def __init__(self, table_vocab_sizes: Sequence[int] | None = None, row_bytes: int = 0):
        self.table_vocab_sizes = list(table_vocab_sizes or [])
        self.row_bytes = row_bytes

    def __repr__(self) -> str:
        return f"EngramStoreConfig(table_vocab_sizes={self.table_vocab_sizes!r}, row_bytes={self.row_bytes!r})"


class _Layer(NamedTuple):
    row_bytes: int
    vocab: tuple  # rows per head
    names: tuple  # table per head
    keys: tuple  # Mooncake's store keys, engram:l{layer}:h{head}


class _Columns:
    """A column set (sk_columns), freed when the last reference goes: the
    store's cache and the threads' cached arguments share it."""

    __slots__ = ("handle", "k", "row_bytes", "names", "_free")

    def __init__(self, handle: int, k: int, row_bytes: int, names: tuple, free):
        self.handle, self.k, self.row_bytes, self.names, self._free = _u64(handle), k, row_bytes, names, free

    def __del__(self):
        try:
            self._free(self.handle.value)  # SK_ECLOSED, harmless, once the store's close freed it
        except Exception:
            pass


# ---- the native store and its buffers -----------------------------------


class _Native:
    """Owns the store handle. Closing it unmaps the buffers of empty(), so
    while any of them lives the close waits: it happens when the last one
    is freed (the Python objects cannot reach freed memory)."""

    def __init__(self, lib: _capi.Lib, h: int):
        self.lib, self.h = lib, h
        self.lock = threading.RLock()  # a buffer's __del__ may run under it (GC)
        self.buffers: dict[int, tuple[int, int]] = {}  # buffer handle -> (ptr, n)
        self.closing = False

    def buffer(self, n: int) -> "_Buffer":
        err = sk_error()
        bh, ptr = _u64(), _vp()
        with self.lock:
            if self.closing:
                raise StoreClosedError("scatterkit: store closed")
            _capi.check(self.lib.buffer_new(self.h, n, bh, ptr, err), err, "empty")
            self.buffers[bh.value] = (ptr.value, n)
        return _Buffer(self, bh.value, ptr.value, n)

    def free(self, bh: int) -> None:
        with self.lock:
            self.buffers.pop(bh, None)
            self.lib.buffer_free(bh)
            now = self.closing and not self.buffers
        if now:
            self._close_now()

    def owns(self, lo: int, hi: int) -> bool:
        """Whether [lo, hi) lies inside one buffer."""
        for p, n in list(self.buffers.values()):
            if p <= lo and hi <= p + n:
                return True
        return False

    def close(self) -> None:
        with self.lock:
            if self.closing:
                return
            self.closing = True
            now = not self.buffers
        if now:
            self._close_now()

    def _close_now(self) -> None:
        h, self.h = self.h, 0
        if h:
            err = sk_error()
            _capi.check(self.lib.close(h, err), err, "close")

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _Buffer:
    """Memory from sk_buffer_new; freed when the last array over it goes."""

    __slots__ = ("native", "h", "ptr", "n")

    def __init__(self, native: _Native, h: int, ptr: int, n: int):
        self.native, self.h, self.ptr, self.n = native, h, ptr, n

    def array(self) -> np.ndarray:
        raw = (ctypes.c_uint8 * self.n).from_address(self.ptr)
        raw._scatterkit_buffer = self  # the arrays' base keeps the buffer
        return np.frombuffer(raw, dtype=np.uint8)

    def __del__(self):
        try:
            self.native.free(self.h)
        except Exception:
            pass


class Server:
    """A store's tables served to remote stores (EngramStore.serve)."""

    def __init__(self, native: _Native, h: int, transport: str, addr: str):
        self._native, self._h = native, h
        self.transport, self.addr = transport, addr

    @property
    def url(self) -> str:
        """What remote= takes: "tcp://host:port" or "shm://addr"."""
        return f"{self.transport}://{self.addr}"

    def close(self) -> None:
        h, self._h = self._h, 0
        if h:
            err = sk_error()
            rc = self._native.lib.server_close(h, err)
            if rc != _capi.SK_ECLOSED:  # the store's close closed it already
                _capi.check(rc, err, "server close")

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<scatterkit Server {self.url}{'' if self._h else ' closed'}>"


# ---- argument parsing -----------------------------------------------------


def _shard_config(i: int, sh: Any) -> dict:
    """One shard of remote={"shards": [...]}: {"table", "lo", "hi", "addrs"}
    and optionally "served" (the owners' name for the shard's table)."""
    if not isinstance(sh, Mapping):
        raise TypeError(f"scatterkit: remote shard {i} is a {type(sh).__name__}: want a dict")
    unknown = set(sh) - {"table", "served", "lo", "hi", "addrs"}
    if unknown:
        raise ValueError(f"scatterkit: remote shard {i}: unknown keys {sorted(unknown)}; want table, served, lo, hi, addrs")
    addrs = sh.get("addrs")
    if isinstance(addrs, str) or not addrs:
        raise ValueError(f"scatterkit: remote shard {i}: addrs must be a non-empty list of owner addresses")
    out = {"table": sh.get("table", ""), "lo": int(sh.get("lo", 0)), "hi": int(sh.get("hi", 0)), "addrs": [str(a) for a in addrs]}
    if sh.get("served"):
        out["served"] = str(sh["served"])
    return out


# remote= strings that name a directory of owners rather than one owner.
_DIRECTORY_SCHEMES = ("etcd", "etcds", "file")


def _remote_config(remote: Any, buffer_bytes: int | None) -> dict:
    if isinstance(remote, Server):
        remote = remote.url
    if isinstance(remote, str):
        scheme, sep, addr = remote.partition("://")
        if not sep or not scheme or not addr:
            raise ValueError(
                f"scatterkit: remote {remote!r}: want 'tcp://host:port', 'shm://addr', 'ucx://host:port' "
                "or a directory, 'etcd://host:port/prefix'"
            )
        if scheme in _DIRECTORY_SCHEMES:
            cfg = {"directory": remote}
        else:
            cfg = {"transport": scheme, "addr": addr}
    elif isinstance(remote, Mapping):
        unknown = set(remote) - {"transport", "addr", "shards", "directory", "buffer_bytes", "capture_spin_us"}
        if unknown:
            raise ValueError(
                f"scatterkit: remote: unknown keys {sorted(unknown)}; want transport, addr, shards or directory, "
                "buffer_bytes, capture_spin_us"
            )
        cfg = dict(remote)
        if sum(bool(cfg.get(k)) for k in ("addr", "shards", "directory")) != 1:
            raise ValueError("scatterkit: remote: set exactly one of addr, shards and directory")
        if cfg.get("directory"):
            cfg["directory"] = os.fspath(cfg["directory"])
        if cfg.get("shards"):
            cfg["shards"] = [_shard_config(i, sh) for i, sh in enumerate(cfg["shards"])]
    else:
        raise TypeError(f"scatterkit: remote is a {type(remote).__name__}: want 'tcp://host:port', 'shm://addr' or a dict")
    if buffer_bytes is not None:
        cfg["buffer_bytes"] = buffer_bytes
    return cfg


def _store_client(client: Any) -> tuple[str | None, Any]:
    """(local_dir, remote) of a layer API store_client: a remote spec, or
    an object with a local_dir or a remote attribute (a store wrapper)."""
    if isinstance(client, (str, Mapping, Server)):
        return None, client
    d = getattr(client, "local_dir", None)
    if d:
        return os.fspath(d), None
    r = getattr(client, "remote", None)
    if r:
        return None, r
    raise TypeError(
        f"scatterkit: store_client is a {type(client).__name__}: want a remote spec ('tcp://host:port', "
        "'shm://addr', a dict, a Server) or an object with a local_dir or a remote attribute"
    )


def _spec_of(name: str, spec: Any) -> tuple[int, int]:
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"num_rows", "row_bytes"}
        if unknown:
            raise ValueError(f"scatterkit: table {name!r}: unknown keys {sorted(unknown)}; want num_rows, row_bytes")
        try:
            n, r = spec["num_rows"], spec["row_bytes"]
        except KeyError as e:
            raise ValueError(f"scatterkit: table {name!r}: no {e.args[0]}") from None
    elif hasattr(spec, "num_rows") and hasattr(spec, "row_bytes"):
        n, r = spec.num_rows, spec.row_bytes
    else:
        raise TypeError(f"scatterkit: table {name!r}: want {{'num_rows': N, 'row_bytes': R}}, got {type(spec).__name__}")
    try:
        return operator.index(n), operator.index(r)
    except TypeError:
        raise TypeError(f"scatterkit: table {name!r}: num_rows and row_bytes must be integers") from None


def _layer_of(layer_id: Any, cfg: Any) -> _Layer:
    if isinstance(layer_id, bool) or not isinstance(layer_id, int):
        raise TypeError(f"EngramStore layer ids must be integers, got {type(layer_id).__name__}")
    if not (hasattr(cfg, "table_vocab_sizes") and hasattr(cfg, "row_bytes")):
        raise TypeError(f"EngramStore layer {layer_id}: want an EngramStoreConfig, got {type(cfg).__name__}")
    row_bytes, vocab = cfg.row_bytes, list(cfg.table_vocab_sizes)
    if layer_id < 0 or not isinstance(row_bytes, int) or row_bytes <= 0 or not vocab:
        raise ValueError("EngramStore requires nonnegative layer IDs, positive row_bytes and nonempty tables")
    for n in vocab:
        if not isinstance(n, int) or n <= 0 or n > (2**63 - 1) // row_bytes:
            raise ValueError(f"Invalid Engram table size: {n} rows of {row_bytes} bytes (layer {layer_id})")
    h = range(len(vocab))
    return _Layer(
        row_bytes,
        tuple(vocab),
        tuple(LayerTableName(layer_id, i) for i in h),
        tuple(f"engram:l{layer_id}:h{i}" for i in h),
    )


def _as_runtime(e: Exception) -> Exception:
    """The layer API's RuntimeError for a table API error."""
    if isinstance(e, RuntimeError):
        return e
    r = RuntimeError(str(e))
    r.__cause__ = e
    return r


# ---- the store -----------------------------------------------------------


class EngramStore:
    """An Engram store (see the module doc and docs/python.md).

    Table API (the RFC's)::

        EngramStore(tables={"ngram2": {"num_rows": N, "row_bytes": 264}},
                    namespace="model-a", local_dir="/dev/shm/engram")
        EngramStore(tables=..., namespace=..., remote="tcp://host:port")

    Layer/head API (Mooncake's)::

        EngramStore(layers={3: EngramStoreConfig([N0, N1], 264)}, local_dir=...)
        EngramStore({3: cfg}, store_client)   # or store=...; neither: metadata only

    Other options: workers (goroutines per large lookup, 0 = GOMAXPROCS up
    to 8), pin ("best-effort", "none", "require"), skip_row_checksums, and
    for remote stores buffer_bytes (the registered memory empty() draws on).
    CUDA lookups: cuda="host" (default: the snapshots are registered with
    the driver, pinned in full, and read over PCIe, zero-copy) or "device"
    (each table copied into device memory once per device); cuda_strict
    (a lookup with a bad id writes nothing, one more kernel); cuda_async
    (with cuda="host": every lookup reads the host tables zero-copy, so
    none synchronizes with its stream; by default a large lookup may be
    gathered on the CPU, or split between the two, when the calibration
    of this machine predicts it faster, and then waits for its ids).
    """

    def __init__(
        self,
        layers: Mapping[int, EngramStoreConfig] | None = None,
        store_client: Any = None,
        local_dir: str | os.PathLike | None = None,
        *,
        tables: Mapping[str, Any] | None = None,
        namespace: str | None = None,
        remote: Any = None,
        store: Any = None,
        workers: int = 0,
        pin: str = "best-effort",
        skip_row_checksums: bool = False,
        buffer_bytes: int | None = None,
        cuda: str = "host",
        cuda_strict: bool = False,
        cuda_async: bool = False,
    ):
        self._open = False
        self._alive = [False]  # _open, for the lookup closure
        self._native: _Native | None = None
        self._tls = threading.local()
        self._cols: dict[tuple, _Columns] = {}
        self._cols_lock = threading.Lock()
        self._servers: list[Server] = []
        self._layers: dict[int, _Layer] = {}
        if cuda not in _CUDA_MODES:
            raise ValueError(f"scatterkit: cuda={cuda!r}: want 'host' (zero-copy) or 'device' (tables copied to the device)")
        if cuda_async and cuda != "host":
            raise ValueError(f"scatterkit: cuda_async=True with cuda={cuda!r}: it settles how host tables are read, so it needs cuda='host'")
        self._cuda_flags = (_CUDA_MODES[cuda] | (_capi.SK_CUDA_STRICT if cuda_strict else 0)
                            | (_capi.SK_CUDA_ASYNC if cuda_async else 0))
        self.cuda_mode = cuda
        self._devs: dict[int, int] = {}  # CUDA ordinal -> attachment handle (sk_cuda_attach)
        self._dev_k: dict[int, int] = {}  # ordinal -> K of its last lookup (sk_cuda_status decodes with it)
        self._dev_lock = threading.Lock()
        self._dev_gen = [0]  # bumped by detach: the threads' cached CUDA calls hold stale handles

        if store is not None:
            if store_client is not None:
                raise ValueError("EngramStore: give store_client or store, not both")
            store_client = store
        if local_dir is not None and local_dir != "":
            local_dir = os.fspath(local_dir)
        else:
            local_dir = None
        if store_client is not None:
            if remote is not None:
                raise ValueError("EngramStore: give store_client or remote, not both")
            client_dir, remote = _store_client(store_client)
            if client_dir is not None:
                if local_dir is not None:
                    raise ValueError("store_client and local_dir are mutually exclusive")
                local_dir = client_dir
        if local_dir is not None and remote is not None:
            raise ValueError("EngramStore: local_dir and remote are mutually exclusive")

        specs: dict[str, tuple[int, int]] = {}
        if layers is not None:
            if tables is not None:
                raise ValueError("EngramStore: give tables= (table API) or layers= (layer API), not both")
            if not isinstance(layers, Mapping):
                raise TypeError(f"EngramStore layers must be a dict of layer id -> EngramStoreConfig, got {type(layers).__name__}")
            if not layers:
                raise ValueError("EngramStore requires at least one layer")
            for lid, c in layers.items():
                self._layers[lid] = _layer_of(lid, c)
            self._layers = dict(sorted(self._layers.items()))
            for layer in self._layers.values():
                for name, n in zip(layer.names, layer.vocab):
                    specs[name] = (n, layer.row_bytes)
        else:
            if tables is None:
                raise ValueError("EngramStore: give tables={name: {'num_rows': N, 'row_bytes': R}} (or layers=)")
            if not isinstance(tables, Mapping) or not tables:
                raise ValueError("EngramStore: tables must be a non-empty dict of name -> spec")
            for name, spec in tables.items():
                if not isinstance(name, str):
                    raise TypeError(f"scatterkit: table names are str, got {type(name).__name__}")
                if "\0" in name:
                    raise ValueError(f"scatterkit: table name {name!r} holds a NUL")
                specs[name] = _spec_of(name, spec)
            if local_dir is None and remote is None:
                raise ValueError("EngramStore: give local_dir= (a local store) or remote= (an owner's tables)")
        self._specs = specs
        self.namespace = DEFAULT_NAMESPACE if namespace is None else namespace
        self.local_dir = None if local_dir is None else os.path.abspath(local_dir)
        self.remote = None
        row_sizes = {r for _, r in specs.values()}
        self._row_bytes = row_sizes.pop() if len(row_sizes) == 1 else None

        if local_dir is None and remote is None:
            return  # a layer store with metadata only (Mooncake's EngramStore(layers) without a store)
        cfg: dict[str, Any] = {
            "namespace": self.namespace,
            "tables": {n: {"num_rows": s[0], "row_bytes": s[1]} for n, s in specs.items()},
            "workers": workers,
            "pin": pin,
            "skip_row_checksums": bool(skip_row_checksums),
        }
        if remote is not None:
            cfg["remote"] = self.remote = _remote_config(remote, buffer_bytes)
        else:
            cfg["local_dir"] = self.local_dir
        lib = _capi.lib()
        err, h = sk_error(), _u64()
        _capi.check(lib.open(json.dumps(cfg).encode(), h, err), err, "open")
        self._lib = lib
        self._native = _Native(lib, h.value)
        self._hc = _u64(h.value)
        self._raw_lookup = lib.lookup_raw
        self._raw_lookupv = lib.lookupv_raw
        self._open = True
        self._alive[0] = True
        self.lookup = self._bind_lookup()

    # ---- lifetime

    def close(self) -> None:
        """Close the store: servers stop, later calls raise StoreClosedError.
        Arrays from empty() stay valid memory; the native store is released
        when the last of them is dropped. Idempotent."""
        if not self._open:
            return
        self._open = self._alive[0] = False
        self._tls.__dict__.clear()  # this thread's cached arguments; other threads' go with the store
        servers, self._servers = self._servers, []
        for sv in servers:
            try:
                sv.close()
            except RuntimeError:
                pass  # a server failing to stop cleanly does not keep the store open
        with self._cols_lock:
            self._cols = {}  # the column sets go with their last reference
        with self._dev_lock:
            self._devs = {}  # the native close detaches them (after the device's pending work)
        self._native.close()

    @property
    def closed(self) -> bool:
        return not self._open

    def __enter__(self) -> "EngramStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"remote={self.remote!r}" if self.remote else f"local_dir={self.local_dir!r}"
        state = "" if self._open else " closed" if self._native else " metadata-only"
        return f"<scatterkit EngramStore namespace={self.namespace!r} {where} tables={len(self._specs)}{state}>"

    def _check_open(self) -> None:
        if not self._open:
            if self._native is None:
                raise RuntimeError("EngramStore has no tables to read or write: open it with local_dir= or a store client")
            raise StoreClosedError("scatterkit: store closed")

    # ---- tables

    @property
    def tables(self) -> tuple[str, ...]:
        """The store's table names, sorted."""
        return tuple(sorted(self._specs))

    def get_table_spec(self, name: str) -> TableSpec:
        """The table's spec and whether it holds rows (KeyError if unknown)."""
        self._check_open()
        err, n, r, pop = sk_error(), _i64(), _i64(), ctypes.c_int32()
        _capi.check(self._lib.table_spec(self._hc.value, _cname(name), n, r, pop, err), err)
        return TableSpec(n.value, r.value, bool(pop.value))

    def remove(self, name: str) -> None:
        """Delete the table's snapshot (it stays declared: populate may fill
        it again). Other stores that have it mapped keep reading it."""
        self._check_open()
        err = sk_error()
        _capi.check(self._lib.remove(self._hc.value, _cname(name), err), err)

    def populate(self, table_id: Any, rows: Any, config: Any = None) -> None:
        """Copy immutable rows into the table, published atomically; a table
        that holds rows raises TableExistsError (a FileExistsError).

        rows: a uint8 [N,R] numpy array or CPU tensor, any C-contiguous
        buffer of N*R bytes, or an iterable of such chunks (streamed, for
        tables larger than memory; an error anywhere aborts, publishing
        nothing). With an int table_id it is the layer API's populate
        (layer_id, [head tables]); config (Mooncake's ReplicateConfig) is
        accepted and unused there."""
        if isinstance(table_id, (int, np.integer)) and not isinstance(table_id, bool):
            return self._populate_layer(table_id, rows)
        if config is not None:
            raise TypeError("scatterkit: populate(table_id, rows) takes no config for a named table")
        self._check_open()
        spec = self._specs.get(table_id) if isinstance(table_id, str) else None
        if spec is None:
            if not isinstance(table_id, str):
                raise TypeError(f"scatterkit: table_id is a {type(table_id).__name__}: want a table name")
            raise UnknownTableError(f"engram: table {table_id!r}: unknown table")
        if _arrays.is_arraylike(rows):
            self._populate_whole(table_id, spec, rows)
        elif hasattr(rows, "__iter__") and not isinstance(rows, (str, Mapping)):
            self._populate_stream(table_id, rows)
        else:
            raise NoConversionError(
                f"scatterkit: rows is a {type(rows).__name__}: want a uint8 array, a tensor, a buffer or an iterable of chunks"
            )

    def _populate_whole(self, name: str, spec: tuple[int, int], rows: Any) -> None:
        a = _rows_array(rows, "rows")
        n, r = spec
        if a.shape not in ((n, r), (n * r,)):
            raise ValueError(f"scatterkit: rows for {name!r} have shape {a.shape}: want ({n}, {r}) or ({n * r},)")
        err = sk_error()
        _capi.check(self._lib.populate(self._hc.value, _cname(name), a.ptr, a.nbytes, err), err)

    def _populate_stream(self, name: str, chunks: Iterable[Any]) -> None:
        lib, err, w = self._lib, sk_error(), _u64()
        _capi.check(lib.populate_begin(self._hc.value, _cname(name), w, err), err)
        try:
            for i, chunk in enumerate(chunks):
                a = _rows_array(chunk, f"chunk {i}")
                if a.nbytes:
                    _capi.check(lib.populate_write(w.value, a.ptr, a.nbytes, err), err, f"chunk {i}")
        except BaseException:
            lib.populate_abort(w.value)
            raise
        _capi.check(lib.populate_commit(w.value, err), err)

    # ---- lookups

    def lookup(self, table_ids: Sequence[Any], ids: Any, output: Any, *, offsets: Any = None, stream: Any = None) -> None:
        """Gather rows: ids[t, k] of table table_ids[k] into output row (t, k).

        ids: int32/int64 [T,K], C-contiguous. output: uint8 [T,K,R]
        (token-major), [K,T,R] (head-major, when T != K), or any
        non-overlapping strided view indexed [t, k]. Id -1 leaves its row
        untouched; offsets ([K] ints) are subtracted from column k's ids.
        Names may repeat. CPU: synchronous; returns None; on any error
        nothing is written (stream is ignored).

        CUDA output (ids on the same device, offsets in host memory): the
        lookup is enqueued on stream (a torch.cuda.Stream, a cupy Stream,
        or a raw CUstream handle; default torch's current stream, or the
        array's own for __cuda_array_interface__) and the call returns
        None. Argument errors raise and enqueue nothing; a bad id is found
        on the device, leaves its row untouched (all rows, cuda_strict)
        and is raised by check_status(). The first CUDA lookup on a device
        attaches the store there (see warmup(); not inside a capture).

        CUDA output on a remote store: the ids are read back after the
        stream's earlier work (the stream is synchronized), the request is
        checked whole on the host (a bad id raises RowIDError and nothing
        is written), and the owner's rows land in the output through the
        store's pinned buffer memory by copies on stream; the call returns
        once they are there. Inside a CUDA graph capture it records the
        lookup instead (no wait): each replay hands the ids the captured
        tensor holds to the library's proxy thread, which fetches their
        rows, in stream order (remote capture_spin_us: its busy poll); a bad
        id or a failed transfer leaves the output as it was and is raised
        by check_status().

        With int table_ids it is the layer API's lookup: single-head
        layers, [H,T] int64 ids into a [H,T,R] output."""
        # An open store's instances carry _bind_lookup's closure as
        # .lookup; this method serves metadata-only and closed stores.
        return self._lookup(table_ids, ids, output, offsets, stream)

    def _bind_lookup(self):
        """lookup as a closure over the store's state: the hot path, a call
        with this thread's last (tuple of names, ids, output, offsets) with
        ids and output unchanged, is one foreign call with the arguments
        prepared then. Closure cells are cheaper than attribute lookups,
        and the per-call budget is about a microsecond (issue 16: <= 2 us
        above the Go call, a ctypes call of 13 values takes half of it).
        The slow path goes through a weak reference (no cycle)."""
        tls, raw, alive, nd, error = self._tls, self._raw_lookupv, self._alive, _ndarray, _capi.error
        rawc, gen, data = self._lib.cuda_lookupv_raw, self._dev_gen, np_data
        ref = weakref.ref(self)

        def lookup(table_ids, ids, output, *, offsets=None, stream=None):
            if alive[0]:
                d = tls.__dict__
                last = d.get("last")
                if (
                    last is not None
                    and last[0] is table_ids
                    and last[2] is output
                    and last[3] is offsets
                    and (output.shape == last[5] if type(output) is nd else last[10](output) == last[5])
                ):
                    if last[1] is ids and (ids.shape == last[4] if type(ids) is nd else last[9](ids) == last[4]):
                        rc = raw(*last[6])
                        if rc:
                            raise error(rc, last[7])
                        return None
                    # A new numpy ids array like the last (an engine's usual
                    # step): its pointer goes into the prepared arguments.
                    if type(ids) is nd and ids.dtype is last[12] and ids.shape == last[4] and ids.flags.c_contiguous:
                        p = data(ids)
                        if p + last[15] <= last[13] or last[14] <= p:  # not overlapping the output
                            last[11].ids = p
                            last[1] = ids  # keeps it alive, and the next same-array call hot
                            rc = raw(*last[6])
                            if rc:
                                raise error(rc, last[7])
                            return None
                c = d.get("cuda")  # the CUDA call's cache (_cuda_lookup)
                if (
                    c is not None
                    and c[0] is table_ids
                    and c[1] is ids
                    and c[2] is output
                    and c[3] is offsets
                    and c[4] is stream
                    and c[5] == gen[0]
                    and c[6](ids) == c[7]
                    and c[6](output) == c[8]
                ):
                    la = c[9]
                    if stream is None:
                        la.stream = c[10](c[11])
                    rc = rawc(c[12], c[13])
                    if rc:
                        raise error(rc, c[14])
                    return None
            return EngramStore._lookup(ref(), table_ids, ids, output, offsets, stream)

        lookup.__doc__, lookup.__name__, lookup.__qualname__ = EngramStore.lookup.__doc__, "lookup", "EngramStore.lookup"
        return lookup

    def _lookup(self, table_ids, ids, output, offsets, stream) -> None:
        # Every call that is not the hot path's comes here; numpy ids and a
        # kept output are inlined (a new ids array per call is an engine's
        # usual step, and this is its cost).
        if type(table_ids) is tuple:
            key = table_ids
        elif isinstance(table_ids, str):
            raise TypeError("scatterkit: table_ids is one str: want a sequence of table names (one per column)")
        else:
            key = tuple(table_ids)
        if not key or type(key[0]) is not str or not self._open:
            if key and isinstance(key[0], (int, np.integer)) and not isinstance(key[0], bool):
                return self._lookup_layers(key, ids, output)
            self._check_open()
        tls = self._tls
        d = tls.__dict__
        lc = d.get("cols")  # this thread's last column set, by identity of its tuple
        if lc is not None and lc[0] is table_ids:
            cols = lc[1]
        else:
            cols = self._cols.get(key) or self._columns(key)
            if key is table_ids:
                tls.cols = (table_ids, cols)
        k, r = cols.k, cols.row_bytes
        if type(output) is not _ndarray and _arrays.on_cuda(output):
            return self._cuda_lookup(table_ids, cols, ids, output, offsets, stream)
        dt = ids.dtype if type(ids) is _ndarray else None
        shape = ids.shape if dt is not None else None
        if (dt is _I64 or dt is _I32) and len(shape) == 2 and shape[1] == k and ids.flags.c_contiguous:
            t, ip, bits, ikeep = shape[0], np_data(ids), 64 if dt is _I64 else 32, ids
            inb = t * k * (bits >> 3)
        else:
            t, ip, inb, bits, ikeep = _ids_args(ids, k)
        # The output is usually the same buffer call after call: its
        # checked description (for this column set and T) is kept per thread.
        oc = d.get("out")
        if (
            oc is None
            or oc[0] is not output
            or oc[3] is not cols
            or oc[8] != t
            or (output.shape != oc[2] if type(output) is _ndarray else oc[1](output) != oc[2])
        ):
            oargs, lo, hi = _output_args(output, t, k, r)
            fo = _arrays.fingerprinter(output)
            oc = tls.out = (output, fo, fo(output), cols, oargs, lo, hi, _i64(t), t)
        lo, hi = oc[5], oc[6]
        offs = okeep = None
        if offsets is not None:
            offs, okeep = _offsets(offsets, k)
        if t == 0:
            return None
        if ip < hi and lo < ip + inb:
            raise ValueError("scatterkit: output overlaps ids")
        if offs is not None and offs.value < hi and lo < offs.value + 8 * k:
            raise ValueError("scatterkit: output overlaps offsets")
        err_ref = d.get("err_ref")
        if err_ref is None:
            tls.err = sk_error()
            err_ref = tls.err_ref = ctypes.byref(tls.err)
        o = oc[4]
        la = _capi.sk_lookup_args(
            self._hc.value, cols.handle.value, t, k, bits, ip, o[0].value, o[1].value, o[2].value, o[3].value, o[4].value,
            None if offs is None else offs.value,
        )
        args = (ctypes.byref(la), err_ref)  # byref keeps la alive
        # The hot path's cache: immutable names and offsets only (a list
        # may change between calls; an array's values are read per call).
        if type(table_ids) is tuple and (offsets is None or isinstance(offsets, (tuple, _ndarray))):
            if dt is not None:
                fi, fp = _arrays.fingerprint_ndarray, shape
            else:
                fi = _arrays.fingerprinter(ids)
                fp = fi(ids)
            # A list: a new ids array of the same shape and dtype replaces
            # slot 1 in place (the closure's second hot path).
            tls.last = [
                table_ids, ids, output, offsets, fp, oc[2], args, tls.err, (ikeep, okeep), fi, oc[1],
                la, dt, lo, hi, inb,
            ]
        rc = self._raw_lookupv(*args)
        if rc:
            raise _capi.error(rc, tls.err)
        return None

    def _columns(self, key: tuple) -> _Columns:
        c = self._cols.get(key)
        if c is not None:
            return c
        if not key:
            raise ValueError("scatterkit: table_ids is empty: want one table name per column")
        rows = set()
        for name in key:
            if not isinstance(name, str):
                raise TypeError(f"scatterkit: table_ids holds a {type(name).__name__}: want table names (str)")
            spec = self._specs.get(name)
            if spec is None:
                raise UnknownTableError(f"engram: table {name!r}: unknown table")
            rows.add(spec[1])
        if len(rows) != 1:
            raise ValueError(f"scatterkit: table_ids mix row sizes {sorted(rows)}: one lookup has one row size")
        blob = b"".join(_cname(n) + b"\0" for n in key)
        err, h = sk_error(), _u64()
        _capi.check(self._lib.columns(self._hc.value, blob, len(key), h, err), err)
        c = _Columns(h.value, len(key), rows.pop(), key, self._lib.columns_free)
        with self._cols_lock:
            if not self._open:
                raise StoreClosedError("scatterkit: store closed")
            if len(self._cols) >= _COLUMN_CACHE:
                del self._cols[next(iter(self._cols))]  # the oldest; freed once no thread holds it
            self._cols[key] = c
        return c

    def bench_lookup(self, table_ids: Sequence[str], ids: Any, output: Any, n: int, *, offsets: Any = None) -> float:
        """The same lookup run n times inside Go (sk_bench_lookup), after
        one check: seconds per lookup, the Go-side ceiling of a Python
        lookup (for benchmarks)."""
        self._check_open()
        cols = self._columns(table_ids if type(table_ids) is tuple else tuple(table_ids))
        t, ip, _, bits, keep = _ids_args(ids, cols.k)
        oargs, _, _ = _output_args(output, t, cols.k, cols.row_bytes)
        offs, okeep = _offsets(offsets, cols.k) if offsets is not None else (None, None)
        err, ns = sk_error(), _i64()
        rc = self._lib.bench_lookup(
            self._hc, cols.handle, t, cols.k, ip, bits, *oargs, offs, n, ctypes.byref(ns), ctypes.byref(err)
        )
        _capi.check(rc, err)
        del keep, okeep
        return ns.value / n / 1e9

    def warmup(self, table_ids: Sequence[str] | None = None, *, device: Any = None, stream: Any = None) -> None:
        """Do every one-time step before the first lookup, so that the
        lookups after it may be captured in a CUDA graph.

        CPU lookups have none but the column set of table_ids (built here
        when given, else on first use). CUDA: the store is attached to the
        device (its tables registered for zero-copy, or copied, per cuda=;
        kernels loaded) and every kernel is run once on stream, which is
        then synchronized. device: an ordinal, "cuda:N", a torch.device,
        or None: torch's current device when torch has initialised CUDA,
        else no CUDA step ("cpu" says so explicitly). Not while a stream
        is being captured."""
        self._check_open()
        if table_ids is not None:
            self._columns(table_ids if type(table_ids) is tuple else tuple(table_ids))
        ordinal = self._warmup_device(device)
        if ordinal is None:
            return
        h = self._device(ordinal, None)
        err = sk_error()
        _capi.check(self._lib.cuda_warmup(h, self._stream_handle(stream, ordinal, None), err), err, "CUDA warmup")

    def _warmup_device(self, device: Any) -> int | None:
        if device is None:
            torch = sys.modules.get("torch")
            if torch is None or not torch.cuda.is_initialized():
                return None
            return torch.cuda.current_device()
        if isinstance(device, bool):
            raise TypeError("scatterkit: device is a bool: want an ordinal, 'cuda:N' or a torch.device")
        if isinstance(device, int):
            return device
        kind, index = getattr(device, "type", None), getattr(device, "index", None)
        if kind is None:
            kind, _, n = str(device).partition(":")
            index = int(n) if n.isdigit() else None
        if kind == "cpu":
            return None
        if kind != "cuda":
            raise ValueError(f"scatterkit: device {device!r}: want a CUDA device or 'cpu'")
        if index is None:
            torch = sys.modules.get("torch")
            index = torch.cuda.current_device() if torch is not None else 0
        return index

    # ---- CUDA

    def _device(self, ordinal: int, stream: int | None) -> int:
        """The attachment of ordinal, made on first use (never inside a
        capture of stream: attaching registers memory and loads kernels,
        which a capture forbids)."""
        h = self._devs.get(ordinal)
        if h is not None:
            return h
        with self._dev_lock:
            h = self._devs.get(ordinal)
            if h is not None:
                return h
            if not self._open:
                raise StoreClosedError("scatterkit: store closed")
            if not self._lib.cuda:
                raise NotImplementedError(
                    f"scatterkit: CUDA lookups need libscatterkit_cuda.so and a CUDA driver; loaded {self._lib.path}"
                    + (" (the driver did not initialise)" if _capi.driver() is None else "")
                )
            drv = _capi.driver()
            if stream is not None and drv is not None and drv.capturing(stream):
                raise RuntimeError(
                    f"scatterkit: the first CUDA lookup on device {ordinal} is inside a graph capture: call "
                    f"store.warmup(device={ordinal}) before capturing (it attaches the store to the device, which a "
                    "capture forbids)"
                )
            err, dh = sk_error(), _u64()
            _capi.check(self._lib.cuda_attach(self._hc.value, ordinal, self._cuda_flags, dh, err), err, f"CUDA attach (device {ordinal})")
            self._devs[ordinal] = h = dh.value
            return h

    def detach_cuda(self, device: Any = None) -> None:
        """Release the store's CUDA attachments (all, or device's): waits
        for the device's pending work, unregisters or frees the tables.
        Graphs holding lookups of the attachment must be destroyed first.
        The next CUDA lookup attaches again, mapping tables populated since."""
        self._check_open()
        with self._dev_lock:
            if device is None:
                take = list(self._devs)
            else:
                d = self._warmup_device(device)
                take = [d] if d in self._devs else []
            hs = [(d, self._devs.pop(d)) for d in take]
        self._dev_gen[0] += 1
        for d, h in hs:
            self._dev_k.pop(d, None)
            err = sk_error()
            _capi.check(self._lib.cuda_detach(h, err), err, f"CUDA detach (device {d})")

    def _current_stream_getter(self, out: Any):
        """A function of the device ordinal giving the current stream for a
        lookup into out with stream=None: torch's (its raw getter where
        this torch has it: a Stream object per call costs microseconds),
        or _stream_handle's answer."""
        torch = sys.modules.get("torch")
        if torch is not None and (out is None or _arrays.is_torch_like(out)) and torch.cuda.is_initialized():
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is not None:
                return raw
            return lambda ordinal: torch.cuda.current_stream(ordinal).cuda_stream
        return lambda ordinal: self._stream_handle(None, ordinal, out)

    def _stream_handle(self, stream: Any, ordinal: int, out: Any) -> int:
        """A CUstream for stream (see lookup)."""
        if stream is None:
            torch = sys.modules.get("torch")
            if torch is not None and (out is None or _arrays.is_torch_like(out)) and torch.cuda.is_initialized():
                raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
                return raw(ordinal) if raw is not None else torch.cuda.current_stream(ordinal).cuda_stream
            cai = getattr(out, "__cuda_array_interface__", None) if out is not None else None
            s = cai.get("stream") if isinstance(cai, dict) else None
            if s == 1 or not s:
                return 0  # the legacy default stream
            return s  # 2 is the per-thread default stream, as the driver reads it
        if isinstance(stream, bool):
            raise TypeError("scatterkit: stream is a bool: want a torch.cuda.Stream, a cupy Stream or a CUstream handle")
        if isinstance(stream, int):
            if stream < 0:
                raise ValueError(f"scatterkit: stream {stream}: a CUstream handle is not negative")
            return stream
        for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            h = getattr(stream, attr, None)
            if isinstance(h, int):
                d = getattr(stream, "device", None)
                di = getattr(d, "index", d if isinstance(d, int) else None)
                if isinstance(di, int) and di != ordinal:
                    raise ValueError(f"scatterkit: stream is on device {di}, the output on device {ordinal}")
                return h
        raise TypeError(
            f"scatterkit: stream is a {type(stream).__name__}: want a torch.cuda.Stream, a cupy Stream or a CUstream handle"
        )

    def _cuda_lookup(self, table_ids: Any, cols: _Columns, ids: Any, output: Any, offsets: Any, stream: Any) -> None:
        k, r = cols.k, cols.row_bytes
        if not self._lib.cuda:
            raise NotImplementedError(
                f"scatterkit: CUDA lookups need libscatterkit_cuda.so and a CUDA driver; loaded {self._lib.path}"
                + (" (the driver did not initialise)" if _capi.driver() is None else "")
            )
        o = describe(output, "output", cuda=True)
        if o.dtype != "uint8":
            raise ValueError(f"scatterkit: output is {o.dtype}: want uint8 (view other dtypes as bytes)")
        if type(ids) is _ndarray:
            raise ValueError(f"scatterkit: ids are in host memory, the output on CUDA device {o.device}: want the ids on the output's device")
        a = describe(ids, "ids", cuda=True)
        if a.device != o.device:
            where = "host memory" if a.device < 0 else f"CUDA device {a.device}"
            raise ValueError(f"scatterkit: ids are in {where}, the output on CUDA device {o.device}: want the ids on the output's device")
        bits = _check_ids(a, k)
        t = a.shape[0]
        base, n, off, ts, ks = _output_geometry(o.ptr, o.shape, o.strides, o.readonly, t, k, r)
        offs = okeep = None
        if offsets is not None:
            if not isinstance(offsets, (list, tuple, _ndarray)) and _arrays.on_cuda(offsets):
                raise ValueError("scatterkit: offsets are in CUDA memory: they are read on the host when the lookup is enqueued (pass a list or a CPU array)")
            offs, okeep = _offsets(offsets, k)
        if t == 0:
            return None
        if a.ptr < base + n and base < a.ptr + a.nbytes:
            raise ValueError("scatterkit: output overlaps ids")
        s = self._stream_handle(stream, o.device, output)
        gen = self._dev_gen[0]
        dev = self._device(o.device, s)
        tls = self._tls
        err = tls.__dict__.get("cuda_err")
        if err is None:
            err = tls.cuda_err = sk_error()
        la = _capi.sk_cuda_lookup_args(
            dev, cols.handle.value, s, t, k, bits, a.ptr, base, n, off, ts, ks, None if offs is None else offs.value
        )
        args = (ctypes.byref(la), ctypes.byref(err))
        self._dev_k[o.device] = k
        # The repeat's cache (the closure's hot path): immutable names and
        # offsets only, ids and output unchanged (pointer, shape, strides).
        if type(table_ids) is tuple and (offsets is None or isinstance(offsets, (tuple, _ndarray))):
            fp = _arrays.cuda_fingerprinter(ids, output)
            if fp is not None:
                tls.cuda = (
                    table_ids, ids, output, offsets, stream, gen, fp, fp(ids), fp(output), la,
                    self._current_stream_getter(output), o.device, args[0], args[1], err, (a.keep, o.keep, okeep),
                )
        rc = self._lib.cuda_lookupv_raw(*args)
        if rc:
            raise _capi.error(rc, err)
        return None

    def check_status(self, stream: Any = None, *, device: Any = None) -> None:
        """Synchronize stream (default: torch's current stream of the
        device), then raise RowIDError for the first bad id that a CUDA
        lookup met since the last check (on device, default every attached
        device), its (t, k) decoded with the K of the device's last lookup.
        Its row (every row, with cuda_strict) was left untouched. Lookups
        on other streams: synchronize them first."""
        self._check_open()
        if device is None:
            ords = list(self._devs)
        else:
            d = self._warmup_device(device)
            ords = [d] if d in self._devs else []
        for d in ords:
            h = self._devs.get(d)
            if h is None:
                continue
            err = sk_error()
            rc = self._lib.cuda_status(h, self._stream_handle(stream, d, None), self._dev_k.get(d, 1), err)
            if rc == _capi.SK_EID:
                raise RowIDError(
                    f"{err.msg.decode('utf-8', 'replace')} (device {d}: the id at (t={err.t}, k={err.k}) is in device "
                    "memory; its row was left untouched)",
                    err.t, err.k, -1,
                )
            _capi.check(rc, err, f"CUDA status (device {d})")

    def bench_replay(self, graph: Any, n: int, *, device: Any = None, stream: Any = None) -> float:
        """A graph captured elsewhere (a torch.cuda.CUDAGraph, or a raw
        CUgraphExec handle) launched n times by the Go loop that
        bench_graph times its own graph with (sk_cuda_bench_replay):
        seconds per launch. Beside bench_graph it compares two captures'
        contents under one launcher (benchmarks)."""
        self._check_open()
        if isinstance(graph, int) and not isinstance(graph, bool):
            exec_ = graph
        else:
            get = getattr(graph, "raw_cuda_graph_exec", None)
            if get is None:
                raise NotImplementedError("scatterkit: this graph object gives no raw CUgraphExec (torch >= 2.5 does)")
            exec_ = get()
            exec_ = exec_ if isinstance(exec_, int) else int(exec_)
        ordinal = self._warmup_device(0 if device is None and "torch" not in sys.modules else device)
        if ordinal is None:
            raise ValueError("scatterkit: bench_replay wants a CUDA device")
        s = self._stream_handle(stream, ordinal, None)
        dev = self._device(ordinal, s)
        err, ns = sk_error(), _i64()
        _capi.check(self._lib.cuda_bench_replay(dev, exec_, s, n, ctypes.byref(ns), err), err)
        return ns.value / n / 1e9

    def bench_graph(self, table_ids: Sequence[str], ids: Any, output: Any, n: int, *, offsets: Any = None, stream: Any = None) -> float:
        """The same CUDA lookup captured into a graph in Go and replayed n
        times (sk_cuda_bench_graph): seconds per replay, the Go-side
        ceiling of a lookup replayed from torch.cuda.graph (benchmarks).
        stream must not be the legacy default stream."""
        self._check_open()
        cols = self._columns(table_ids if type(table_ids) is tuple else tuple(table_ids))
        o = describe(output, "output", cuda=True)
        a = describe(ids, "ids", cuda=True)
        if o.device < 0 or a.device != o.device:
            raise ValueError("scatterkit: bench_graph wants ids and output on one CUDA device")
        t = a.shape[0]
        base, nb, off, ts, ks = _output_geometry(o.ptr, o.shape, o.strides, o.readonly, t, cols.k, cols.row_bytes)
        offs, okeep = _offsets(offsets, cols.k) if offsets is not None else (None, None)
        s = self._stream_handle(stream, o.device, output)
        dev = self._device(o.device, s)
        err, ns = sk_error(), _i64()
        rc = self._lib.cuda_bench_graph(
            dev, cols.handle, s, t, cols.k, a.ptr, _ID_BITS[a.dtype], base, nb, off, ts, ks, offs, n, ctypes.byref(ns), err
        )
        del okeep
        _capi.check(rc, err)
        return ns.value / n / 1e9

    def empty(self, T: int, K: int, *, like: Any = None, row_bytes: int | None = None) -> Any:
        """A new uint8 [T,K,R] output in memory the store provides: on a
        remote store registered memory the owner writes into (a lookup into
        it lands in place, no copy); on a local store ordinary memory.
        like="torch" (or a torch tensor) returns a torch CPU tensor view.
        The memory is freed when the last array or tensor over it goes.
        like="cuda" (or "cuda:N", or a CUDA tensor): a new torch uint8
        tensor on that device (a remote store's lookups land in it through
        its buffer memory)."""
        self._check_open()
        T, K = operator.index(T), operator.index(K)
        r = self._row_bytes if row_bytes is None else operator.index(row_bytes)
        if r is None:
            raise ValueError(f"scatterkit: the tables have different row sizes: give row_bytes= ({sorted({s[1] for s in self._specs.values()})})")
        if T < 0 or K < 0 or r < 1:
            raise ValueError(f"scatterkit: empty({T}, {K}) of {r}-byte rows")
        n = T * K * r
        cuda = getattr(like, "is_cuda", False) or (isinstance(like, str) and like.startswith("cuda"))
        if cuda:
            if cuda_device_count() == 0:
                raise NotImplementedError(f"scatterkit: empty(like={like!r}): no CUDA device here (library {self._lib.path})")
            import torch

            return torch.empty((T, K, r), dtype=torch.uint8, device=like.device if hasattr(like, "device") else like)
        arr = self._native.buffer(n).array().reshape(T, K, r) if n else np.empty((T, K, r), np.uint8)
        if like is None or like == "numpy" or isinstance(like, np.ndarray):
            return arr
        if like == "torch" or _arrays.is_torch_like(like):
            import torch

            return torch.from_numpy(arr)
        raise ValueError(f"scatterkit: like={like!r}: want None, 'numpy', 'torch' or 'cuda'")

    def serve(self, transport: str = "tcp", addr: str = "", directory: str | os.PathLike | None = None) -> Server:
        """Serve this local store's populated tables to remote stores (for
        tests and owners; scatterd is the daemon). addr "" picks a local
        one. With directory (an etcd URI, "etcd://host:2379/prefix", or a
        discovery file path) a record per table is published there, so
        stores opened with remote="etcd://..." find it by namespace;
        closing the server withdraws them. Closing the store closes its
        servers."""
        self._check_open()
        err, h = sk_error(), _u64()
        bound = ctypes.create_string_buffer(512)
        if directory is None:
            rc = self._lib.serve(self._hc.value, transport.encode(), addr.encode(), bound, len(bound), h, err)
        else:
            d = os.fspath(directory).encode()
            rc = self._lib.serve_publish(self._hc.value, transport.encode(), addr.encode(), d, bound, len(bound), h, err)
        _capi.check(rc, err, "serve")
        sv = Server(self._native, h.value, transport, bound.value.decode())
        self._servers.append(sv)
        return sv

    # ---- the layer/head API (Mooncake's EngramStore)

    def _layer(self, layer_id: Any) -> _Layer:
        try:
            return self._layers[layer_id]
        except (KeyError, TypeError):
            raise ValueError(f"Unknown Engram layer: {layer_id}") from None

    def get_layer_ids(self) -> list[int]:
        return sorted(self._layers)

    def get_num_heads(self, layer_id: int) -> int:
        return len(self._layer(layer_id).names)

    def get_row_bytes(self, layer_id: int) -> int:
        return self._layer(layer_id).row_bytes

    def get_table_vocab_sizes(self, layer_id: int) -> list[int]:
        return list(self._layer(layer_id).vocab)

    def get_store_keys(self, layer_id: int) -> list[str]:
        return list(self._layer(layer_id).keys)

    def get_table_names(self, layer_id: int) -> list[str]:
        """The tables holding the layer's heads (layer{L}.head{h})."""
        return list(self._layer(layer_id).names)

    def bind_local(self, layer_id: int, arrays: Sequence[Any]) -> None:
        raise NotImplementedError(
            "scatterkit: bind_local (serving caller-owned arrays without a copy) is not supported: the Go store "
            "serves only its own snapshots; open the store with local_dir= and populate() instead"
        )

    def _populate_layer(self, layer_id: int, tables: Any) -> None:
        layer = self._layer(layer_id)
        if not isinstance(tables, Sequence) or isinstance(tables, (str, bytes)):
            raise RuntimeError("embedding_buffers must be a list of per-head uint8 arrays")
        if len(tables) != len(layer.names):
            raise RuntimeError(f"embedding_buffers size must match num_heads ({len(tables)} != {len(layer.names)})")
        self._check_open()
        if self.remote is not None:
            raise RuntimeError("populate failed: a remote store is read-only (its owner populates the tables)")
        arrays = []
        for h, t in enumerate(tables):
            try:
                a = describe(t, f"head {h} table")
            except (TypeError, ValueError) as e:
                raise RuntimeError(f"embedding_buffers must be NumPy arrays or CPU tensors: {e}") from None
            if a.dtype != "uint8" or not a.c_contiguous():
                raise RuntimeError("rows must be contiguous uint8 arrays")
            if a.shape != (layer.vocab[h], layer.row_bytes):
                raise RuntimeError(
                    f"embedding buffer must match per-head table shape: head {h} is {a.shape}, "
                    f"want ({layer.vocab[h]}, {layer.row_bytes})"
                )
            arrays.append(a)
        for name in layer.names:
            if self.get_table_spec(name).populated:
                raise TableExistsError(
                    f"EngramStore populate requires an empty destination: table {name!r} of layer {layer_id} "
                    "holds rows. Remove the existing layer first."
                )
        done = []
        try:
            for name, a in zip(layer.names, arrays):
                err = sk_error()
                _capi.check(self._lib.populate(self._hc.value, _cname(name), a.ptr, a.nbytes, err), err)
                done.append(name)
        except Exception as e:
            for name in done:  # a layer is all its heads or none
                try:
                    self.remove(name)
                except Exception:
                    pass
            raise _as_runtime(e) from e

    def lookup_into(self, layer_id: int, row_ids: Any, output: Any) -> None:
        """Read int64 C-contiguous [B,L,H] ids of the layer into a uint8
        [B,L,H,R] C-contiguous output. Every id must be a row of its head's
        table (no -1); on error nothing is written (RuntimeError)."""
        ids = _layer_ids(row_ids, "lookup_into")
        layer = self._layer(layer_id)
        out = _layer_output(output, ids, layer, "lookup_into")
        if ids.nbytes == 0:
            return None
        self._check_open()
        self._layer_read([(layer, ids, out)])

    def lookup_many_into(self, layer_ids: Sequence[int], row_ids: Sequence[Any], outputs: Sequence[Any]) -> None:
        """lookup_into for several layers; every request is checked before
        any is read, so an error writes nothing."""
        n = len(layer_ids)
        if len(row_ids) != n or len(outputs) != n:
            raise RuntimeError("layer_ids, row_ids, and outputs must have equal lengths")
        reqs, spans = [], []
        for lid, rid, o in zip(layer_ids, row_ids, outputs):
            ids = _layer_ids(rid, "lookup_many_into")
            layer = self._layer(lid)
            out = _layer_output(o, ids, layer, "lookup_many_into")
            if ids.nbytes == 0:
                continue
            lo, hi = out.span()
            for plo, phi in spans:
                if lo < phi and plo < hi:
                    raise RuntimeError("lookup_many_into outputs overlap")
            spans.append((lo, hi))
            reqs.append((layer, ids, out))
        if reqs:
            self._check_open()
            self._layer_read(reqs)

    def _layer_read(self, reqs: list) -> None:
        # Check every id first (the layer API has no -1), so that a request
        # failing can never follow one that wrote.
        for layer, ids, out in reqs:
            v = _arrays.numpy_view(ids).reshape(-1, len(layer.names))
            if v.min() < 0 or (v.max(axis=0) >= np.asarray(layer.vocab)).any():
                bad = np.argwhere((v < 0) | (v >= np.asarray(layer.vocab)))[0]
                raise RuntimeError(
                    f"EngramStore lookup failed: id {int(v[tuple(bad)])} at token {int(bad[0])} head {int(bad[1])} "
                    f"is not a row of its table (0..{layer.vocab[bad[1]] - 1})"
                )
        for layer, ids, out in reqs:
            t, h, r = ids.nbytes // (8 * len(layer.names)), len(layer.names), layer.row_bytes
            self._read_into(layer.names, ids, t, out, h * r, r, every_row=True)

    def _read_into(self, names: tuple, ids: _arrays.Array, t: int, out: _arrays.Array, ts: int, ks: int, every_row: bool) -> None:
        """One lookup of [t, len(names)] int64 ids (a description) into out
        with strides ts, ks; errors as the layer API's RuntimeError. On a
        remote store an output outside the store's buffers is read through
        one of them and copied (the caller's memory is not registered)."""
        cols = self._columns(names)
        lo, hi = out.span()
        k = len(names)
        if self.remote is not None and not self._native.owns(lo, hi):
            r = out.shape[-1]
            stage = self.empty(t, k, row_bytes=r)  # token-major, registered
            self._read_into(names, ids, t, describe(stage, "stage"), k * r, r, every_row)
            head_major = t * k > 1 and ts != k * r
            src = stage.transpose(1, 0, 2) if head_major else stage  # out's layout
            dst = _arrays.numpy_view(out).reshape(src.shape)  # out is C-contiguous
            if every_row:
                np.copyto(dst, src)
            else:
                keep = _arrays.numpy_view(ids).reshape(t, k) != -1
                np.copyto(dst, src, where=(keep.T if head_major else keep)[..., None])
            return
        err = sk_error()
        rc = self._raw_lookup(
            self._hc, cols.handle, _i64(t), k, _vp(ids.ptr), 64, _vp(lo), _i64(hi - lo), _i64(out.ptr - lo),
            _i64(ts), _i64(ks), None, ctypes.byref(err),
        )
        if rc:
            raise _as_runtime(_capi.error(rc, err, "EngramStore lookup failed"))

    def _lookup_layers(self, layer_ids: tuple, row_ids: Any, output: Any) -> None:
        """Mooncake's lookup(table_ids, row_ids, output): single-head layers,
        int64 [H,T] ids into a uint8 [H,T,R] output; -1 skips."""
        layers = [self._layer(lid) for lid in layer_ids]
        for lid, layer in zip(layer_ids, layers):
            if len(layer.names) != 1:
                raise ValueError(f"lookup reads single-head layers: layer {lid} has {len(layer.names)} heads (use lookup_into)")
        ids = _layer_ids(row_ids, "lookup")
        h = len(layer_ids)
        if len(ids.shape) != 2 or ids.shape[0] != h:
            raise ValueError(f"lookup requires contiguous int64 IDs [heads,tokens]: got {ids.shape}, want [{h}, T]")
        t, r = ids.shape[1], layers[0].row_bytes
        try:
            o = describe(output, "output")
        except TypeError as e:
            raise ValueError(f"output must be a contiguous uint8 tensor: {e}") from None
        if o.dtype != "uint8" or o.readonly or not o.c_contiguous():
            raise ValueError("output must be contiguous writable uint8")
        if o.shape != (h, t, r):
            raise ValueError(f"output must have shape [heads,tokens,row_bytes]: got {o.shape}, want ({h}, {t}, {r})")
        if t == 0:
            return None
        self._check_open()
        tm = np.ascontiguousarray(_arrays.numpy_view(ids).T)  # the C ABI reads [T,K] ids
        tmd = describe(tm, "ids")
        names = tuple(layer.names[0] for layer in layers)
        self._read_into(names, tmd, t, o, r, t * r, every_row=False)

    def remove_from_store(self, layer_id: int, force: bool = False) -> int:
        """Remove the layer's tables; returns how many held rows (0 the
        second time). force is accepted for Mooncake's signature: local
        snapshots have no leases to break; a served table is refused."""
        layer = self._layer(layer_id)
        if self._native is None:
            raise RuntimeError("remove_from_store failed: EngramStore has no store (local_dir or store_client)")
        self._check_open()
        removed = 0
        for name in layer.names:
            populated = self.get_table_spec(name).populated
            try:
                self.remove(name)
            except Exception as e:
                if not populated:
                    continue  # nothing here (or another store's file we could not remove either)
                raise RuntimeError(f"remove_from_store failed: {e}") from e
            removed += 1
        return removed


# ---- argument helpers ------------------------------------------------------


def _cname(name: Any) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"scatterkit: a table name is a str, got {type(name).__name__}")
    if "\0" in name:
        raise ValueError(f"scatterkit: table name {name!r} holds a NUL")
    return name.encode()


def _rows_array(x: Any, what: str) -> _arrays.Array:
    a = describe(x, what)
    if a.dtype != "uint8":
        raise ValueError(f"scatterkit: {what} are {a.dtype}: want uint8 bytes (no implicit cast)")
    if not a.c_contiguous():
        raise ValueError(f"scatterkit: {what} with strides {a.strides} are not C-contiguous (np.ascontiguousarray copies)")
    return a


_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)  # the builtin descriptors arrays share
_NP_ID_BITS = {_I32: 32, _I64: 64}
_NP_U8 = {np.dtype(np.uint8)}


def _ids_args(x: Any, k: int) -> tuple:
    """(T, pointer, bytes, id bits, keep) of checked [T,K] ids."""
    if type(x) is _ndarray:  # the common case, without building a description
        bits = _NP_ID_BITS.get(x.dtype)
        shape = x.shape
        if bits is not None and len(shape) == 2 and shape[1] == k and x.flags.c_contiguous:
            return shape[0], _arrays.np_data(x), x.nbytes, bits, x
    a = describe(x, "ids")
    return a.shape[0], a.ptr, a.nbytes, _check_ids(a, k), a.keep


def _check_ids(a: _arrays.Array, k: int) -> int:
    """The id bits of described ids, checked to be [T,K] C-contiguous int32 or int64."""
    bits = _ID_BITS.get(a.dtype)
    if bits is None:
        raise ValueError(f"scatterkit: ids are {a.dtype}: want int32 or int64")
    if len(a.shape) != 2 or a.shape[1] != k:
        raise ValueError(f"scatterkit: ids have shape {a.shape}: want [T, {k}] (one column per table id)")
    if not a.c_contiguous():
        raise ValueError(f"scatterkit: ids with strides {a.strides} are not C-contiguous")
    return bits


def _output_args(x: Any, t: int, k: int, r: int) -> tuple:
    """((base, len, off, tstride, kstride) as ctypes values, lo, hi) of a
    checked output: uint8, writable, [T,K,R] (token-major) or [K,T,R]
    (head-major), rows contiguous. Go checks that no two rows overlap."""
    if type(x) is _ndarray and x.dtype in _NP_U8:
        ptr, shape, strides, ro = _arrays.np_data(x), x.shape, x.strides, not x.flags.writeable
    else:
        o = describe(x, "output")
        if o.dtype != "uint8":
            raise ValueError(f"scatterkit: output is {o.dtype}: want uint8 (view other dtypes as bytes)")
        ptr, shape, strides, ro = o.ptr, o.shape, o.strides, o.readonly
    g = _output_geometry(ptr, shape, strides, ro, t, k, r)
    return (_vp(g[0]), _i64(g[1]), _i64(g[2]), _i64(g[3]), _i64(g[4])), g[0], g[0] + g[1]


def _output_geometry(ptr: int, shape: tuple, strides: tuple, ro: bool, t: int, k: int, r: int) -> tuple:
    """(base, len, off, tstride, kstride) of a checked output (see
    _output_args), host or device memory alike."""
    if ro:
        raise ValueError("scatterkit: output is read-only")
    if len(shape) != 3 or shape[2] != r:
        raise ValueError(f"scatterkit: output has shape {shape}: want [{t}, {k}, {r}] or [{k}, {t}, {r}]")
    if shape[0] == t and shape[1] == k:
        ts, ks = strides[0], strides[1]
    elif shape[0] == k and shape[1] == t:
        ks, ts = strides[0], strides[1]
    else:
        raise ValueError(f"scatterkit: output has shape {shape}: want [{t}, {k}, {r}] or [{k}, {t}, {r}]")
    if r > 1 and strides[2] != 1 and t and k:
        raise ValueError(f"scatterkit: output rows have stride {strides[2]}: want 1 (each row's bytes contiguous)")
    lo = hi = ptr
    if t and k:
        for n, s in ((t, ts), (k, ks)):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        hi += r
    return lo, hi - lo, ptr - lo, ts, ks


def _offsets(x: Any, k: int):
    """(c_void_p, keep) for offsets: K int64 values."""
    if isinstance(x, (list, tuple)):
        if len(x) != k:
            raise ValueError(f"scatterkit: {len(x)} offsets for {k} columns")
        try:
            arr = (_i64 * k)(*(operator.index(v) for v in x))
        except TypeError:
            raise ValueError("scatterkit: offsets must be integers") from None
        return _vp(ctypes.addressof(arr)), arr
    a = describe(x, "offsets")
    if a.dtype != "int64" or a.shape != (k,) or not a.c_contiguous():
        raise ValueError(f"scatterkit: offsets are {a.dtype} {a.shape}: want {k} contiguous int64 values")
    return _vp(a.ptr), a.keep


def _layer_ids(x: Any, what: str) -> _arrays.Array:
    """The layer API's ids: int64, C-contiguous, never converted (NoConversionError)."""
    a = describe(x, "row_ids")
    if a.dtype != "int64":
        raise NoConversionError(f"{what} requires int64 row ids, got {a.dtype} (no implicit conversion)")
    if not a.c_contiguous():
        raise NoConversionError(f"{what} requires C-contiguous row ids (no implicit copy)")
    return a


def _layer_output(x: Any, ids: _arrays.Array, layer: _Layer, what: str) -> _arrays.Array:
    msg = f"{what} requires contiguous IDs [B,L,H] and matching writable uint8 output [B,L,H,row_bytes]"
    try:
        o = describe(x, "output")
    except (TypeError, ValueError) as e:
        raise RuntimeError(f"{msg}: {e}") from None
    h = len(layer.names)
    if len(ids.shape) != 3 or ids.shape[2] != h:
        raise RuntimeError(f"{msg}: ids are {ids.shape}, the layer has {h} heads")
    if o.dtype != "uint8" or o.readonly or not o.c_contiguous() or o.shape != ids.shape + (layer.row_bytes,):
        raise RuntimeError(f"{msg}: output is {o.dtype} {o.shape}{' read-only' if o.readonly else ''}")
    return o
