#!/usr/bin/env bash
# Builds the `cuda`-tagged test and benchmark binaries into .gpu/ on this
# (GPU-less) machine: cgo against CUDA's driver header and the stub libcuda
# from Debian's nvidia-cuda-dev (fetched and cached by scripts/cuda-headers.sh).
# The binaries run unchanged on the GPU machine, where `bash scripts/gpu-run.sh`
# (with .gpu carried) runs them. CI runs this script to prove they compile.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache=$(bash scripts/cuda-headers.sh)
export CGO_ENABLED=1
export CGO_CFLAGS="-I$cache/root/usr/include"
export CGO_LDFLAGS="-L$cache/root/usr/lib/x86_64-linux-gnu/stubs"
mkdir -p .gpu
go vet -tags cuda ./cudagather ./tools/internal/cudaengram
go test -tags cuda -c -o .gpu/cudagather.test ./cudagather
go test -tags cuda -c -o .gpu/cudaengram.test ./tools/internal/cudaengram
cp cudagather/bench/torchbench.py .gpu/
echo "built: $(ls .gpu | tr '\n' ' ')"
