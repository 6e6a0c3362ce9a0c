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
go vet -tags cuda ./cudagather ./tools/internal/cudaengram ./tools/capi
go test -tags cuda -c -o .gpu/cudagather.test ./cudagather
go test -tags cuda -c -o .gpu/cudaengram.test ./tools/internal/cudaengram
# The C ABI: its cuda-tagged tests, libscatterkit_cuda.so (what the Python
# package loads on the GPU machine) and libscatterkit.so beside it, and the
# CUDA library's header against docs/capi.md (TestHeaderCUDA, here where
# cuda.h is at hand: REQUIRE_CUDA_BUILD=1 makes its skip a failure).
(cd tools && go test -tags cuda -c -o ../.gpu/capi.test ./capi)
bash scripts/build-capi.sh --cuda .gpu >/dev/null
(cd tools && REQUIRE_CUDA_BUILD=1 go test -count=1 -run '^TestHeaderCUDA$' ./capi)
cp cudagather/bench/torchbench.py cudagather/bench/torch_host.py .gpu/
echo "built: $(ls .gpu | tr '\n' ' ')"
