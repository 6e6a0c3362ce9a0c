#!/usr/bin/env bash
# Issue 21's checks and figures (registered GPU destinations) on the GPU
# machine, in one run that builds nothing, from .gpu.tgz (built here by
# scripts/gpu-build.sh) carried:
#   bash scripts/gpu-destinations.sh
# It runs the device-destination tests (cudaengram: scatter READs into
# device memory and remote Engram lookups into device buffers, bytes read
# back against the host path; host lookups and remote lookups captured
# into CUDA graphs and replayed with new ids, failures reported by the
# status; the C ABI's remote CUDA lookups, captured ones too; the Python
# package's remote lookups into torch CUDA tensors, in torch.cuda.graph
# too), then the benchmarks of the goals (many-small into device memory
# against the same READ into host memory; a remote lookup T=16 and T=4096
# into a CUDA output, and T=16 captured and replayed, against the lookup
# into host memory plus one host-to-device copy), and prints one table. Logs go to $OUT (at most 8 files).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -f .gpu.tgz ] && { [ ! -d .gpu ] || [ .gpu.tgz -nt .gpu ]; }; then
	rm -rf .gpu && tar xzf .gpu.tgz
fi
OUT=${OUT:-$(mktemp -d)}
export REQUIRE_CUDA=1 REQUIRE_PROXY=1
rc=0
echo "== Go: host lookups, eager and captured into graphs (cudagather)"
timeout -k 5 120 .gpu/cudagather.test -test.v -test.count=1 -test.run 'HostLookup' >"$OUT/dst-hostlookup.log" 2>&1 || rc=1
grep -E '^(--- |FAIL|ok|PASS|panic)' "$OUT/dst-hostlookup.log" | head -10
echo "== Go: scatter READs and remote lookups into device memory, captured remote lookups (cudaengram)"
timeout -k 5 240 .gpu/cudaengram.test -test.v -test.count=1 -test.run . >"$OUT/dst-tests.log" 2>&1 || rc=1
grep -E '^(--- |FAIL|ok|PASS|panic)' "$OUT/dst-tests.log" | head -20
echo "== C ABI: a remote store's sk_cuda_lookup"
(cd tools/capi && timeout -k 5 180 ../../.gpu/capi.test -test.v -test.count=1 -test.run '^TestCUDARemoteLookup$') >"$OUT/dst-capi.log" 2>&1 || rc=1
grep -E '^(--- |FAIL|ok|PASS|panic)' "$OUT/dst-capi.log" | head -10
echo "== Python: remote lookups into torch CUDA tensors"
SCATTERKIT_LIB=$PWD/.gpu PYTHONDONTWRITEBYTECODE=1 timeout -k 5 240 python3 -m pytest -q -p no:cacheprovider tools/python/tests/test_cuda.py -k remote >"$OUT/dst-pytest.log" 2>&1 || rc=1
grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/dst-pytest.log" | head -10
echo "== Python: one host table, another process's GPU (the owner removes it and exits meanwhile)"
SCATTERKIT_SHARED_JSON=/tmp/shared.json SCATTERKIT_LIB=$PWD/.gpu PYTHONDONTWRITEBYTECODE=1 timeout -k 5 180 python3 -m pytest -q -p no:cacheprovider tools/python/tests/test_cuda_shared.py >>"$OUT/dst-pytest.log" 2>&1 || rc=1
grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/dst-pytest.log" | tail -1
if [ -f /tmp/shared.json ]; then
	python3 - /tmp/shared.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"shared table from another process: {d['shared_us']:.1f} us, own table {d['own_us']:.1f} us: ratio {d['ratio']:.3f} (goal >= 0.9)")
PY
fi
echo "== benchmarks"
timeout -k 5 300 .gpu/cudaengram.test -test.run '^$' -test.bench 'ScatterIntoDevice|RemoteLookupDevice|CapturedRemoteLookup' -test.benchtime 1x -test.v >"$OUT/dst-bench.log" 2>&1 || rc=1
grep -E 'scatter-device|remote-device|captured-remote|FAIL|panic' "$OUT/dst-bench.log" | sed 's/^ *[a-z_]*_test.go:[0-9]*: //'
echo "== scatterbench -dst gpu (tcp, owner in a child process): many-small, few-large, mixed into device memory"
timeout -k 5 240 .gpu/scatterbench -dst gpu -transport tcp -workloads many-small,few-large,mixed -reps 20 -json "$OUT/dst-scatterbench.jsonl" >"$OUT/dst-scatterbench.log" 2>&1 || rc=1
tail -25 "$OUT/dst-scatterbench.log"
python3 - "$OUT/dst-scatterbench.jsonl" <<'PY'
import json, sys
rows, ceil = {}, {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    w = d.get("workload", "")
    if w.startswith("ceiling/"):
        ceil[(d["for"], w[8:])] = d.get("goodput_gbps") or d.get("p50_ms")
    elif "mode" in d:
        rows[(w, d["mode"])] = d
print(f"{'workload':12} {'mode':9} {'chosen':9} {'Gbit/s':>8} {'host-dst':>9} {'ratio':>6} {'h2d':>7} {'p50 ms':>7} leaks")
for (w, m), d in sorted(rows.items()):
    h = ceil.get((w, "host-dst"), float("nan"))
    print(f"{w:12} {m:9} {d['chosen']:9} {d['goodput_gbps']:8.1f} {h:9.1f} {d['goodput_gbps']/h:6.3f} {ceil.get((w, 'h2d-copy'), float('nan')):7.1f} {d['p50_ms']:7.2f} {d['leaked_leases']}")
print("goal: many-small adaptive into device memory / the same READ into host memory >= 0.9")
PY
exit $rc
