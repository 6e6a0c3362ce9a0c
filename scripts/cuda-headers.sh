#!/usr/bin/env bash
# Fetches the CUDA driver API headers and the stub libcuda that cgo links the
# `cuda`-tagged packages against: Debian's nvidia-cuda-dev (non-free), taken
# with `apt-get download` through a private sources list (the system's apt
# configuration is not touched) and unpacked with `dpkg -x` into a cache
# folder. Prints the cache folder. Idempotent: a complete cache is reused.
#
#   CUDA_CACHE (default .cache/cuda in the repository) is the cache folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache=${CUDA_CACHE:-$PWD/.cache/cuda}
if [ -f "$cache/root/usr/include/cuda.h" ] && [ -f "$cache/root/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" ]; then
	echo "$cache"
	exit 0
fi
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial" "$cache/debs" "$cache/root"
src="$cache/apt/sources.list"
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
echo "deb http://deb.debian.org/debian $suite main contrib non-free non-free-firmware" >"$src"
opts=(-o "Dir::Etc::SourceList=$src" -o "Dir::Etc::SourceParts=-" -o "Dir::State::Lists=$cache/apt/lists"
	-o "Dir::Cache::Archives=$cache/apt/archives" -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1")
echo "cuda-headers: apt-get update (private list: $src)" >&2
apt-get "${opts[@]}" update -qq >&2
(cd "$cache/debs" && apt-get "${opts[@]}" download -qq nvidia-cuda-dev >&2)
# Keep only what cgo needs (the package unpacks to about 3.5 GB).
tmp="$cache/unpack"
rm -rf "$tmp" && mkdir -p "$tmp"
for deb in "$cache"/debs/nvidia-cuda-dev_*.deb; do
	dpkg -x "$deb" "$tmp"
done
mkdir -p "$cache/root/usr/lib/x86_64-linux-gnu"
rm -rf "$cache/root/usr/include" "$cache/root/usr/lib/x86_64-linux-gnu/stubs"
mv "$tmp/usr/include" "$cache/root/usr/include"
mv "$tmp/usr/lib/x86_64-linux-gnu/stubs" "$cache/root/usr/lib/x86_64-linux-gnu/stubs"
rm -rf "$tmp" "$cache"/debs/*.deb "$cache"/apt/archives/*.deb
test -f "$cache/root/usr/include/cuda.h" || { echo "cuda-headers: cuda.h missing from nvidia-cuda-dev" >&2; exit 1; }
test -f "$cache/root/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" || { echo "cuda-headers: stub libcuda.so missing" >&2; exit 1; }
echo "$cache"
