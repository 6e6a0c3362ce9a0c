#!/usr/bin/env bash
# Builds libscatterkit.so, the C ABI of docs/capi.md (tools/capi), into
# OUTDIR (default out/capi) and prints the library's path. The header cgo
# generates, libscatterkit.h, lands next to it. It is the command
#   cd tools && go build -buildmode=c-shared -o OUTDIR/libscatterkit.so ./capi
# which needs cgo and a C compiler.
#
#   --cuda  also builds libscatterkit_cuda.so (the same command with
#           -tags cuda), against CUDA's cuda.h and the stub libcuda that
#           scripts/cuda-headers.sh fetches, unless CGO_CFLAGS already
#           names them; it links libcuda.so.1 and prints both paths.
#
# CAPI_LDFLAGS, when set, is passed as -ldflags (scripts/gpu-build.sh sets
# "-s -w": stripped libraries, so what it carries to the GPU machine fits).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cuda=0
if [ "${1:-}" = "--cuda" ]; then
	cuda=1
	shift
fi
out=${1:-$root/out/capi}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root/tools"
ld=()
[ -z "${CAPI_LDFLAGS:-}" ] || ld=(-ldflags="$CAPI_LDFLAGS")
CGO_ENABLED=1 go build "${ld[@]}" -buildmode=c-shared -o "$out/libscatterkit.so" ./capi
echo "$out/libscatterkit.so"
if [ "$cuda" = 1 ]; then
	if [ -z "${CGO_CFLAGS:-}" ]; then
		cache=$(bash "$root/scripts/cuda-headers.sh")
		export CGO_CFLAGS="-I$cache/root/usr/include"
		export CGO_LDFLAGS="-L$cache/root/usr/lib/x86_64-linux-gnu/stubs"
	fi
	CGO_ENABLED=1 go build "${ld[@]}" -tags cuda -buildmode=c-shared -o "$out/libscatterkit_cuda.so" ./capi
	echo "$out/libscatterkit_cuda.so"
fi
