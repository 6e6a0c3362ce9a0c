#!/usr/bin/env bash
# Issue 19's figures (the UCX transport) on a real multi-core host (the
# 16-core GPU machine; no GPU used), from binaries and libraries gathered
# here, in one run that builds nothing there and prints one table:
#
#   bash scripts/device-ucx.sh build      # here: .ucx/ (scatterbench -tags ucx,
#                                         # Debian 12's UCX 1.13 libraries and
#                                         # modules, ucx_perftest from ucx-utils)
#   bash scripts/device-ucx.sh [REPS]     # there, with .ucx carried
#   bash scripts/device-ucx.sh diag [REPS] # there: where a UCX gather waits
#                                         # (staging slots swept, the raw
#                                         # transport's put and get cycles,
#                                         # an execution trace; see below)
#
# For each UCX transport set (UCX_TLS=tcp on loopback, UCX_TLS=posix,cma)
# it runs scatterbench -transport ucx over many-small (98,304 x 264 B),
# mixed and few-large, every mode, the owner in a child process, and the
# tcp backend over the same workloads beside it; then ucx_perftest's gets
# of 264 B and 512 KiB over the same UCX transports (the peer: UCX alone,
# one process a side, busy polling). The table gives, per transport and
# workload, each mode's goodput and p50, adaptive against forced direct
# and against the better of its forced modes, the gather window against
# the direct control of the same run, and leaks and failures. Raw JSON
# lines and logs go to $OUT (or ./bench-results).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${1:-}" = build ]; then
	rm -rf .ucx && mkdir -p .ucx/lib/ucx .ucx/bin
	CGO_ENABLED=1 go build -tags ucx -o .ucx/scatterbench ./tools/cmd/scatterbench
	CGO_ENABLED=1 go test -c -tags ucx -o .ucx/ucx.test ./verbs/ucx
	for l in libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libnuma.so.1; do
		cp -L "/lib/x86_64-linux-gnu/$l" .ucx/lib/
	done
	cp -L /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0 .ucx/lib/ucx/
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download ucx-utils >/dev/null 2>&1 && dpkg-deb -x ucx-utils_*.deb x)
	cp "$tmp"/x/usr/bin/ucx_perftest "$tmp"/x/usr/bin/ucx_info .ucx/bin/
	for l in libgomp.so.1; do cp -L "/lib/x86_64-linux-gnu/$l" .ucx/lib/; done
	rm -rf "$tmp"
	git rev-parse --short HEAD >.ucx/rev
	du -sh .ucx
	exit 0
fi
diag=
if [ "${1:-}" = diag ]; then
	diag=1
	shift
fi
reps=${1:-20}
out=${OUT:-bench-results}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.ucx/lib UCX_MODULE_DIR=$PWD/.ucx/lib/ucx UCX_LOG_LEVEL=error
if [ -n "$diag" ]; then
	# Where a gather over UCX waits: its goodput as the staging slots a
	# command may hold grow (a pipeline held by each chunk's latency gains
	# with slots, one held by a rate does not), the raw transport's large
	# puts and gets (one batch, one at a time, 8 in flight), and a Go
	# execution trace of few-large gathers with the owner in the process.
	echo "host: $(nproc) cores; scatterkit $(cat .ucx/rev)"
	for tls in ${DIAG_TLS:-tcp posix,cma}; do
		for slots in ${DIAG_SLOTS:-1 2 4 8 16 32}; do
			env UCX_TLS=$tls UCX_NET_DEVICES=lo .ucx/scatterbench -transport ucx -mode gather -workloads many-small,few-large \
				-staging-slots $slots -reps "$reps" -quiet -json - 2>/dev/null | python3 -c '
import json, sys
tls, slots, ceil = sys.argv[1], sys.argv[2], {}
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
for d in rows:
    if d.get("workload", "").startswith("ceiling/direct-control"):
        ceil[d.get("for")] = d.get("goodput_gbps")
for d in rows:
    if d.get("mode") == "gather":
        dc = ceil.get(d["workload"]) or float("nan")
        w, g, p50, win = d["workload"], d["goodput_gbps"], d["p50_ms"], (d.get("window_gbps") or 0) / dc
        print(f"{tls:9} slots {slots:>2} {w:10} gather {g:6.2f} Gbit/s  p50 {p50:8.2f} ms  window/dc {win:5.2f}  dc {dc:6.2f}")
