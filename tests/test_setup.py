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
