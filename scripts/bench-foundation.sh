#!/usr/bin/env bash
# The foundation's benchmark goals, each a ratio measured in one run of one
# process (see docs/benchmarks.md). Prints a table and writes the raw
# benchmark output to ${OUT_DIR:-bench-results}/foundation.txt.
#
#   TABLE=4294967296 bash scripts/bench-foundation.sh   # table size (bytes)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
table=${TABLE:-4294967296}
out=${OUT_DIR:-bench-results}
mkdir -p "$out"
raw="$out/foundation.txt"

echo "pack loops on a $((table >> 20)) MiB table (mapping and filling it takes a few seconds)..."
go test ./bufferpool/pack -run '^$' -count=1 \
	-bench '^Benchmark(PlanVsGather|GatherPair|ParallelPair)$' -benchtime=${BENCHTIME:-150x} \
	-pack.table="$table" | tee "$raw.pack" >/dev/null
go test ./planfmt -run '^$' -count=1 -bench '^(BenchmarkPlanRoundTrip|BenchmarkDecodeCommand)$' \
	-benchtime=100x | tee "$raw.plan" >/dev/null
cat "$raw.pack" "$raw.plan" >"$raw"
rm -f "$raw.pack" "$raw.plan"

# metric NAME_REGEX UNIT: the value before UNIT on the first matching line.
metric() {
	awk -v re="$1" -v unit="$2" '$1 ~ re { for (i = 2; i <= NF; i++) if ($i == unit) { print $(i-1); exit } }' "$raw"
}
row() { printf '%-58s %12s %10s %s\n' "$1" "$2" "$3" "$4"; }
verdict() { awk -v v="$1" -v g="$2" 'BEGIN { print (v + 0 >= g + 0) ? "ok" : "MISSED" }'; }
inverse() { awk -v v="$1" -v g="$2" 'BEGIN { print (v + 0 <= g + 0) ? "ok" : "MISSED" }'; }

echo
row "goal" "measured" "target" "verdict"
bpr=$(metric '^BenchmarkPlanVsGather' 'B/row')
row "encoded plan, 98,304 ids of a 384M-row table (B/row)" "$bpr" "<= 4.1" "$(inverse "$bpr" 4.1)"
ratio=$(metric '^BenchmarkPlanVsGather' 'gather/plan')
row "gather / (normalize+encode+decode), per row" "$ratio" ">= 20" "$(verdict "$ratio" 20)"
row "  plan ns/row | gather ns/row" "$(metric '^BenchmarkPlanVsGather' 'plan-ns/row') | $(metric '^BenchmarkPlanVsGather' 'gather-ns/row')" "" ""
for r in 64 128 264 512 1024 4096; do
	x=$(metric "^BenchmarkGatherPair/R=$r-" 'gen/generic')
	ns="$(metric "^BenchmarkGatherPair/R=$r-" 'gen-ns/row') vs $(metric "^BenchmarkGatherPair/R=$r-" 'generic-ns/row')"
	goal=""; v=""
	if [ "$r" = 264 ]; then goal=">= 1.0"; v=$(verdict "$x" 1.0); fi
	row "generated / generic speed, R=$r ($ns ns/row)" "$x" "$goal" "$v"
done
sp=$(metric '^BenchmarkParallelPair' 'speedup')
row "parallel gather, 2 goroutines / 1 ($((table >> 20)) MiB table)" "$sp" ">= 1.6" "$(verdict "$sp" 1.6)"
row "  1 goroutine ns/row | 2 goroutines ns/row" "$(metric '^BenchmarkParallelPair' '1g-ns/row') | $(metric '^BenchmarkParallelPair' '2g-ns/row')" "" ""
row "allocations: decode command, 1-goroutine gather (allocs/op)" \
	"$(awk '$1 ~ /^BenchmarkDecodeCommand/ {print $(NF-1)}' "$raw" | head -1) | $(awk '$1 ~ /^BenchmarkPlanVsGather/ {print $(NF-1)}' "$raw" | head -1)" "0 | 0" ""
echo
echo "raw output: $raw"
