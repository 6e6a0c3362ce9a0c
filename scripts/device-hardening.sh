#!/usr/bin/env bash
# What owner hardening (issue 14: admission, caps, budgets, fences, tcp
# frame checksums) costs, measured on a real multi-core host (the 16-core
# GPU machine; no GPU is used). scatterbench built just before the
# hardening and at HEAD run alternately, round after round, on the same
# machine; the table gives, per transport, workload and mode, the median
# end-to-end goodput of each build and their ratio (HEAD / before), and
# the same for the ceilings (direct control, pack-only, RTT).
#
#   bash scripts/device-hardening.sh build [BASE]   # here: builds .device/ (BASE: default c6a059b)
#   bash scripts/device-hardening.sh [ROUNDS]       # there, with .device carried: runs and prints
#
# Nothing is built on the device machine. Raw JSON lines go to $OUT
# (or ./bench-results) as before.jsonl and head.jsonl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" = build ]; then
	base=${2:-c6a059b}
	mkdir -p .device
	tmp=$(mktemp -d)
	trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
	git worktree add -q --detach "$tmp/base" "$base"
	(cd "$tmp/base" && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$OLDPWD/.device/scatterbench-before" ./tools/cmd/scatterbench)
	CGO_ENABLED=0 go build -ldflags="-s -w" -o .device/scatterbench-head ./tools/cmd/scatterbench
	git rev-parse --short "$base" >.device/before.rev
	git rev-parse --short HEAD >.device/head.rev
	ls -l .device
	exit 0
fi

rounds=${1:-3}
out=${OUT:-bench-results}
mkdir -p "$out"
: >"$out/before.jsonl"
: >"$out/head.jsonl"
workloads=many-small,few-large,mixed,single-read,engram-remote-t16,structobj-put,structobj-get
echo "host: $(nproc) cores; before $(cat .device/before.rev), head $(cat .device/head.rev); $rounds rounds"
for r in $(seq "$rounds"); do
	for b in before head; do
		t0=$SECONDS
		timeout -k 5 240 ".device/scatterbench-$b" -workloads "$workloads" -transport tcp,shm -reps 10 -quiet \
			-json "$out/$b.$r.jsonl" >/dev/null 2>"$out/$b.$r.err" || echo "round $r $b: exit $? (see $b.$r.err)"
		cat "$out/$b.$r.jsonl" >>"$out/$b.jsonl"
		echo "round $r $b: $((SECONDS - t0)) s"
	done
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for line in open(f"{out}/{name}.jsonl"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        w = d.get("workload", "")
        if w == "summary":
            continue
        key = (d.get("transport", ""), w + ("/" + d["for"] if "for" in d else ""), d.get("mode", ""))
        v = d.get("goodput_gbps") or 0
        if not v and "p50_ms" in d:
            v = d["p50_ms"]
            key = key + ("p50 ms",)
        else:
            key = key + ("Gbit/s",)
        if v:
            rows.setdefault(key, []).append(v)
    return rows
a, b = load("before"), load("head")
print(f"{'transport':9} {'workload':32} {'mode':9} {'unit':7} {'before':>8} {'head':>8} {'head/before':>11}")
for k in sorted(set(a) | set(b)):
    x = statistics.median(a[k]) if k in a else float("nan")
    y = statistics.median(b[k]) if k in b else float("nan")
    print(f"{k[0]:9} {k[1]:32} {k[2]:9} {k[3]:7} {x:8.3f} {y:8.3f} {y / x if x else float('nan'):11.3f}")
PY
