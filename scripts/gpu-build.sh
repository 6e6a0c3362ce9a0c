#!/usr/bin/env bash
# Builds the `cuda`-tagged test and benchmark binaries into .gpu/ on this
# (GPU-less) machine: cgo against CUDA's driver header and the stub libcuda
# from Debian's nvidia-cuda-dev (fetched and cached by scripts/cuda-headers.sh).
# The binaries run unchanged on the GPU machine, where `bash scripts/gpu-run.sh`
# runs them. What travels there is .gpu.tgz (carry [".gpu.tgz"]): the same
# files compressed, since .gpu itself is larger than the 64 MiB a run may
# carry; gpu-run.sh and gpu-lookups.sh unpack it. CI runs this script to
# prove the binaries compile.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache=$(bash scripts/cuda-headers.sh)
export CGO_ENABLED=1
export CGO_CFLAGS="-I$cache/root/usr/include"
export CGO_LDFLAGS="-L$cache/root/usr/lib/x86_64-linux-gnu/stubs"
mkdir -p .gpu
go vet -tags cuda ./cudagather ./tools/internal/cudaengram ./tools/capi ./tools/internal/bench
# Stripped (-s -w): smaller to carry to the GPU machine.
go test -tags cuda -ldflags="-s -w" -c -o .gpu/cudagather.test ./cudagather
go test -tags cuda -ldflags="-s -w" -c -o .gpu/cudaengram.test ./tools/internal/cudaengram
# The C ABI: its cuda-tagged tests, libscatterkit_cuda.so (what the Python
# package loads on the GPU machine) and libscatterkit.so beside it, and the
# CUDA library's header against docs/capi.md (TestHeaderCUDA, here where
# cuda.h is at hand: REQUIRE_CUDA_BUILD=1 makes its skip a failure).
(cd tools && go test -tags cuda -ldflags="-s -w" -c -o ../.gpu/capi.test ./capi)
# scatterbench with -dst gpu (READ destinations in device memory).
(cd tools && go build -tags cuda -ldflags="-s -w" -o ../.gpu/scatterbench ./cmd/scatterbench)
CAPI_LDFLAGS="-s -w" bash scripts/build-capi.sh --cuda .gpu >/dev/null
(cd tools && REQUIRE_CUDA_BUILD=1 go test -count=1 -run '^TestHeaderCUDA$' ./capi)
cp cudagather/bench/torchbench.py cudagather/bench/torch_host.py .gpu/
echo "built: $(ls .gpu | tr '\n' ' ')"
tar czf .gpu.tgz .gpu
size=$(du -sm .gpu.tgz | cut -f1)
if [ "$size" -gt 60 ]; then
	echo "gpu-build: .gpu.tgz is $size MiB: more than the 64 MiB a device run may carry (with room to spare)" >&2
	exit 1
fi
echo ".gpu.tgz: $size MiB (carry it; gpu-run.sh unpacks it)"
