"""Shared fixtures: the library, a logged seed, stores with random tables.

The library is $SCATTERKIT_LIB, else the installed package's, else built
here once per session with the Go toolchain (about a minute on 2 cores).
Every test draws fresh random data from a generator seeded from the
session seed (printed in the header; set SCATTERKIT_SEED to replay) and
the test's name.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import zlib

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout's package, whatever the cwd
SEED = int(os.environ.get("SCATTERKIT_SEED") or random.SystemRandom().randrange(2**32))


def pytest_report_header(config):
    return f"scatterkit: seed {SEED} (SCATTERKIT_SEED={SEED} replays), library {os.environ.get('SCATTERKIT_LIB')}"


def pytest_configure(config):
    if os.environ.get("SCATTERKIT_LIB"):
        return
    from scatterkit import _capi

    if os.path.exists(_capi.library_path()):
        return
    out = os.path.join(config.rootpath if hasattr(config, "rootpath") else HERE, ".pytest_cache", "scatterkit-lib")
    os.makedirs(out, exist_ok=True)
    subprocess.run(
        ["go", "build", "-buildmode=c-shared", "-o", os.path.join(out, "libscatterkit.so"), "./capi"],
        cwd=TOOLS,
        check=True,
    )
    os.environ["SCATTERKIT_LIB"] = os.path.join(out, "libscatterkit.so")


@pytest.fixture
def rng(request):
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


def random_rows(rng, n, r):
    return rng.integers(0, 256, size=(n, r), dtype=np.uint8)


def poisoned(rng, shape):
    """An output full of random bytes (never all zero), and its copy."""
    out = rng.integers(0, 256, size=shape, dtype=np.uint8)
    out.flat[0] = 0xA5
    return out, out.copy()


@pytest.fixture
def make_store(tmp_path, rng):
    """make_store({name: (N, R)}, populate=True) -> (store, {name: rows})."""
    from scatterkit.engram import EngramStore

    made = []

    def make(tables, populate=True, namespace="test", **kw):
        s = EngramStore(
            tables={n: {"num_rows": nr, "row_bytes": r} for n, (nr, r) in tables.items()},
            namespace=namespace,
            local_dir=str(tmp_path / "engram"),
            **kw,
        )
        made.append(s)
        rows = {}
        if populate:
            for n, (nr, r) in tables.items():
                rows[n] = random_rows(rng, nr, r)
                s.populate(n, rows[n])
        return s, rows

    yield make
    for s in made:
        s.close()


@pytest.fixture
def torch():
    return pytest.importorskip("torch")
