"""Builds the scatterkit package with libscatterkit.so inside it.

build_py runs the Go toolchain on tools/capi (the C ABI, docs/capi.md):

    go build -buildmode=c-shared -trimpath -o <build>/scatterkit/libscatterkit.so ./capi

in the tools module next to this directory (tools/python/..). Environment:

- SCATTERKIT_PREBUILT_LIB: a libscatterkit.so to package instead of
  building one (CI builds it once with scripts/build-capi.sh);
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
            return
        go = os.environ.get("GO", "go")
        cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-o", dest, "./capi"]
        print("scatterkit: " + " ".join(cmd))
        try:
            subprocess.run(cmd, cwd=go_module(), check=True)
        except FileNotFoundError:
            raise SystemExit("scatterkit: the Go toolchain (go) is needed to build libscatterkit.so") from None
        header = os.path.join(dest_dir, "libscatterkit.h")  # go writes the cgo header next to it
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
