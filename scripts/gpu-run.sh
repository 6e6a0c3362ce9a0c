#!/usr/bin/env bash
# Runs every GPU test and benchmark in one call on the GPU machine, from the
# repository root, with .gpu.tgz (built here by scripts/gpu-build.sh) carried:
#   bash scripts/gpu-run.sh
# It builds nothing. Output: a short table last; the logs and JSON lines
# (scatterbench schema plus the ceilings measured in this run) go to $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# What gpu-build.sh made here travels as .gpu.tgz: unpack it.
if [ -f .gpu.tgz ] && { [ ! -d .gpu ] || [ .gpu.tgz -nt .gpu ]; }; then
	rm -rf .gpu && tar xzf .gpu.tgz
fi
OUT=${OUT:-$(mktemp -d)}
export REQUIRE_CUDA=1 CUDAGATHER_JSON=$OUT/cuda.jsonl
rc=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "== cudagather tests"
timeout -k 5 300 .gpu/cudagather.test -test.v -test.count=1 -test.run . >"$OUT/tests.log" 2>&1 || rc=1
grep -E '^(--- |PASS|FAIL|ok|panic)' "$OUT/tests.log" | head -40
echo "== engram store on the device (cudaengram)"
timeout -k 5 120 .gpu/cudaengram.test -test.v -test.count=1 >"$OUT/engram.log" 2>&1 || rc=1
grep -E '^(--- |PASS|FAIL|ok|panic)' "$OUT/engram.log" | head -10
echo "== C ABI on the device (tools/capi: sk_cuda_*)"
# From its package folder: the tests read ../../docs and testdata.
(cd tools/capi && timeout -k 5 180 ../../.gpu/capi.test -test.v -test.count=1 -test.run '^Test(CUDA|DeviceLookupArgs)') >"$OUT/capi.log" 2>&1 || rc=1
grep -E '^(--- |PASS|FAIL|ok|panic)|graph replay' "$OUT/capi.log" | grep -v '^    --- PASS' | head -20
echo "== Python package on the device (pytest; libscatterkit_cuda.so; CUDA tests in tests/test_cuda.py)"
SCATTERKIT_LIB=$PWD/.gpu PYTHONDONTWRITEBYTECODE=1 timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider tools/python/tests >"$OUT/pytest.log" 2>&1 || rc=1
grep -E '^(FAILED|ERROR)|passed|failed' "$OUT/pytest.log" | head -20
echo "== Python CUDA benchmark (issue 16's goals)"
SCATTERKIT_LIB=$PWD/.gpu PYTHONUNBUFFERED=1 timeout -k 5 300 python3 tools/python/bench/bench_cuda.py --json "$OUT/python.jsonl" >"$OUT/pybench.log" 2>&1 || rc=1
cat "$OUT/pybench.log" | tail -14
# (BenchmarkRowKernels and BenchmarkHostTables, 32 GiB of host tables,
# run from scripts/gpu-lookups.sh.)
echo "== cudagather benchmarks"
timeout -k 5 400 .gpu/cudagather.test -test.run '^$' -test.bench '^Benchmark(Gather|Variants|LaunchOverhead|SmallSpread|Ordered)$' -test.benchtime 1x -test.v >"$OUT/bench.log" 2>&1 || rc=1
grep -E 'ceilings|variant|ordered|FAIL|panic' "$OUT/bench.log" | sed 's/^ *//' | head -40
echo "== torch side by side (index_select, staged path)"
PYTHONUNBUFFERED=1 timeout -k 5 300 python3 .gpu/torchbench.py --json "$OUT/torch.jsonl" >"$OUT/torch.log" 2>&1 || rc=1
tail -3 "$OUT/torch.log"
echo "== summary"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
cuda, torch_ = load("cuda.jsonl"), load("torch.jsonl")
isel = {l["workload"].replace("torch-index-select/", ""): l for l in torch_ if l["workload"].startswith("torch-index-select/")}
print("ratio: goodput (bytes read + written) / the large device-to-device copy (device tables) or")
print("host-to-device copy (host tables); same-size: / a device copy of the same bytes timed the same way")
print(f"{'workload':28} {'us/lookup':>10} {'ratio':>7} {'same-size':>9} {'graph us':>9} {'index_select ratio':>19}")
for l in cuda:
    if l["workload"].startswith("ceiling"):
        print(f"{l['workload']:28} {l['goodput_gbps']/8:10.1f} GB/s")
        continue
    w = l["workload"]
    R, N = w.split("/")[1][2:], w.split("/")[2][2:]
    t = isel.get(f"R={R}/N={N}", {}) if "device" in w else {}
    print(f"{w:28} {l['p50_ms']*1e3:10.2f} {l['ratio']:7.3f} {l.get('ratio_same_size_copy', float('nan')):9.3f} {l.get('graph_us', float('nan')):9.2f} {t.get('ratio', float('nan')):19.3f}")
for l in torch_:
    if l["workload"].startswith("staged"):
        print(f"{l['workload']:28} {l['p50_ms']*1e3:10.1f} {l['ratio']:7.3f}  (CPU gather into pinned + H2D copy, vs h2d)")
PY
exit $rc
