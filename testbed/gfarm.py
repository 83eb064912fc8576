"""Gfarm daemons of the testbed: gfmd (root namespace), one gfsd and one gfarm2fs mount per host.

Everything runs as the testbed user in private mode; facts found by trying it by hand (DESIGN.md §7)
are applied here and each is checked by a test."""
import glob
import os
import re
import shutil
import stat
import socket
import subprocess
import time

from . import layout
from .sh import BedError, as_user, gist, in_host, run, user_env, user_ids, user_sh, wait_pid_file

# All namespaces share one kernel load average: without these, gfmd sees every host as busy and
# write-local placement looks random.
SCHEDULE_LINES = "schedule_idle_load_thresh 100\nschedule_busy_load_thresh 100\n"
# 2.7.20 truncates a local read copied into a pipe at 65536 bytes when direct local access is on.
CLIENT_LINES = "direct_local_access disable\n"
# Gfarm's default (config-gfarm) leaves Nagle on: a request whose tail waits for an ACK the peer delays stalls
# ~44 ms (reads of 16-64 KiB files, 2,880-byte-call writes); `--tcp-nodelay` turns it off for every socket.
NODELAY_LINE = "sockopt tcp_nodelay\n"
# gfarm2fs alone gets libgfarm's profile counters (local/remote read sizes, as gfarm2fs.profile.* xattrs
# on the mount root): an independent check of locality. Every gf* command would print them at exit.
MOUNT_CONFIG = layout.GFARM_PREFIX / "etc" / "gfarm2fs.conf"
# gfarm2fs shows the Gfarm group gfarmadm (the root directory's, mode 0775) as the testbed user's group,
# so the kernel's permission checks (default_permissions) let that user write where Gfarm lets it
GROUP_MAP = layout.GFARM_PREFIX / "etc" / "gfarm2fs.groupmap"
# mounts readable by root (allow_other), with the kernel checking every other user against the modes
# gfarm2fs reports (default_permissions) instead of letting everyone act as the testbed user
MOUNT_OPTIONS = "allow_other,default_permissions"
# daemon logs, pid files and spools: not readable by other local users
DAEMON_UMASK = 0o027


