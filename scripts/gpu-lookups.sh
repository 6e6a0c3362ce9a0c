#!/usr/bin/env bash
# Issue 18's checks and figures (GPU lookups at production table sizes) on
# the GPU machine, in one run that builds nothing, from .gpu.tgz (built here by
# scripts/gpu-build.sh) carried:
#   bash scripts/gpu-lookups.sh            # CUDAGATHER_HOST_GIB=32 by default
# It runs the cudagather tests (every path against the CPU lookup: device,
# zero-copy, staged, split, flat kernels, bad ids, capture), the row-kernel
# comparison on device tables (BenchmarkRowKernels), the CPU gather of
# staged lookups alone by prefetch distance (BenchmarkRowGatherCPU), a
# staged lookup's parts (BenchmarkStagedGatherParts), the production-size
# host tables (BenchmarkHostTables: two tables of GiB/2, K=24, offsets, 3%
# -1) and their torch peer (torch_host.py: CPU index_select into pinned,
# then one copy), what huge pages and registration in slices change
# (BenchmarkHostTableBacking), small lookups (T=8, K=24) eager and in
# replayed graphs (tools/python/bench/bench_cuda.py, and a small Go
# lookup's host cost, BenchmarkLaunchOverhead), and prints one table. JSON lines and logs
# go to $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# What gpu-build.sh made here travels as .gpu.tgz: unpack it.
if [ -f .gpu.tgz ] && { [ ! -d .gpu ] || [ .gpu.tgz -nt .gpu ]; }; then
	rm -rf .gpu && tar xzf .gpu.tgz
fi
OUT=${OUT:-$(mktemp -d)}
export REQUIRE_CUDA=1 CUDAGATHER_JSON=$OUT/cuda.jsonl CUDAGATHER_HOST_GIB=${CUDAGATHER_HOST_GIB:-32}
rc=0
echo "== cudagather tests"
timeout -k 5 300 .gpu/cudagather.test -test.v -test.count=1 -test.run . >"$OUT/tests.log" 2>&1 || rc=1
grep -E '^(--- FAIL|FAIL|ok|PASS|panic)' "$OUT/tests.log" | head -20
grep -c '^--- PASS' "$OUT/tests.log" | sed 's/^/tests passed: /'
echo "== device tables: row kernels against the same-size copy"
timeout -k 5 200 .gpu/cudagather.test -test.run '^$' -test.bench RowKernels -test.benchtime 1x -test.v >"$OUT/rowkernels.log" 2>&1 || rc=1
grep -E 'rowkernel' "$OUT/rowkernels.log" | sed 's/^ *cuda_test.go:[0-9]*: //'
echo "== the CPU gather of staged lookups alone, by prefetch distance (rows ahead)"
timeout -k 5 200 .gpu/cudagather.test -test.run '^$' -test.bench RowGatherCPU -test.benchtime 1x -test.v >"$OUT/rowgather.log" 2>&1 || rc=1
grep -E 'rowgather' "$OUT/rowgather.log" | sed 's/^ *rowgather_test.go:[0-9]*: //'
echo "== a staged lookup's parts: its CPU gather (pinned or heap destination, table registered or not), the copy, the whole lookup"
timeout -k 5 300 .gpu/cudagather.test -test.run '^$' -test.bench StagedGatherParts -test.benchtime 1x -test.v >"$OUT/stagedparts.log" 2>&1 || rc=1
grep -E 'stagedparts|FAIL|panic' "$OUT/stagedparts.log" | sed 's/^ *cuda_test.go:[0-9]*: //; s/ (rounds.*//'
echo "== host tables of $CUDAGATHER_HOST_GIB GiB"
timeout -k 5 400 .gpu/cudagather.test -test.run '^$' -test.bench HostTables -test.benchtime 1x -test.v >"$OUT/hosttables.log" 2>&1 || rc=1
grep -E 'hosttable (memory|ceiling|registered)|FAIL|panic' "$OUT/hosttables.log" | sed 's/^ *cuda_test.go:[0-9]*: //'
echo "== host table backing: huge pages or not, registered whole or in slices"
timeout -k 5 300 .gpu/cudagather.test -test.run '^$' -test.bench HostTableBacking -test.benchtime 1x -test.v >"$OUT/backing.log" 2>&1 || rc=1
grep -E 'hostbacking|FAIL|panic' "$OUT/backing.log" | sed 's/^ *cuda_test.go:[0-9]*: //'
echo "== torch peer (CPU index_select into pinned + copy)"
PYTHONUNBUFFERED=1 timeout -k 5 400 python3 .gpu/torch_host.py --gib "$CUDAGATHER_HOST_GIB" --json "$OUT/torch.jsonl" >"$OUT/torch.log" 2>&1 || rc=1
grep -v '^{' "$OUT/torch.log" | tail -3
echo "== small lookups (T=8, K=24) and device tables from Python: bench_cuda.py"
SCATTERKIT_LIB=$PWD/.gpu PYTHONUNBUFFERED=1 timeout -k 5 300 python3 tools/python/bench/bench_cuda.py --json "$OUT/pycuda.jsonl" >"$OUT/pycuda.log" 2>&1 || rc=1
grep -E 'T=8|R=264|ratio|goal' "$OUT/pycuda.log" | head -20
echo "== a small lookup's host cost (Go): check, bare launch, Lookup"
timeout -k 5 120 .gpu/cudagather.test -test.run '^$' -test.bench LaunchOverhead -test.benchtime 1x -test.v >"$OUT/overhead.log" 2>&1 || rc=1
grep -E 'overhead K=' "$OUT/overhead.log" | sed 's/^ *cuda_test.go:[0-9]*: //'
echo "== summary"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
cuda, torch_ = load("cuda.jsonl"), load("torch.jsonl")
peer = {l["workload"].replace("torch-staged-hosttable/", ""): l for l in torch_ if l["workload"].startswith("torch-staged")}
rows = {}
for l in cuda:
    w = l["workload"]
    if w.startswith("ceiling"):
        print(f"{w:34} {l['goodput_gbps']/8:8.1f} GB/s")
    if not w.startswith("cuda-hosttable/"):
        continue
    _, r, n, path = w.split("/")
    rows.setdefault((int(r[2:]), int(n[2:])), {})[path] = l
print("host tables: us per lookup by path; ratio = payload / time / host-to-device copy; x torch = torch staged time / auto time")
print(f"{'R':>5} {'N':>7} {'zero-copy':>10} {'staged':>9} {'split':>9} {'auto':>9} {'chosen':>9} {'ratio':>6} {'torch':>9} {'x torch':>7}")
for (r, n), d in sorted(rows.items()):
    us = {p: d[p]["p50_ms"] * 1e3 for p in d}
    a = d.get("auto", {})
    t = peer.get(f"R={r}/N={n}")
    tus = t["p50_ms"] * 1e3 if t else float("nan")
    f = lambda p: f"{us[p]:9.1f}" if p in us else f"{'-':>9}"
    print(f"{r:5} {n:7} {f('zero-copy'):>10} {f('staged')} {f('split')} {f('auto')} {a.get('chosen', '-'):>9} {a.get('ratio', float('nan')):6.3f} {tus:9.1f} {tus / us.get('auto', float('nan')):7.2f}")
PY
exit $rc
