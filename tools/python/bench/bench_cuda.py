#!/usr/bin/env python3
"""CUDA lookups from Python against their peers, measured in one run on
the GPU machine (a benchmark, never a timed test). Issue 16's goals:

- device tables (cuda="device"), R=264, N=98,304 rows per lookup
  (T=4096, K=24, every column the same 1M-row table): a Python lookup is
  >= 3x as fast as torch.index_select of the same rows from the same
  table (a [1M, 264] uint8 tensor on the device) into a same-size output;
  both timed with CUDA events over back-to-back calls from Python;
- a small lookup (T=8, K=24) captured in torch.cuda.graph and replayed
  costs <= 1.2x the same lookup captured and replayed in Go
  (sk_cuda_bench_graph), both on one non-default stream, replays per
  second of wall time including the synchronisation after them. Both
  graphs are launched by the same Go loop (sk_cuda_bench_replay launches
  torch's CUgraphExec), so the ratio is what each capture put in its
  graph; torch's g.replay() from Python, which adds torch's launcher, is
  shown beside it.

Also shown, not goals: the host-table (zero-copy) lookup of the same
geometry and the eager small lookup's cost per call. Cases are measured
in alternating rounds; each reports the median of the rounds and the
spread. Run (with libscatterkit_cuda.so built by scripts/gpu-build.sh):

    SCATTERKIT_LIB=.gpu python3 tools/python/bench/bench_cuda.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from scatterkit import _capi  # noqa: E402
from scatterkit.engram import EngramStore, cuda_device_count  # noqa: E402

R, K = 264, 24


def events_per_call(f, n):
    """Seconds per call of f, n calls back to back, by CUDA events on the
    current stream."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    f()
    torch.cuda.synchronize()
    a.record()
    for _ in range(n):
        f()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / 1e3 / n


