"""Builds the scatterkit package with libscatterkit.so inside it.

build_py runs the Go toolchain on tools/capi (the C ABI, docs/capi.md):

    go build -buildmode=c-shared -trimpath -o <build>/scatterkit/libscatterkit.so ./capi

in the tools module next to this directory (tools/python/..). Environment:

- SCATTERKIT_PREBUILT_LIB: a libscatterkit.so to package instead of
  building one (CI builds it once with scripts/build-capi.sh), and
  SCATTERKIT_PREBUILT_CUDA_LIB likewise for libscatterkit_cuda.so;
- SCATTERKIT_BUILD_CUDA: "auto" (default: also build libscatterkit_cuda.so,
  `go build -tags cuda`, where CUDA's cuda.h is found, in CGO_CFLAGS's -I
  folders, $CUDA_HOME/include, /usr/local/cuda/include or /usr/include;
  a failed CUDA build is then a warning), "1" (it must build), "0" (never).
  One package serves both kinds of machine: at import the package loads
  the CUDA library only where the driver initialises (docs/python.md);
- SCATTERKIT_GO_MODULE: the tools module directory, when the package is
  built outside its checkout;
- GO: the go binary (default: go on PATH).

The wheel is platform-specific (it carries a native library) but not tied
to one CPython: the library has no Python ABI, ctypes loads it.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = "libscatterkit.so"
CUDA_LIB = "libscatterkit_cuda.so"


def cuda_header_dirs() -> list:
    dirs = [f[2:] for f in os.environ.get("CGO_CFLAGS", "").split() if f.startswith("-I")]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        dirs.append(os.path.join(home, "include"))
    return dirs + ["/usr/local/cuda/include", "/usr/include"]


def want_cuda() -> bool:
    mode = os.environ.get("SCATTERKIT_BUILD_CUDA", "auto").lower()
    if mode in ("0", "no", "off", "false"):
        return False
    found = any(os.path.exists(os.path.join(d, "cuda.h")) for d in cuda_header_dirs())
    if mode in ("1", "yes", "on", "true"):
        if not found:
            raise SystemExit("scatterkit: SCATTERKIT_BUILD_CUDA=1 but no cuda.h (set CGO_CFLAGS=-I<dir> or CUDA_HOME)")
        return True
    return found


def go_module() -> str:
    d = os.environ.get("SCATTERKIT_GO_MODULE") or os.path.normpath(os.path.join(HERE, ".."))
    if not os.path.isfile(os.path.join(d, "go.mod")) or not os.path.isdir(os.path.join(d, "capi")):
        raise SystemExit(
            f"scatterkit: no Go module with a capi package at {d}: build from a scatterkit checkout "
            "(pip install ./tools/python), or set SCATTERKIT_GO_MODULE or SCATTERKIT_PREBUILT_LIB"
        )
    return d


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        dest_dir = os.path.join(os.path.abspath(self.build_lib), "scatterkit")  # go runs elsewhere
        os.makedirs(dest_dir, exist_ok=True)
        dest = os.path.join(dest_dir, LIB)
        prebuilt = os.environ.get("SCATTERKIT_PREBUILT_LIB")
        if prebuilt:
            shutil.copyfile(prebuilt, dest)
            cuda = os.environ.get("SCATTERKIT_PREBUILT_CUDA_LIB")
            if cuda:
                shutil.copyfile(cuda, os.path.join(dest_dir, CUDA_LIB))
            return
        self.go_build(dest, [])
        if want_cuda():
            strict = os.environ.get("SCATTERKIT_BUILD_CUDA", "auto").lower() in ("1", "yes", "on", "true")
            try:
                self.go_build(os.path.join(dest_dir, CUDA_LIB), ["-tags", "cuda"])
            except subprocess.CalledProcessError:
                if strict:
                    raise
                print("scatterkit: warning: libscatterkit_cuda.so did not build; the package does CPU lookups only")

    def go_build(self, dest: str, tags: list) -> None:
        go = os.environ.get("GO", "go")
        cmd = [go, "build", *tags, "-buildmode=c-shared", "-trimpath", "-o", dest, "./capi"]
        print("scatterkit: " + " ".join(cmd))
        env = dict(os.environ, CGO_ENABLED="1")
        try:
            subprocess.run(cmd, cwd=go_module(), check=True, env=env)
        except FileNotFoundError:
            raise SystemExit("scatterkit: the Go toolchain (go) is needed to build libscatterkit.so") from None
        header = dest[: -len(".so")] + ".h"  # go writes the cgo header next to it
        if os.path.exists(header):
            os.remove(header)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPyWithLibrary}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:  # no wheel package: sdists and setup.py build still work
    pass

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
