#!/usr/bin/env bash
# Issue 17's goals (transfer engine v2) on a real multi-core host (the
# 16-core GPU machine; no GPU is used), from scatterbench binaries built
# here, in one run that prints one table. Nothing is built there.
#
#   bash scripts/device-compare.sh build BASE      # here: .device/scatterbench-{before,head}
#   bash scripts/device-transfer.sh [ROUNDS] [NAME=FLAGS ...]  # there, with .device carried
#
# Each NAME=FLAGS adds a variant: head's binary (or .device/scatterbench-NAME,
# another build carried beside them, where it exists) with extra scatterbench
# flags (e.g. `chunked=-chunked-read`). HEAD_FLAGS adds flags to head's
# own runs.
#
# Each round runs before and head (the order reversed every other round)
# over the goal workloads on tcp: many-small (98,304 x 264 B), mixed,
# few-large, reshard-kv, reshard-mixed, the fragmented destination
# (49,152 x 200 B, random source) and WRITE gather (32,768 x 264 B).
# The table gives, per variant, the medians over rounds of: end-to-end
# goodput of each mode and its ratio to the ceilings measured in the same
# run, adaptive against the best forced mode, p50 and p95/p50, and the
# staging peak against its bound (Slots x Chunk) with leaked leases.
# Raw JSON lines go to $OUT (or ./bench-results).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
shift || true
out=${OUT:-bench-results}
mkdir -p "$out"
# shellcheck source=scripts/device-variants.sh
. scripts/device-variants.sh
variants_init "${HEAD_FLAGS:-}" "$@"
cases=(
	"named|-workloads many-small,mixed,few-large,reshard-kv,reshard-mixed"
	"frag-dst|-frags 49152 -frag-size 200 -src random -dst fragmented"
	"write-gather|-frags 32768 -frag-size 264 -dir write"
)
# CASES (NAME|FLAGS entries separated by ';') and MODES replace the cases
# and modes above, for a narrower comparison.
if [ -n "${CASES:-}" ]; then IFS=';' read -r -a cases <<<"$CASES"; fi
modes=${MODES:-direct,gather,hybrid,adaptive}
echo "host: $(nproc) cores; variants ${variants[*]} ($(cat .device/before.rev 2>/dev/null || echo -) -> $(cat .device/head.rev 2>/dev/null || echo -)); $rounds rounds"
for v in "${variants[@]}"; do : >"$out/$v.jsonl"; done
for r in $(seq "$rounds"); do
	round_order "$r"
	for v in "${order[@]}"; do
		t0=$SECONDS
		for c in "${cases[@]}"; do
			name=${c%%|*}
			# shellcheck disable=SC2086 # flags are words
			timeout -k 5 200 ".device/scatterbench-${bins[$v]}" ${c#*|} ${flags[$v]} -mode "$modes" -transport tcp -reps 20 -quiet -json "$out/$v.$r.$name.jsonl" \
				>/dev/null 2>"$out/$v.$r.$name.err" || { echo "round $r $v $name: exit $? (see $v.$r.$name.err)"; keep=1; }
			sed "s/\"workload\":\"custom\"/\"workload\":\"$name\"/; s/\"for\":\"custom\"/\"for\":\"$name\"/" \
				"$out/$v.$r.$name.jsonl" >>"$out/$v.jsonl"
			rm -f "$out/$v.$r.$name.jsonl"
			# scatterbench's stderr is its goal summary unless it failed.
			[ "${keep:-0}" = 1 ] || rm -f "$out/$v.$r.$name.err"
			keep=0
		done
		echo "round $r $v: $((SECONDS - t0)) s"
	done
done
python3 - "$out" "${variants[@]}" <<'PY'
import json, statistics, sys
from collections import defaultdict
out, names = sys.argv[1], sys.argv[2:]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")
for name in names:
    runs = defaultdict(list)  # (workload, mode) -> rows
    ceil = defaultdict(list)  # (workload, ceiling) -> goodputs
    for line in open(f"{out}/{name}.jsonl"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        w = d.get("workload", "")
        if w.startswith("ceiling/"):
            ceil[(d.get("for"), w[len("ceiling/"):])].append(d.get("goodput_gbps"))
        elif "mode" in d and d.get("status", "ok") == "ok":
            runs[(w, d["mode"])].append(d)
    print(f"\n== {name}: tcp, medians over rounds (Gbit/s; ratios to ceilings of the same run)")
    print(f"{'workload':15} {'mode':9} {'chosen':8} {'Gbit/s':>7} {'/min(dc,po)':>11} {'win/dc':>7} {'p50 ms':>7} {'p95/p50':>7} {'peak/bound':>12} {'leaks':>5}")
    for w in sorted({w for w, _ in runs}):
        dc = med(ceil.get((w, "direct-control"), []))
        po = med(ceil.get((w, "pack-only"), []))
        best = {}
        for mode in ("direct", "gather", "hybrid", "adaptive"):
            rows = runs.get((w, mode))
            if not rows:
                continue
            g = med([r.get("goodput_gbps") for r in rows])
            best[mode] = g
            win = med([r.get("window_gbps") for r in rows])
            p50 = med([r.get("p50_ms") for r in rows])
            p95 = med([r.get("p95_ms") for r in rows])
            peak = max(r.get("staging_peak_bytes", 0) for r in rows)
            bound = max(r.get("staging_bound_bytes", 0) for r in rows)
            leaks = sum(r.get("leaked_leases", 0) for r in rows)
            chosen = statistics.mode([r.get("chosen", mode) for r in rows])
            lim = min(x for x in (dc, po) if x == x) if (dc == dc or po == po) else float("nan")
            pb = f"{peak >> 10}K/{bound >> 10}K" + ("" if peak <= bound else " OVER")
            print(f"{w:15} {mode:9} {chosen:8} {g:7.1f} {g / lim:11.3f} {win / dc:7.3f} {p50:7.2f} {p95 / p50:7.2f} {pb:>12} {leaks:5d}")
        forced = [best[m] for m in ("direct", "gather", "hybrid") if m in best]
        if "adaptive" in best and forced:
            r = best["adaptive"] / max(forced)
            print(f"{w:15} adaptive / best forced = {r:.3f} (goal >= 0.95: {'met' if r >= 0.95 else 'NOT met'})")
PY