def wall_per_call(f, n):
    f()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000, help="table rows")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", help="append JSON lines here")
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    args = ap.parse_args()
    if not torch.cuda.is_available() or cuda_device_count() == 0:
        print(f"no CUDA here (library {_capi.lib().path})", file=sys.stderr)
        return 1
    rng = np.random.default_rng(args.seed)
    dev = torch.device("cuda", 0)
    N = args.rows
    rows = rng.integers(0, 256, size=(N, R), dtype=np.uint8)
    names = ("tab",) * K
    results = []
    with tempfile.TemporaryDirectory() as d:
        spec = {"tab": {"num_rows": N, "row_bytes": R}}
        dstore = EngramStore(tables=spec, namespace="bench", local_dir=d, cuda="device")
        dstore.populate("tab", rows)
        hstore = EngramStore(tables=spec, namespace="bench", local_dir=d, cuda="host")
        table = torch.from_numpy(rows).to(dev)

        # -- large: T=4096, K=24 (98,304 rows) from a device table
        T = 4096
        ids = torch.from_numpy(rng.integers(0, N, size=(T, K), dtype=np.int64)).to(dev)
        flat = ids.reshape(-1)
        out = torch.empty((T, K, R), dtype=torch.uint8, device=dev)
        out_t = torch.empty((T * K, R), dtype=torch.uint8, device=dev)
        dstore.warmup(names, device=0)
        hstore.warmup(names, device=0)
        big = {"py-device": [], "torch-index-select": [], "py-host": []}
        for rnd in range(args.rounds):
            cases = [
                ("py-device", lambda: dstore.lookup(names, ids, out)),
                ("torch-index-select", lambda: torch.index_select(table, 0, flat, out=out_t)),
                ("py-host", lambda: hstore.lookup(names, ids, out)),
            ]
            if rnd % 2:
                cases.reverse()
            for name, f in cases:
                big[name].append(events_per_call(f, 50))
        torch.cuda.synchronize()
        ref = table[flat].reshape(T, K, R)
        dstore.lookup(names, ids, out)
        torch.cuda.synchronize()
        assert torch.equal(out, ref), "device-table lookup bytes differ from torch's"
        hstore.lookup(names, ids, out)
        torch.cuda.synchronize()
        assert torch.equal(out, ref), "host-table lookup bytes differ from torch's"
        dstore.check_status()
        hstore.check_status()

        # -- small: T=8, K=24 in a replayed graph, Python (torch.cuda.graph) vs Go
        Ts = 8
        sids = torch.from_numpy(rng.integers(0, N, size=(Ts, K), dtype=np.int64)).to(dev)
        sout = torch.empty((Ts, K, R), dtype=torch.uint8, device=dev)
        s = torch.cuda.Stream()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            dstore.lookup(names, sids, sout)
        small = {"py-graph": [], "go-graph": [], "py-graph-go-launch": [], "py-eager": [], "torch-eager": []}
        can_raw = hasattr(g, "raw_cuda_graph_exec")
        sflat = sids.reshape(-1)
        sout_t = torch.empty((Ts * K, R), dtype=torch.uint8, device=dev)
        n = 2000
        for rnd in range(args.rounds):

            def py_graph():
                with torch.cuda.stream(s):
                    small["py-graph"].append(wall_per_call(g.replay, n))

            def go_graph():
                small["go-graph"].append(dstore.bench_graph(names, sids, sout, n, stream=s))

            def py_graph_go_launch():
                if can_raw:
                    small["py-graph-go-launch"].append(dstore.bench_replay(g, n, stream=s))

            def py_eager():
                small["py-eager"].append(wall_per_call(lambda: dstore.lookup(names, sids, sout), n))

            def torch_eager():
                small["torch-eager"].append(wall_per_call(lambda: torch.index_select(table, 0, sflat, out=sout_t), n))

            steps = [py_graph, go_graph, py_graph_go_launch, py_eager, torch_eager]
            if rnd % 2:
                steps.reverse()
            for f in steps:
                f()
        torch.cuda.synchronize()
        new = torch.from_numpy(rng.integers(0, N, size=(Ts, K), dtype=np.int64)).to(dev)
        sids.copy_(new)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(sout, table[new.reshape(-1)].reshape(Ts, K, R)), "graph replay bytes differ"
        del g
        dstore.check_status()
        dstore.close()
        hstore.close()

    med = {k: statistics.median(v) for d_ in (big, small) for k, v in d_.items() if v}
    spread = {k: (max(v) - min(v)) / statistics.median(v) for d_ in (big, small) for k, v in d_.items() if v}
    ratio_big = med["torch-index-select"] / med["py-device"]
    # The graph goal: the lookup captured from Python (torch.cuda.graph) and
    # the one captured in Go, launched by the same loop: what the package
    # puts in a graph. torch's own replay() adds its launcher's cost, shown.
    ratio_graph = med.get("py-graph-go-launch", med["py-graph"]) / med["go-graph"]
    ratio_torch_replay = med["py-graph"] / med["go-graph"]
    gb = T * K * R / 1e9
    print(f"seed {args.seed}, table {N} x {R} B, {args.rounds} rounds (median; spread = (max-min)/median)")
    print(f"{'case':34} {'us/call':>9} {'GB/s':>7} {'spread':>7}")
    for k, label in [
        ("py-device", "T=4096 K=24 device table, Python"),
        ("torch-index-select", "T=4096 K=24 torch.index_select"),
        ("py-host", "T=4096 K=24 host table, Python"),
        ("py-graph", "T=8 K=24 graph replay, Python"),
        ("go-graph", "T=8 K=24 graph replay, Go"),
        ("py-graph-go-launch", "T=8 K=24 Python's graph, Go launch"),
        ("py-eager", "T=8 K=24 eager, Python"),
        ("torch-eager", "T=8 K=24 torch.index_select eager"),
    ]:
        if k not in med:
            continue
        rate = f"{gb / med[k]:7.1f}" if k in big else f"{'':7}"
        print(f"{label:34} {med[k] * 1e6:9.2f} {rate} {spread[k]:7.2f}")
    ok_big, ok_graph = ratio_big >= 3.0, ratio_graph <= 1.2
    print(f"goal: device lookup / torch.index_select speed   {ratio_big:5.2f}x (>= 3)   {'met' if ok_big else 'NOT met'}")
    how = "same launcher" if "py-graph-go-launch" in med else "torch replay(): no raw exec in this torch"
    print(f"goal: Python graph / Go graph replay time        {ratio_graph:5.2f}x (<= 1.2) {'met' if ok_graph else 'NOT met'} ({how})")
    print(f"      torch g.replay() / Go graph replay time    {ratio_torch_replay:5.2f}x (torch's launcher included)")
    if args.json:
        with open(args.json, "a") as f:
            for k, v in med.items():
                f.write(json.dumps({"workload": f"python-cuda/{k}", "us_per_call": v * 1e6, "spread": spread[k], "rounds": args.rounds}) + "\n")
            f.write(json.dumps({"workload": "python-cuda/goal-device-vs-index-select", "ratio": ratio_big, "goal": 3.0, "met": ok_big}) + "\n")
            f.write(json.dumps({"workload": "python-cuda/goal-graph-vs-go", "ratio": ratio_graph, "goal": 1.2, "met": ok_graph, "launcher": how}) + "\n")
            f.write(json.dumps({"workload": "python-cuda/torch-replay-vs-go", "ratio": ratio_torch_replay}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
