"""Shared fixtures. `testbed`: one real Gfarm testbed (mtcbed) per pytest session, always torn down.

A machine holds one testbed at a time; an exclusive lock makes concurrent pytest sessions wait
for each other instead of failing."""
import fcntl
import os
import signal
import subprocess
import sys

import pytest

# A shell starts background jobs with SIGINT ignored, and an ignored signal stays ignored across exec: the Ctrl-C
# tests' children would never see theirs. A handler here (reset to the default at exec) gives it back to them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
TESTBED_NODES = 4


@pytest.hookimpl(tryfirst=True)     # before -m deselects
def pytest_collection_modifyitems(items):
    """A test that gets the testbed fixtures brings a testbed up or tears one down: it is a testbed test even when
    its module forgot the mark, so `-m "not testbed"` never touches a live testbed."""
    for item in items:
        if "bed_manager" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("testbed"):
            item.add_marker(pytest.mark.testbed)


class Testbed:
    """Handle on a running testbed, described by `mtcbed status --json`."""

    def __init__(self, status):
        self.status = status
        self.hosts = [h["name"] for h in status["hosts"]]
        self.addrs = {h["name"]: h["addr"] for h in status["hosts"]}
        self.gfarm_config = status["gfarm_config"]
        self.user = status["user"]

    def mount(self, host):
        return next(h["mount"] for h in self.status["hosts"] if h["name"] == host)

    def exec(self, host, argv, check=True, **kw):
        """Run argv as the testbed user on host; returns CompletedProcess (text mode unless told)."""
        kw.setdefault("capture_output", True)
        if "input" not in kw or isinstance(kw.get("input"), str):
            kw.setdefault("text", True)
        return subprocess.run(MTCBED + ["exec", host, "--", *argv], check=check, **kw)

    def where(self, gfarm_path):
        """Replica hosts of a Gfarm path, per `gfwhere`."""
        out = self.exec(self.hosts[0], ["gfwhere", gfarm_path]).stdout
        return sorted(out.split())


def mtcbed(*args, check=True, **kw):
    return subprocess.run(MTCBED + list(args), check=check, capture_output=True, text=True, **kw)


class BedManager:
    """Brings the shared testbed up on first use and reuses it; tests that need the machine bare
    (their own `mtcbed up` with other options) take it down, and the next user brings it back."""

    def ensure(self, nodes=TESTBED_NODES):
        import json
        r = mtcbed("up", "--nodes", str(nodes), "--reuse", check=False)
        if r.returncode == 3:  # a different or broken testbed: replace it
            mtcbed("down")
            r = mtcbed("up", "--nodes", str(nodes), check=False)
        assert r.returncode == 0, r.stderr
        return Testbed(json.loads(mtcbed("status", "--json").stdout))

    def release(self):
        mtcbed("down")


@pytest.fixture(scope="session")
def bed_manager():
    if os.geteuid() != 0:
        pytest.skip("the testbed needs root")
    with open("/run/mtcbed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one testbed per machine: concurrent sessions wait their turn
        mtcbed("down", check=False)      # a crashed earlier run may have left state behind
        try:
            yield BedManager()
        finally:
            mtcbed("down", check=False)


@pytest.fixture
def testbed(bed_manager):
    """A running 4-host testbed (shared across tests that do not change it)."""
    return bed_manager.ensure()


@pytest.fixture(scope="module")
def sshd_bed(bed_manager):
    """`mtcbed up --nodes 4 --sshd` (an sshd per host, for Pwrake) for one module; the shared testbed comes back for
    the next user."""
    from montage_example import run as mrun
    from mtcio.preload.testing import LIB, ensure_built
    if not os.path.exists(LIB):
        ensure_built()
    bed_manager.release()
    r = subprocess.run(MTCBED + ["up", "--nodes", "4", "--sshd"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    yield mrun.Bed.current()
    bed_manager.release()


@pytest.fixture
def bare_machine(bed_manager):
    """No testbed up, before and after the test."""
    bed_manager.release()
    yield
    bed_manager.release()


@pytest.fixture
def tmpfs(tmp_path):
    """mount(opts) -> a tmpfs mounted with those options under tmp_path (root only), unmounted after the test."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = []

    def mount(opts):
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], check=True)
        mounted.append(mnt)
        return mnt
    yield mount
    for m in mounted:
        subprocess.run(["umount", str(m)], check=False)
