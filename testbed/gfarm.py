"""Gfarm daemons of the testbed: gfmd (root namespace), one gfsd and one gfarm2fs mount per host.

Everything runs as the testbed user in private mode; facts found by trying it by hand (DESIGN.md §7)
are applied here and each is checked by a test."""
import os
import shutil
import socket
import subprocess
import time

from . import layout
from .sh import BedError, as_user, gist, in_host, read_pid, run, user_env

# All namespaces share one kernel load average: without these, gfmd sees every host as busy and
# write-local placement looks random.
SCHEDULE_LINES = "schedule_idle_load_thresh 100\nschedule_busy_load_thresh 100\n"
# 2.7.20 truncates a local read copied into a pipe at 65536 bytes when direct local access is on.
CLIENT_LINES = "direct_local_access disable\n"
# gfarm2fs alone gets libgfarm's profile counters (local/remote read sizes, as gfarm2fs.profile.* xattrs
# on the mount root): an independent check of locality. Every gf* command would print them at exit.
MOUNT_CONFIG = layout.GFARM_PREFIX / "etc" / "gfarm2fs.conf"


def configure(config_gfarm, backend_args):
    """config-gfarm -N writes gfmd.conf, gfarm2.conf and the usermap (and initialises a database
    backend) without starting anything."""
    layout.GFARM_PREFIX.mkdir(parents=True, exist_ok=True)
    shutil.chown(layout.GFARM_PREFIX, layout.USER, layout.USER)
    run(as_user([config_gfarm, "--prefix", str(layout.GFARM_PREFIX), "-S", "-A", layout.USER,
                 "-m", str(layout.GFMD_PORT), "-h", layout.META_HOST, *backend_args]),
        env=user_env(), timeout=120)
    with open(layout.GFMD_CONFIG, "a") as f:
        f.write(SCHEDULE_LINES)
    with open(layout.GFARM_CONFIG, "a") as f:
        f.write(SCHEDULE_LINES + CLIENT_LINES)
    MOUNT_CONFIG.write_text(layout.GFARM_CONFIG.read_text() + "profile enable\n")
    shutil.chown(MOUNT_CONFIG, layout.USER, layout.USER)
    run(as_user(["gfkey", "-f", "-p", "31536000"]), env=user_env())


def start_gfmd():
    layout.LOG_DIR.mkdir(parents=True, exist_ok=True)
    shutil.chown(layout.LOG_DIR, layout.USER, layout.USER)
    run(as_user(["/usr/sbin/gfmd", "-P", str(layout.GFMD_PID), "-f", str(layout.GFMD_CONFIG),
                 "-F", str(layout.GFMD_LOG)]), env=user_env())
    wait_port(layout.META_ADDR, layout.GFMD_PORT, "gfmd", layout.GFMD_LOG)
    return read_pid(layout.GFMD_PID)


