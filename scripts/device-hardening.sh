#!/usr/bin/env bash
# What owner hardening (issue 14: admission, caps, budgets, fences, tcp
# frame checksums) costs, measured on a real multi-core host (the 16-core
# GPU machine; no GPU is used). scatterbench built just before the
# hardening, at HEAD, and at HEAD with -tcp-no-checksums run alternately,
# round after round, on the same machine; the table gives, per transport,
# workload and mode, the median end-to-end goodput of each and the ratios
# to before, and the same for the ceilings (direct control, pack-only,
# RTT).
#
#   bash scripts/device-hardening.sh build [BASE]   # here: builds .device/ (BASE: default c6a059b)
#   bash scripts/device-hardening.sh [ROUNDS]       # there, with .device carried: runs and prints
#
# Nothing is built on the device machine. Raw JSON lines go to $OUT
# (or ./bench-results) as before.jsonl, head.jsonl and nocrc.jsonl.
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
workloads=many-small,few-large,mixed,single-read,engram-remote-t16,structobj-put,structobj-get
echo "host: $(nproc) cores; before $(cat .device/before.rev), head $(cat .device/head.rev); $rounds rounds"
run() { # variant binary extra-flags...
	local v=$1 bin=$2
	shift 2
	local t0=$SECONDS
	timeout -k 5 240 ".device/scatterbench-$bin" -workloads "$workloads" -transport tcp,shm -reps 10 -quiet "$@" \
		-json "$out/$v.$r.jsonl" >/dev/null 2>"$out/$v.$r.err" || echo "round $r $v: exit $? (see $v.$r.err)"
	cat "$out/$v.$r.jsonl" >>"$out/$v.jsonl"
	rm -f "$out/$v.$r.jsonl"
	[ -s "$out/$v.$r.err" ] || rm -f "$out/$v.$r.err"
	echo "round $r $v: $((SECONDS - t0)) s"
}
: >"$out/before.jsonl"
: >"$out/head.jsonl"
: >"$out/nocrc.jsonl"
for r in $(seq "$rounds"); do
	run before before
	run head head
	run nocrc head -tcp-no-checksums
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
a, b, c = load("before"), load("head"), load("nocrc")
med = lambda d, k: statistics.median(d[k]) if k in d else float("nan")
print(f"{'transport':9} {'workload':34} {'mode':10} {'unit':7} {'before':>8} {'head':>8} {'nocrc':>8} {'head/bef':>8} {'nocrc/bef':>9}")
for k in sorted(set(a) | set(b) | set(c)):
    x, y, z = med(a, k), med(b, k), med(c, k)
    r = lambda v: v / x if x else float("nan")
    print(f"{k[0]:9} {k[1]:34} {k[2]:10} {k[3]:7} {x:8.3f} {y:8.3f} {z:8.3f} {r(y):8.3f} {r(z):9.3f}")
PY
