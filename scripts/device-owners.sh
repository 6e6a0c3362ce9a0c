#!/usr/bin/env bash
# Issue 20's goals (past one owner) on a real multi-core host (the 16-core
# GPU machine; no GPU is used), from the scatterbench binary built here,
# in one run that prints one table. Nothing is built there.
#
#   bash scripts/device-compare.sh build BASE   # here: .device/scatterbench-head (and -before)
#   bash scripts/device-owners.sh [ROUNDS]      # there, with .device carried
#
# Each round runs head's scatterbench over tcp, owners in processes of
# their own (-owner process): many-small and many-small-3owners in one
# pass (the rows from one owner, then from three, each a third of the
# rows, as one engine group), then engram-remote-sharded (T=16 K=24
# R=264 from a table cut over three owner processes, against the same
# lookup from one owner process of the whole table in the same
# repetitions). The table gives the medians over rounds: the 3-owner
# goodput against one owner's (goal >= 2x) and the sharded lookup's p50
# against one owner's (goal <= 1.3x), per mode, with leaked leases.
# Raw JSON lines go to $OUT (or ./bench-results).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
out=${OUT:-bench-results}
mkdir -p "$out"
bin=.device/scatterbench-head
[ -x "$bin" ] || { echo "no $bin: run 'bash scripts/device-compare.sh build BASE' here and carry .device" >&2; exit 2; }
echo "host: $(nproc) cores; scatterbench $(cat .device/head.rev 2>/dev/null || echo -); $rounds rounds"
: >"$out/owners.jsonl"
for r in $(seq "$rounds"); do
	t0=$SECONDS
	for c in "many|-workloads many-small,many-small-3owners -reps 20" "sharded|-workloads engram-remote-sharded"; do
		name=${c%%|*}
		# shellcheck disable=SC2086 # flags are words
		timeout -k 5 280 "$bin" ${c#*|} -mode direct,gather,adaptive -transport tcp -owner process -quiet \
			-json "$out/owners.$r.$name.jsonl" >/dev/null 2>"$out/owners.$r.$name.err" ||
			echo "round $r $name: exit $? (see owners.$r.$name.err)"
		cat "$out/owners.$r.$name.jsonl" >>"$out/owners.jsonl" 2>/dev/null || true
	done
	echo "round $r: $((SECONDS - t0)) s"
done
python3 - "$out/owners.jsonl" <<'PY'
import json, statistics, sys
from collections import defaultdict
rows, ceil = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    w = d.get("workload", "")
    if w.startswith("ceiling/"):
        ceil[(d.get("for"), w[len("ceiling/"):])].append(d)
    elif "mode" in d:
        rows[(w, d["mode"])].append(d)
def med(ds, k):
    xs = [d.get(k) for d in ds if d.get(k) is not None]
    return statistics.median(xs) if xs else float("nan")
print(f"\n{'workload':22} {'mode':9} {'chosen':8} {'Gbit/s':>7} {'p50 ms':>7} {'leaks':>5} {'err':>4}")
for (w, m), ds in sorted(rows.items()):
    chosen = statistics.mode([d.get("chosen", m) for d in ds])
    leaks = sum(d.get("leaked_leases", 0) for d in ds)
    errs = sum(d.get("errors", 0) for d in ds)
    print(f"{w:22} {m:9} {chosen:8} {med(ds, 'goodput_gbps'):7.2f} {med(ds, 'p50_ms'):7.3f} {leaks:5d} {errs:4d}")
print()
for m in ("direct", "gather", "adaptive"):
    one, three = rows.get(("many-small", m)), rows.get(("many-small-3owners", m))
    if one and three:
        r = med(three, "goodput_gbps") / med(one, "goodput_gbps")
        tag = f" (goal >= 2: {'met' if r >= 2 else 'NOT met'})" if m == "adaptive" else ""
        print(f"many-small-3owners / many-small, {m:8}: {r:.2f}x{tag}")
one = ceil.get(("engram-remote-sharded", "one-owner"))
for m in ("direct", "gather", "adaptive"):
    sh = rows.get(("engram-remote-sharded", m))
    if sh and one:
        r = med(sh, "p50_ms") / med(one, "p50_ms")
        tag = f" (goal <= 1.3: {'met' if r <= 1.3 else 'NOT met'})" if m == "adaptive" else ""
        print(f"engram-remote-sharded p50 / one owner, {m:8}: {r:.2f}x{tag}")
PY