def wait_port(addr, port, what, log=None, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((addr, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.01)
    hint = f" (see {log})" if log else ""
    raise BedError(f"{what} did not accept connections on {addr}:{port} within {timeout:.0f}s{hint}")


def register_hosts(names, ncpu):
    procs = [subprocess.Popen(as_user(["gfhost", "-c", "-a", "x86_64", "-p", str(layout.GFSD_PORT),
                                       "-n", str(ncpu), name]), env=user_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for name in names]
    for name, p in zip(names, procs):
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            raise BedError(f"gfhost -c {name}: no answer from gfmd within 10s (see {layout.GFMD_LOG})")
        if p.returncode != 0:
            raise BedError(f"gfhost -c {name}: {gist(out) or p.returncode}")


def start_gfsd(name, addr):
    d = layout.host_dir(name)
    spool = d / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    shutil.copy(layout.GFARM_CONFIG, d / "gfsd.conf")
    with open(d / "gfsd.conf", "a") as f:
        f.write(f"local_user_map {layout.GFARM_PREFIX / 'etc' / 'usermap'}\n")
    for p in (d, spool, d / "gfsd.conf"):
        shutil.chown(p, layout.USER, layout.USER)
    os.chmod(spool, 0o700)
    run(in_host(name, as_user(["/usr/sbin/gfsd", "-P", str(d / "gfsd.pid"), "-f", str(d / "gfsd.conf"),
                               "-h", name, "-r", str(spool), "-l", addr, "-F", str(layout.LOG_DIR / f"gfsd-{name}.log")])),
        env=user_env())


def hosts_up(names):
    """Hosts whose gfsd gfmd currently sees as up (gfhost -l prints a load average, '-.--' when down)."""
    out = run(as_user(["gfhost", "-l"]), env=user_env(), check=False).stdout
    up = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit():
            up.add(parts[4])
    return [n for n in names if n in up]


def wait_gfsd(names, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(hosts_up(names)) == len(names):
            return
        time.sleep(0.05)
    down = sorted(set(names) - set(hosts_up(names)))
    raise BedError(f"gfsd not up within {timeout:.0f}s on {', '.join(down)} "
                   f"(see {layout.LOG_DIR / f'gfsd-{down[0]}.log'})")


def mount_all(names):
    """One gfarm2fs per host, started in the host's network namespace but the root mount namespace."""
    for name in names:  # every mount point first, so a failure here leaves no gfarm2fs starting
        mnt = layout.mount_path(name)
        mnt.mkdir(parents=True, exist_ok=True)
        shutil.chown(mnt, layout.USER, layout.USER)
    env = user_env({"GFARM_CONFIG_FILE": str(MOUNT_CONFIG)})
    procs = [(name, subprocess.Popen(in_host(name, as_user(["gfarm2fs", "-o", "allow_other",
                                                             str(layout.mount_path(name))])),
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
             for name in names]
    errors = []
    for name, p in procs:
        try:
            out, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            out = "did not mount within 15s"
        if p.returncode != 0 or not is_mounted(layout.mount_path(name)):
            errors.append(f"gfarm2fs on {name} failed: {gist(out) or p.returncode}")
    if errors:
        raise BedError(errors[0])


def mounts():
    """Our gfarm2fs mounts as listed by the kernel."""
    found = []
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if mnt.startswith(str(layout.MOUNT_ROOT) + "/"):
                found.append((mnt, fstype))
    return found


def is_mounted(path):
    return any(m == str(path) for m, _ in mounts())


def _cmdlines():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield int(pid), open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue


def gfarm2fs_pid(mnt):
    """The gfarm2fs daemon serving mount point mnt (found by its command line)."""
    for pid, argv in _cmdlines():
        if argv[0].endswith(b"gfarm2fs") and str(mnt).encode() in argv:
            return pid
    return None


def daemons_using(*prefixes):
    """Pids whose command line names a path under one of prefixes: our daemons even when their
    pid files or our state are gone (a crash, or a daemon that started after a failed bring-up)."""
    pre = [p.encode() for p in prefixes]
    return [pid for pid, argv in _cmdlines() if any(a.startswith(p) for a in argv[1:] for p in pre)]


def unmount_all(timeout=2.0):
    """Unmount every gfarm2fs of ours. A gfarm2fs whose gfmd is gone blocks umount: after `timeout`,
    kill it (which aborts the FUSE connection and releases the blocked umount) and detach lazily."""
    procs = [subprocess.Popen(["umount", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for mnt, _ in mounts()]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    for mnt, _ in mounts():
        pid = gfarm2fs_pid(mnt)
        if pid:
            os.kill(pid, 9)
        run(["umount", "-l", mnt], check=False)
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def is_ours(pid, names=(b"gfmd", b"gfsd", b"gfarm2fs", b"sshd", b"postgres")):
    try:
        exe = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0]
    except OSError:
        return False
    return any(exe.endswith(n) or os.path.basename(exe).startswith(n) for n in names)
