#!/usr/bin/env bash
# Runs every check and test of the workspace. This is the README's test
# command and what CI runs (.ci/run calls it). It installs nothing it does not
# need; each step says what it does. Set FUZZTIME to change the fuzz budget
# (default 20000x: a fixed count, so the run time does not depend on luck).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fuzztime=${FUZZTIME:-20000x}
step() { printf '\n== %s\n' "$*"; }
t0=$SECONDS

step "gofmt"
unformatted=$(find . -name '*.go' -not -path './.cache/*' -not -path './.gpu/*' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet work"
go vet work

step "architecture graph (docs/architecture.md) matches the imports"
bash scripts/check-arch.sh

step "generated code drift (packgen)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go run github.com/scatterkit/scatterkit/gen/cmd/packgen -o "$tmp/pack_gen.go"
if ! cmp -s "$tmp/pack_gen.go" bufferpool/pack/pack_gen.go; then
	echo "bufferpool/pack/pack_gen.go is stale: run 'make generate' (go generate ./... in bufferpool/)"
	diff -u bufferpool/pack/pack_gen.go "$tmp/pack_gen.go" | head -40 || true
	exit 1
fi

step "CUDA build (the cuda-tagged binaries compile; they run only on a GPU machine)"
bash scripts/gpu-build.sh

step "chromium (headless; the scatterbench report test opens its page)"
# Installed when missing (about 20 s and 414 MB on Debian 12); the report
# test then must run: REQUIRE_CHROMIUM=1 makes its skip a failure.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
if [ -x /usr/bin/chromium ] && [ -z "${REQUIRE_CHROMIUM+set}" ]; then
	export REQUIRE_CHROMIUM=1
fi

step "go test work"
# scatterprof's tests load eBPF programs: as root they must run (a skip
# fails), elsewhere they skip with the reason. REQUIRE_EBPF=0 overrides.
if [ "$(id -u)" = 0 ] && [ -z "${REQUIRE_EBPF+set}" ]; then
	export REQUIRE_EBPF=1
fi
go test work

step "each module alone (GOWORK=off): go.mod and go.sum tidy, build, vet, test"
# What a user who go-gets one module builds: its own go.mod and go.sum, the
# sibling modules served from a local module proxy at versions.yaml's
# versions (scripts/check-modules.sh says how). About 5 minutes on a 2-core
# machine: the siblings are compiled afresh from their zips, and every
# module's tests run again against them.
bash scripts/check-modules.sh

step "go test -race (the concurrent packages)"
# The pool, the transports, the engine, the Engram store (concurrent
# lookups, Remove and Close against them, remote lookups) and reshard runs
# are where goroutines meet. The etcd backend's tests run without -race: its race
# build alone takes about 1.5 minutes of CI time and the race-relevant part
# is etcd's own code.
go test -race $(go list work | grep -E '/(bufferpool|verbs|engram)(/|$)' | grep -v -e '/pack$' -e '/discovery/etcd')
# Reshard runs many transfers at once (every pair of a run in flight,
# lowering split over goroutines); -short trims its random property cases.
go test -race -short ./reshard/...

step "fuzz, ${fuzztime} each"
# Every FuzzX in every package, one at a time (go test -fuzz takes one).
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | sort | while read -r file; do
	dir=$(dirname "$file")
	for name in $(grep -oE '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		echo "-- $dir $name"
		(cd "$dir" && go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" . >"$tmp/fuzz.log" 2>&1) || { cat "$tmp/fuzz.log"; exit 1; }
		tail -n 1 "$tmp/fuzz.log"
	done
done

echo
echo "all checks passed in $((SECONDS - t0)) s"
