"""mtcbed runs as root next to an unprivileged testbed user whose processes (Gfarm daemons, `mtcbed exec`
commands, Pwrake workers) may plant links in the folders it owns: root must not follow them, must not
trust pid files found there, and the testbed's mounts and logs must not open the user's data to others."""
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import Testbed as Bed, mtcbed
from helpers.testbed import nothing_left as _nothing_left

pytestmark = pytest.mark.testbed

STATE = "/var/lib/mtcbed"
HOME = f"{STATE}/home"
USER = "mtcbed"


def as_user(script, check=True):
    """A shell script run as the testbed user in its home, outside any host."""
    return subprocess.run(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "--",
                           "sh", "-c", script], cwd="/", env={"HOME": HOME, "PATH": os.environ["PATH"]},
                          capture_output=True, text=True, check=check)


def nobody(script):
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",
                           "sh", "-c", script], cwd="/", capture_output=True, text=True)


def ensure_user():
    """The testbed user and its home exist once any testbed has been up."""
    if subprocess.run(["id", USER], capture_output=True).returncode != 0 or not os.path.isdir(HOME):
        mtcbed("up", "--nodes", "1")
        mtcbed("down")


def snapshot(path):
    """Everything root could have changed: each entry's name, owner, group, mode and bytes."""
    def one(p):
        st = os.lstat(p)
        data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else None
        return (st.st_uid, st.st_gid, oct(st.st_mode), data)
    out = {".": one(path)}
    if os.path.isdir(path):
        for n in sorted(os.listdir(path)):
            out[n] = one(os.path.join(path, n))
    return out


def status():
    return Bed(json.loads(mtcbed("status", "--json").stdout))


@pytest.fixture
def scratch():
    """Root-owned stand-ins for /etc: a folder (0755) holding a file (0644)."""
    d = tempfile.mkdtemp(prefix="mtcbed-scratch-", dir="/var/tmp")
    os.chmod(d, 0o755)
    with open(os.path.join(d, "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/bash\n")
    yield d
    shutil.rmtree(d)


@pytest.mark.parametrize("planted", ["ssh_dir", "authorized_keys"])
def test_sshd_never_writes_through_links_the_user_planted(bare_machine, scratch, planted):
    ensure_user()
    target = scratch if planted == "ssh_dir" else os.path.join(scratch, "passwd")
    plant = ('rm -rf ~/.ssh && ln -s "$1" ~/.ssh' if planted == "ssh_dir" else
             'rm -rf ~/.ssh && mkdir -m 700 ~/.ssh && ln -s "$1" ~/.ssh/authorized_keys')
    as_user(plant.replace('"$1"', target))
    before = snapshot(scratch)
    try:
        r = mtcbed("up", "--nodes", "2", "--sshd", check=False)
        assert r.returncode == 0, r.stderr
        assert snapshot(scratch) == before
        assert os.readlink(f"{HOME}/.ssh" if planted == "ssh_dir" else f"{HOME}/.ssh/authorized_keys") == target
        # Pwrake reaches the hosts as the testbed user by plain `ssh mtc-nodeK`: still works
        tb = status()
        r = tb.exec("mtc-node1", ["ssh", "mtc-node2", "hostname; id -un"])
        assert r.stdout.split() == ["mtc-node2", USER]
        assert mtcbed("down").returncode == 0
        assert snapshot(scratch) == before
    finally:
        as_user("rm -rf ~/.ssh")


def test_ssh_files_are_roots_and_readable_not_replaceable_by_the_user(bare_machine):
    ensure_user()
    assert mtcbed("up", "--nodes", "2", "--sshd").returncode == 0
    gid = int(subprocess.run(["id", "-g", USER], capture_output=True, text=True).stdout)
    ssh = f"{STATE}/ssh"
    modes = {n: (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777))
             for n in os.listdir(ssh) for st in [os.lstat(f"{ssh}/{n}")]}
    assert oct(os.stat(ssh).st_mode & 0o7777) == "0o755" and os.stat(ssh).st_uid == 0
    assert modes["id_ed25519"] == (0, gid, "0o640")
    assert modes["authorized_keys"] == (0, 0, "0o644") and modes["known_hosts"] == (0, 0, "0o644")
    assert all(uid == 0 for uid, _, _ in modes.values()), modes
    assert sorted(n for n in modes if n.startswith("sshd-")) == [
        f"sshd-mtc-node{k}.{ext}" for k in (1, 2) for ext in ("conf", "log", "pid")]
    assert all(m == "0o600" for n, (_, _, m) in modes.items() if n.endswith((".log", ".pid"))), modes
    r = as_user(f"cat {ssh}/id_ed25519 >/dev/null && echo key >> {ssh}/authorized_keys", check=False)
    assert r.returncode != 0 and "Permission denied" in r.stderr
    assert as_user(f"mv {ssh}/known_hosts {ssh}/kh", check=False).returncode != 0
    # root wrote nothing into a folder the testbed user owns: no root-owned entry in any of them
    for top, dirs, files in os.walk(STATE):
        if os.lstat(top).st_uid != 0:
            rooted = [n for n in dirs + files if os.lstat(os.path.join(top, n)).st_uid == 0]
            assert rooted == [], top
    assert mtcbed("down").returncode == 0
    assert not os.path.exists("/etc/ssh/ssh_config.d/mtcbed.conf")
    assert _nothing_left() == []


