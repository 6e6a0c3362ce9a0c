#!/usr/bin/env bash
# scatterbench before and after a change, on a real multi-core host (the
# 16-core GPU machine; no GPU is used): a build of BASE ("before") and of
# HEAD ("head"), plus any variants of head with extra flags, run
# alternately, round after round, on the same machine (the order reversed
# every other round). The table gives, per
# transport, workload and mode, the median end-to-end goodput (or p50
# latency) of each and the ratios to before, and the same for the ceilings
# (direct control, pack-only, RTT).
#
#   bash scripts/device-compare.sh build BASE                # here: builds .device/
#   bash scripts/device-compare.sh [ROUNDS] [NAME=FLAGS ...]  # there, with .device carried
#
# e.g. `bash scripts/device-compare.sh 3 nocrc=-tcp-no-checksums`. Nothing
# is built on the device machine. Raw JSON lines go to $OUT (or
# ./bench-results) as before.jsonl, head.jsonl and NAME.jsonl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" = build ]; then
	base=${2:?usage: device-compare.sh build BASE}
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
shift || true
out=${OUT:-bench-results}
mkdir -p "$out"
workloads=${WORKLOADS:-many-small,few-large,mixed,single-read,engram-remote-t16,structobj-put,structobj-get}
# shellcheck source=scripts/device-variants.sh
. scripts/device-variants.sh
variants_init "" "$@"
echo "host: $(nproc) cores; before $(cat .device/before.rev), head $(cat .device/head.rev); $rounds rounds; variants ${variants[*]}"
for v in "${variants[@]}"; do : >"$out/$v.jsonl"; done
for r in $(seq "$rounds"); do
	round_order "$r"
	for v in "${order[@]}"; do
		t0=$SECONDS
		# shellcheck disable=SC2086 # flags are words
		timeout -k 5 240 ".device/scatterbench-${bins[$v]}" -workloads "$workloads" -transport tcp,shm -reps 10 -quiet ${flags[$v]} \
			-json "$out/$v.$r.jsonl" >/dev/null 2>"$out/$v.$r.err" || echo "round $r $v: exit $? (see $v.$r.err)"
		cat "$out/$v.$r.jsonl" >>"$out/$v.jsonl"
		rm -f "$out/$v.$r.jsonl"
		[ -s "$out/$v.$r.err" ] || rm -f "$out/$v.$r.err"
		echo "round $r $v: $((SECONDS - t0)) s"
	done
done
python3 - "$out" "${variants[@]}" <<'PY'
import json, statistics, sys
out, names = sys.argv[1], sys.argv[2:]
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
data = [load(n) for n in names]
med = lambda d, k: statistics.median(d[k]) if k in d else float("nan")
head = f"{'transport':9} {'workload':34} {'mode':10} {'unit':7} " + " ".join(f"{n:>8}" for n in names)
head += " " + " ".join(f"{n + '/bef':>10}" for n in names[1:])
print(head)
for k in sorted(set().union(*data)):
    vals = [med(d, k) for d in data]
    x = vals[0]
    r = lambda v: v / x if x else float("nan")
    print(f"{k[0]:9} {k[1]:34} {k[2]:10} {k[3]:7} " + " ".join(f"{v:8.3f}" for v in vals) + " " + " ".join(f"{r(v):10.3f}" for v in vals[1:]))
PY
