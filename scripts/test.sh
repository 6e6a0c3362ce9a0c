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

step "UCX transport (verbs/ucx, build tag ucx): the conformance suite over UCX's tcp and shared-memory transports, the engine, remote lookups and structobj over it"
# libucx-dev (Debian 12: UCX 1.13, with verbs support) is installed when
# missing; the ucx-tagged tests then must run.
if [ ! -e /usr/include/ucp/api/ucp.h ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libucx-dev >/dev/null
fi
CGO_ENABLED=1 go vet -tags ucx ./verbs/ucx/... ./verbs/transports/ ./verbs/engine/ ./engram/internal/remote/ ./structobj/
UCX_LOG_LEVEL=fatal CGO_ENABLED=1 go test -tags ucx -count=1 ./verbs/ucx/...
# Its progress thread, posts and teardown under the race detector.
UCX_LOG_LEVEL=fatal CGO_ENABLED=1 go test -race -tags ucx -count=1 ./verbs/ucx/
# The commands a user builds for it (docs/ucx.md).
CGO_ENABLED=1 go build -tags ucx -o /dev/null ./tools/cmd/scatterd
CGO_ENABLED=1 go build -tags ucx -o /dev/null ./tools/cmd/scatterbench
# The engine's, the remote Engram lookups' and structobj's tests over the
# backends, with UCX among them (its one-sided operations over UCX's tcp
# transport on loopback): every gather and direct path over UCX.
UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_LOG_LEVEL=fatal CGO_ENABLED=1 go test -tags ucx -count=1 \
	./verbs/transports/ ./verbs/engine/ ./engram/internal/remote/ ./structobj/

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

step "Python package (tools/python): pip install through the Go build hook, then pytest (numpy and torch)"
# Debian's python (/usr/bin/python3: a pyenv python3 first on PATH lacks
# Debian's packages) with numpy, pytest, torch (CPU) and setuptools,
# installed when missing, so the torch tests run. The package is installed
# once into a temp target from a copy of tools/python (nothing is built in
# the checkout): setup.py's hook builds libscatterkit.so with Go, offline
# (--no-build-isolation, Debian's setuptools); without Debian's pip,
# setup.py build proves the hook. The tests then run on the checkout's
# sources with that library on SCATTERKIT_LIB. About 20 s with a warm Go
# build cache, a minute cold (the library build is most of it).
py=/usr/bin/python3
if ! $py -c 'import numpy, pytest, torch, setuptools' 2>/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		python3-numpy python3-pytest python3-torch python3-setuptools >/dev/null
fi
cp -r tools/python "$tmp/pysrc"
rm -rf "$tmp/pysrc/build" "$tmp/pysrc/scatterkit/"libscatterkit*.so
if $py -m pip --version >/dev/null 2>&1; then
	# The install builds both libraries (SCATTERKIT_BUILD_CUDA=1, against the
	# cached CUDA headers and stub libcuda): the package a GPU machine gets.
	# Here no driver initialises, so the package loads libscatterkit.so.
	cuda_cache=$(bash scripts/cuda-headers.sh)
	SCATTERKIT_GO_MODULE="$PWD/tools" SCATTERKIT_BUILD_CUDA=1 CGO_CFLAGS="-I$cuda_cache/root/usr/include" \
		CGO_LDFLAGS="-L$cuda_cache/root/usr/lib/x86_64-linux-gnu/stubs" \
		$py -m pip install -q --disable-pip-version-check --root-user-action=ignore \
		--no-build-isolation --no-deps --no-index --target "$tmp/pyinstall" "$tmp/pysrc"
	test -f "$tmp/pyinstall/scatterkit/libscatterkit_cuda.so"
	pylib="$tmp/pyinstall/scatterkit/libscatterkit.so"
	(cd "$tmp" && PYTHONPATH="$tmp/pyinstall" $py -c 'import scatterkit, scatterkit.engram as e, tempfile
s = e.EngramStore(tables={"t": {"num_rows": 1, "row_bytes": 1}}, local_dir=tempfile.mkdtemp())
print("installed:", scatterkit.library_path()); s.close()')
else
	(gomod="$PWD/tools" && cd "$tmp/pysrc" && SCATTERKIT_GO_MODULE="$gomod" $py setup.py -q build --build-base "$tmp/pybuild")
	pylib=$(find "$tmp/pybuild" -name libscatterkit.so | head -n 1)
fi
SCATTERKIT_LIB="$pylib" $py -m pytest -q -p no:cacheprovider tools/python/tests

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
