#!/usr/bin/env bash
# Regenerates the pictures of docs/benchmarks.md (docs/img/*.png): a
# default scatterbench run (goodput, latency and stage pictures per
# transport) and a matrix run over tcp (the small multiples), each also
# written as an HTML report (REPORT, default /tmp/scatterbench-report) and
# as JSON lines beside it.
#
#   bash scripts/bench-pictures.sh                  # about 1 + 2 min on 2 cores
#   REPS=20 MATRIX_REPS=3 bash scripts/bench-pictures.sh
#   DEFAULT_JSON=a.jsonl MATRIX_JSON=b.jsonl bash scripts/bench-pictures.sh   # redraw captured runs
#
# Figures are measurements of the machine it runs on: say which in the
# commit that refreshes them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${OUT:-docs/img}
report=${REPORT:-/tmp/scatterbench-report}
reps=${REPS:-5}
mreps=${MATRIX_REPS:-2}
seed=${SEED:-1}
mkdir -p "$out" "$report/default" "$report/matrix"
rm -f "$out"/goodput-*.png "$out"/latency-*.png "$out"/stages-*.png "$out"/matrix-*.png

redraw() { # redraw JSON-FILE: the pictures of captured JSON lines
	SCATTERBENCH_PICTURES_JSON=$(realpath "$1") SCATTERBENCH_PICTURES_DIR=$(realpath "$out") \
		go test -count=1 -run '^TestPicturesFromJSON$' ./tools/internal/bench/ >/dev/null
}

if [ -n "${DEFAULT_JSON:-}" ] || [ -n "${MATRIX_JSON:-}" ]; then
	[ -z "${DEFAULT_JSON:-}" ] || redraw "$DEFAULT_JSON"
	[ -z "${MATRIX_JSON:-}" ] || redraw "$MATRIX_JSON"
	ls -l "$out"/*.png
	exit 0
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/scatterbench" ./tools/cmd/scatterbench
status=0
echo "== default run (-reps $reps)"
"$tmp/scatterbench" -reps "$reps" -seed "$seed" -quiet -plot "$out" -report "$report/default" \
	-json "$report/default/lines.jsonl" || status=$?
echo "== matrix run over tcp (-reps $mreps -warmup 0)"
"$tmp/scatterbench" -workloads matrix -transport tcp -reps "$mreps" -warmup 0 -table-bytes 256MiB -seed "$seed" -quiet \
	-plot "$out" -report "$report/matrix" -json "$report/matrix/lines.jsonl" || status=$?
ls -l "$out"/*.png
echo "reports: $report/default/index.html $report/matrix/index.html"
exit "$status"