' "$tls" "$slots"
		done
	done
	echo "== raw transport, UCX_TLS=tcp (verbs/ucx BenchmarkLarge: 64 x 512 KiB from the requester)"
	.ucx/ucx.test -test.run XXX -test.bench BenchmarkLarge -test.benchtime 40x 2>&1 | grep -E '^Benchmark' || true
	UCX_TLS=tcp UCX_NET_DEVICES=lo .ucx/scatterbench -transport ucx -mode gather -workloads few-large,many-small -owner inproc \
		-reps 10 -quiet -exectrace "$out/ucx-gather.trace" -explain >"$out/ucx-gather-trace.log" 2>&1 || echo "exectrace: exit $?"
	ls -la "$out"
	exit 0
fi
echo "host: $(nproc) cores; scatterkit $(cat .ucx/rev); $(.ucx/bin/ucx_info -v | head -1)"
.ucx/bin/ucx_info -d 2>/dev/null | grep -E '^#\s+Transport:' | sort -u | tr -s ' ' | tr '\n' ' '
echo
run() { # name, then environment and scatterbench flags
	local name=$1
	shift
	env "$@" -mode direct,gather,hybrid,adaptive -workloads many-small,mixed,few-large -reps "$reps" -quiet \
		-json "$out/$name.jsonl" >"$out/$name.log" 2>&1 || echo "$name: exit $? (see $name.log)"
}
run ucx-tcp UCX_TLS=tcp UCX_NET_DEVICES=lo .ucx/scatterbench -transport ucx
run ucx-posix-cma UCX_TLS=posix,cma .ucx/scatterbench -transport ucx
run tcp .ucx/scatterbench -transport tcp
perf() { # name, UCX_TLS, test, size, iterations
	local name=$1 tls=$2
	UCX_TLS=$tls UCX_NET_DEVICES=lo timeout 60 .ucx/bin/ucx_perftest -t "$3" -s "$4" -n "$5" -p 13377 >"$out/perf-$name.server.log" 2>&1 &
	local srv=$!
	sleep 1
	UCX_TLS=$tls UCX_NET_DEVICES=lo timeout 60 .ucx/bin/ucx_perftest 127.0.0.1 -t "$3" -s "$4" -n "$5" -p 13377 >"$out/perf-$name.log" 2>&1 || echo "perftest $name: exit $?"
	wait "$srv" || true
	# The last result line: iterations, latency (typical, average, overall;
	# us), bandwidth (average, overall; MB/s), message rate (average,
	# overall; msg/s).
	echo "perftest $name $(grep -E '^[[:space:]]*Final:' "$out/perf-$name.log" | tail -1)" >>"$out/perftest.txt"
}
: >"$out/perftest.txt"
perf tcp-get-264 tcp ucp_get 264 200000
perf tcp-get-512k tcp ucp_get 524288 2000
perf posix-cma-get-264 posix,cma ucp_get 264 2000000
perf posix-cma-get-512k posix,cma ucp_get 524288 20000
python3 - "$out" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name + ".jsonl")
    if not os.path.exists(p):
        return [], {}
    runs, ceil = [], {}
    for line in open(p):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        w = d.get("workload", "")
        if w.startswith("ceiling/"):
            ceil[(d.get("for"), w[len("ceiling/"):])] = d.get("goodput_gbps")
        elif "mode" in d:
            runs.append(d)
    return runs, ceil
for name in ("ucx-tcp", "ucx-posix-cma", "tcp"):
    runs, ceil = load(name)
    print(f"\n== {name} (Gbit/s; ratios within this run)")
    print(f"{'workload':11} {'mode':9} {'chosen':14} {'Gbit/s':>7} {'p50 ms':>8} {'win/dc':>7} {'status':>6} {'leaks':>5} {'errors':>6}")
    by = {}
    for d in runs:
        by[(d["workload"], d["mode"])] = d
        dc = ceil.get((d["workload"], "direct-control"))
        win = d.get("window_gbps")
        print(f"{d['workload']:11} {d['mode']:9} {d.get('chosen',''):14} {d.get('goodput_gbps',0):7.2f} {d.get('p50_ms',0):8.2f} "
              f"{(win/dc if win and dc else float('nan')):7.3f} {d.get('status',''):>6} {d.get('leaked_leases',0):5} {d.get('errors',0):6}")
    for w in sorted({w for w, _ in by}):
        a, dr = by.get((w, "adaptive")), by.get((w, "direct"))
        forced = [by[(w, m)]["goodput_gbps"] for m in ("direct", "gather", "hybrid") if (w, m) in by]
        if a and forced:
            best = max(forced)
            x = a["goodput_gbps"] / dr["goodput_gbps"] if dr and dr["goodput_gbps"] else float("nan")
            print(f"{w:11} adaptive / best forced = {a['goodput_gbps']/best:.3f}; adaptive / forced direct = {x:.1f}x")
print()
print(open(os.path.join(out, "perftest.txt")).read())
PY
