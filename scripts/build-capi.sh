#!/usr/bin/env bash
# Builds libscatterkit.so, the C ABI of docs/capi.md (tools/capi), into
# OUTDIR (default out/capi) and prints the library's path. The header cgo
# generates, libscatterkit.h, lands next to it. It is the command
#   cd tools && go build -buildmode=c-shared -o OUTDIR/libscatterkit.so ./capi
# which needs cgo and a C compiler.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/out/capi}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root/tools"
CGO_ENABLED=1 go build -buildmode=c-shared -o "$out/libscatterkit.so" ./capi
echo "$out/libscatterkit.so"
