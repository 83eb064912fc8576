"""The set-up contract: a clear one-line error for missing packages without root, and an empty suite fails."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged user")
def test_setup_without_root_names_missing_packages():
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                        "make", "-s", "-C", str(ROOT), "packages", "APT_PKGS=coreutils mtcio-no-such-pkg sqlite3"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.splitlines()[0] == ("make setup: missing Debian packages (run as root to install): "
                                        "mtcio-no-such-pkg ")


def test_an_empty_test_selection_fails():
    r = subprocess.run(["make", "-s", "-C", str(ROOT), "test", "PYTEST_ARGS=-k no_test_has_this_name -p no:cacheprovider"],
                       capture_output=True, text=True, env={**os.environ, "MAKEFLAGS": ""})
    assert r.returncode != 0
    assert "make test: no tests were collected" in r.stderr


def test_a_non_editable_install_traces_and_has_the_engine(tmp_path):
    """`pip install .` (a wheel, not the tree): the shim and the engine are built into the package.  The
    project's venv lends its dependencies (a .pth line) so that pip installs only mtcio (--no-deps); pip's own
    cache serves the build backend."""
    import shutil
    import sys
    import sysconfig
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "*.egg-info", "__pycache__", ".pytest_cache", "*.mtclog", "montage_example",
        "tests"))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q",
                        "--no-deps", str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    pkg = Path(site, "mtcio")
    assert (pkg / "preload/build/libmtcprof.so").is_file()
    assert (pkg / "db/wfformat-schema.json").is_file()       # the WfFormat commands read it offline
    assert os.access(pkg / "envelope/engine/build/mtcengine", os.X_OK)
    assert (pkg / ("db/build/fastlog_c" + sysconfig.get_config_var("EXT_SUFFIX"))).is_file()
    # what a user runs: the installed scripts, nothing from the source tree
    logs = tmp_path / "logs"
    r = subprocess.run([str(venv / "bin/mtcprof"), "run", "--dir", str(logs), "--", "cat", "/etc/hostname"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (log,) = logs.iterdir()
    r = subprocess.run([str(venv / "bin/mtcprof"), "dump", "--no-ops", str(log)], capture_output=True, text=True)
    assert r.returncode == 0 and '"path":"/etc/hostname"' in r.stdout and str(ROOT) not in r.stdout
    r = subprocess.run([str(venv / "bin/python"), "-c", "from mtcio.envelope import engine; from mtcio.preload "
                        "import lib_path; from mtcio.db import fastlog; print(engine.build()); print(lib_path()); "
                        "print(fastlog._C is not None)"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(pkg / "envelope/engine/build/mtcengine"), str(pkg / "preload/build/libmtcprof.so"),
                                "True"]
