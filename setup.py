"""Build hook (metadata is in pyproject.toml): a wheel carries the C parts already built.

`pip install .` compiles the tracing shim (preload/), the envelope engine (envelope/engine/) and the C log reader
(db/, for this interpreter) with their own Makefiles and puts them where the code looks for them inside the package
(mtcio/preload/build/libmtcprof.so, mtcio/envelope/engine/build/mtcengine, mtcio/db/build/fastlog_c*.so).  Their
sources and Makefiles are package data (pyproject.toml), copied first, so the built files are the newer ones and
`mtcenvelope measure`'s make has nothing to do.  Needs make and a C compiler, as `make setup` does.  An editable
install (`make setup`) builds nothing here: its cbuild step builds in the tree.
"""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
# (folder with a Makefile, make target, where the built file goes in the package)
C_PARTS = [
    ("preload", "build/libmtcprof.so", "mtcio/preload/build/libmtcprof.so"),
    ("envelope/engine", "build/mtcengine", "mtcio/envelope/engine/build/mtcengine"),
    ("db", "build/fastlog_c" + sysconfig.get_config_var("EXT_SUFFIX"),
     "mtcio/db/build/fastlog_c" + sysconfig.get_config_var("EXT_SUFFIX")),
]


class BuildPyWithC(build_py):
    def run(self):
        super().run()                   # the Python files and package data (the C sources) first
        if getattr(self, "editable_mode", False):
            return
        for folder, target, dest in C_PARTS:
            src_dir = os.path.join(HERE, folder)
            r = subprocess.run(["make", "-s", "-C", src_dir, target, f"PYTHON={sys.executable}"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"mtcio: building {folder}/{target} failed (needs make and a C compiler):\n"
                                 f"{r.stdout}{r.stderr}")
            out = os.path.join(self.build_lib, dest)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copy2(os.path.join(src_dir, target), out)


class BinaryDistribution(Distribution):
    """Wheels hold a compiled shim and engine: tag them for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithC}, distclass=BinaryDistribution)