def test_status_names_every_sshd(bare_machine):
    """The pid file appears after sshd forks into the background (bug: status showed no pid, 15 of 20
    times for a single sshd started and read at once)."""
    assert mtcbed("up", "--nodes", "4", "--sshd").returncode == 0
    st = status().status
    assert st["problems"] == []
    for h in st["hosts"]:
        pid = h.get("sshd_pid")
        assert isinstance(pid, int), h
        assert b"sshd" in open(f"/proc/{pid}/cmdline", "rb").read()
        assert subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True,
                              text=True).stdout.strip() == h["name"]
    assert mtcbed("status").stdout.count(" sshd pid ") == 4


def test_mounts_check_permissions_for_other_users(testbed):
    host = testbed.hosts[0]
    mnt = testbed.mount(host)
    opts = next(ln.split()[3] for ln in open("/proc/self/mounts") if ln.split()[1] == mnt).split(",")
    assert "allow_other" in opts and "default_permissions" in opts
    d = f"{mnt}/perm-{os.getpid()}"
    testbed.exec(host, ["sh", "-c", f"mkdir {d} && echo secret > {d}/private && chmod 600 {d}/private && "
                                    f"echo open > {d}/public"])
    # root reads everything (the tests and the envelope do) ...
    assert open(f"{d}/private").read() == "secret\n"
    # ... another local user only what the modes allow, and may not write into the user's folders
    r = nobody(f"cat {d}/private")
    assert r.returncode == 1 and "Permission denied" in r.stderr
    assert nobody(f"cat {d}/public").stdout == "open\n"
    r = nobody(f"test -w {d} && echo writable; touch {d}/x")
    assert r.stdout == "" and "Permission denied" in r.stderr
    # the testbed user still writes at the root of the file system (Gfarm's / is gfarmadm's, mode 0775)
    assert testbed.exec(host, ["sh", "-c", f"test -w {mnt} && rm -r {d} && echo ok"]).stdout == "ok\n"


def test_daemon_logs_are_not_readable_by_others(testbed):
    logs = f"{STATE}/log"
    names = sorted(os.listdir(logs))
    assert names == ["gfmd.log"] + [f"gfsd-{h}.log" for h in testbed.hosts]
    for p in [logs] + [os.path.join(logs, n) for n in names]:
        assert os.stat(p).st_mode & 0o007 == 0, (p, oct(os.stat(p).st_mode))
    assert nobody(f"cat {logs}/gfmd.log").returncode == 1


def _fuse_conf():
    return open("/etc/fuse.conf").read() if os.path.exists("/etc/fuse.conf") else None


def test_down_gives_fuse_conf_back_as_it_was(bare_machine):
    before = _fuse_conf()
    had_line = before is not None and "user_allow_other" in before.splitlines()
    assert mtcbed("up", "--nodes", "1").returncode == 0
    assert "user_allow_other" in _fuse_conf().splitlines()
    assert status().status["fuse_conf_changed"] is (not had_line)
    assert mtcbed("down").returncode == 0
    assert _fuse_conf() == before
    # also when a crash lost the state file
    assert mtcbed("up", "--nodes", "1").returncode == 0
    os.unlink(f"{STATE}/state.json")
    assert mtcbed("down").returncode == 0
    assert _fuse_conf() == before
    assert _nothing_left() == []


def test_down_removes_mounts_a_crashed_pwrake_left(bare_machine, scratch):
    assert mtcbed("up", "--nodes", "2").returncode == 0
    tb = status()
    # what a Pwrake worker does on its host, as the testbed user; then the master crashes
    left = [f"/tmp/pwrake_{USER}_4242_{k:03d}" for k in range(3)]
    for mnt, host in zip(left, ("mtc-node1", "mtc-node2")):
        tb.exec(host, ["sh", "-c", f"mkdir {mnt} && gfarm2fs {mnt} && echo x > {mnt}/out-{host}"])
    as_user(f"mkdir {left[2]}")  # a mount point already unmounted
    mounted = [ln.split()[1] for ln in open("/proc/self/mounts") if f"/tmp/pwrake_{USER}_" in ln]
    assert sorted(mounted) == left[:2]
    # not the user's, or not a folder: stay
    decoys = [f"/tmp/pwrake_{USER}_root", f"/tmp/pwrake_{USER}_link"]
    os.mkdir(decoys[0])
    as_user(f"ln -s {scratch} {decoys[1]}")
    before = snapshot(scratch)
    try:
        r = mtcbed("down")
        assert r.returncode == 0, r.stderr
        assert [ln for ln in open("/proc/self/mounts") if f"/tmp/pwrake_{USER}_" in ln] == []
        assert [p for p in left if os.path.lexists(p)] == []
        assert os.path.isdir(decoys[0]) and os.readlink(decoys[1]) == scratch
        assert snapshot(scratch) == before
        assert _nothing_left() == []
    finally:
        os.rmdir(decoys[0])
        os.unlink(decoys[1])


def test_down_trusts_no_pid_file_of_the_user(bare_machine, tmp_path):
    """Pid files in the user's folders are the user's to write: one naming a root process (here a
    root-owned program called gfsd) must not make `down` kill it, and a FIFO must not block it."""
    assert mtcbed("up", "--nodes", "2").returncode == 0
    fake = tmp_path / "gfsd"
    shutil.copy("/bin/sleep", fake)
    victim = subprocess.Popen([str(fake), "60"])
    try:
        as_user(f"echo {victim.pid} > {STATE}/hosts/mtc-node1/gfsd.pid && "
                f"rm {STATE}/hosts/mtc-node2/gfsd.pid && mkfifo {STATE}/hosts/mtc-node2/gfsd.pid")
        assert mtcbed("down", timeout=30).returncode == 0
        time.sleep(0.1)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