def fresh_user_dir(path, mode=0o755):
    """A new, empty folder owned by the testbed user. Root fills a folder only while it still owns it;
    whatever was there (a crashed earlier testbed's, or links the user planted) goes first."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=mode, parents=True)
    os.chmod(path, mode)
    give(path)


def give(path):
    """chown to the testbed user, never through a symlink."""
    uid, gid = user_ids()
    os.chown(path, uid, gid, follow_symlinks=False)


def configure(config_gfarm, backend_args, tcp_nodelay=False):
    """config-gfarm -N writes gfmd.conf, gfarm2.conf and the usermap (and initialises a database
    backend) without starting anything."""
    fresh_user_dir(layout.GFARM_PREFIX)
    run(as_user([config_gfarm, "--prefix", str(layout.GFARM_PREFIX), "-S", "-A", layout.USER,
                 "-m", str(layout.GFMD_PORT), "-h", layout.META_HOST, *backend_args]),
        env=user_env(), timeout=120)
    # the prefix is the user's now: these writes are the user's too
    user_sh('cat >> "$1"', layout.GFMD_CONFIG, input=SCHEDULE_LINES)
    user_sh('cat >> "$1"', layout.GFARM_CONFIG,
            input=SCHEDULE_LINES + CLIENT_LINES + (NODELAY_LINE if tcp_nodelay else ""))
    user_sh('echo "gfarmadm $2" > "$3" && cat "$1" - > "$4"', layout.GFARM_CONFIG, layout.USER, GROUP_MAP,
            MOUNT_CONFIG, input=f"profile enable\nlocal_group_map {GROUP_MAP}\n")
    run(as_user(["gfkey", "-f", "-p", "31536000"]), env=user_env())


def start_gfmd():
    fresh_user_dir(layout.LOG_DIR, 0o750)
    run(as_user(["/usr/sbin/gfmd", "-P", str(layout.GFMD_PID), "-f", str(layout.GFMD_CONFIG),
                 "-F", str(layout.GFMD_LOG)]), env=user_env(), umask=DAEMON_UMASK)
    wait_port(layout.META_ADDR, layout.GFMD_PORT, "gfmd", layout.GFMD_LOG)
    return wait_pid_file(layout.GFMD_PID, "gfmd", layout.GFMD_LOG)


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
    d.parent.mkdir(parents=True, exist_ok=True)
    fresh_user_dir(d)
    # the spool and the config are made by the user in its own folder (the config from the user's file)
    user_sh('mkdir -m 700 "$1/spool" && { cat "$2"; echo "local_user_map $3"; } > "$1/gfsd.conf"',
            d, layout.GFARM_CONFIG, layout.GFARM_PREFIX / "etc" / "usermap")
    run(in_host(name, as_user(["/usr/sbin/gfsd", "-P", str(d / "gfsd.pid"), "-f", str(d / "gfsd.conf"),
                               "-h", name, "-r", str(d / "spool"), "-l", addr,
                               "-F", str(layout.LOG_DIR / f"gfsd-{name}.log")])),
        env=user_env(), umask=DAEMON_UMASK)


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
        give(mnt)
    env = user_env({"GFARM_CONFIG_FILE": str(MOUNT_CONFIG)})
    procs = [(name, subprocess.Popen(in_host(name, as_user(["gfarm2fs", "-o", MOUNT_OPTIONS,
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


def _mount_table():
    with open("/proc/self/mounts") as f:
        return [line.split()[:4] for line in f]


def mounts():
    """Our gfarm2fs mounts as listed by the kernel: the folders right under MOUNT_ROOT (a mount the
    user makes deeper inside goes with its parent's lazy unmount)."""
    return [(mnt, fstype) for _, mnt, fstype, _ in _mount_table()
            if os.path.dirname(mnt) == str(layout.MOUNT_ROOT)]


def pwrake_mounts():
    """gfarm2fs mounts Pwrake's workers make as the testbed user, /tmp/pwrake_<user>_<pid>_<n>, which a
    crashed Pwrake leaves behind: only those right in /tmp (whose entries others cannot replace) and
    mounted by that user."""
    ids = user_ids()
    if ids is None:
        return []
    name = re.compile(rf"/tmp/pwrake_{re.escape(layout.USER)}_[\w.-]+")
    return [mnt for _, mnt, fstype, opts in _mount_table()
            if name.fullmatch(mnt) and fstype == "fuse.gfarm2fs" and f"user_id={ids[0]}" in opts.split(",")]


def remove_pwrake_dirs():
    """The testbed user's empty /tmp/pwrake_<user>_* folders (never through a symlink: rmdir has none)."""
    ids = user_ids()
    if ids is None:
        return
    for d in glob.glob(f"/tmp/pwrake_{layout.USER}_*"):
        try:
            st = os.lstat(d)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == ids[0]:
                os.rmdir(d)
        except OSError:
            pass


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
    """Unmount every gfarm2fs of ours and those a crashed Pwrake left. A gfarm2fs whose gfmd is gone
    blocks umount: after `timeout`, kill it (which aborts the FUSE connection and releases the blocked
    umount) and detach lazily."""
    def targets():
        return [mnt for mnt, _ in mounts()] + pwrake_mounts()
    procs = [subprocess.Popen(["umount", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for mnt in targets()]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    for mnt in targets():
        pid = gfarm2fs_pid(mnt)
        if pid and is_ours(pid):
            os.kill(pid, 9)
        run(["umount", "-l", mnt], check=False)
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def is_ours(pid, names=("gfmd", "gfsd", "gfarm2fs", "sshd", "postgres")):
    """A daemon of ours. Pids come from the state and from pid files the testbed user can write, so a
    name is not enough: ours run as the testbed user, except sshd, which runs as root with our config."""
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return False
    # "/usr/sbin/gfsd", "gfsd: back_channel ...", "sshd: /usr/sbin/sshd -f ... [listener] ..."
    name = os.path.basename(argv[0].split(b" ")[0].rstrip(b":")).decode(errors="replace")
    if name not in names:
        return False
    ids = user_ids()
    if ids and uid == ids[0]:
        return True
    return uid == 0 and name == "sshd" and (str(layout.STATE_DIR) + "/").encode() in b" ".join(argv)
