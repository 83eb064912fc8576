"""Bring the testbed up, describe it, tear it down."""
import glob
import os
import pwd
import shutil
import signal
import time

from . import fuse, gfarm, layout, network, spool, state
from .sh import BedError, pid_alive, read_pid, run, wait_pid_file


class UsageError(BedError):
    pass


class AlreadyUp(BedError):
    pass


class NotUp(BedError):
    pass


REQUIRED = {"gfmd": "gfmd", "gfsd": "gfsd", "gfhost": "gfarm-client", "gfarm2fs": "gfarm2fs",
            "config-gfarm": "gfmd", "ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux",
            "setpriv": "util-linux", "unshare": "util-linux", "umount": "mount"}


def _check_tools(sshd, backend):
    need = dict(REQUIRED)
    if sshd:
        need.update({"sshd": "openssh-server", "ssh-keygen": "openssh-client"})
    missing = sorted({pkg for cmd, pkg in need.items()
                      if not shutil.which(cmd, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")})
    if backend == "postgresql" and not os.path.isdir("/usr/lib/postgresql"):
        missing.append("postgresql")
    if missing:
        raise BedError(f"missing Debian packages: {' '.join(missing)} (run `make setup` as root)")


def _ensure_user():
    try:
        pwd.getpwnam(layout.USER)
    except KeyError:
        run(["useradd", "--system", "--home-dir", str(layout.HOME), "--shell", "/bin/bash",
             "--user-group", layout.USER])
    # '*' (no password), not useradd's '!' (locked): sshd refuses public-key logins to locked accounts
    shadow = [ln.split(":") for ln in open("/etc/shadow") if ln.startswith(layout.USER + ":")]
    if shadow and shadow[0][1].startswith("!"):
        run(["usermod", "-p", "*", layout.USER])
    # the home stays between testbeds and is the user's: root only makes it, never writes in it
    layout.HOME.mkdir(parents=True, exist_ok=True)
    gfarm.give(layout.HOME)


def up(nodes, link_rate=None, link_delay=None, backend="none", sshd=False, reuse=False, log=print,
       tcp_nodelay=False):
    if os.geteuid() != 0:
        raise BedError("mtcbed must run as root (it creates network namespaces and starts daemons)")
    if not 1 <= nodes <= layout.MAX_NODES:
        raise UsageError(f"--nodes must be between 1 and {layout.MAX_NODES}, not {nodes}")
    try:
        if link_rate:
            network.parse_rate(link_rate)
        if link_delay:
            network.check_delay(link_delay)
    except BedError as e:
        raise UsageError(str(e))
    current = state.load()
    if current is not None or network.our_namespaces() or network.our_links():
        wanted = {"nodes": nodes, "link_rate": link_rate, "link_delay": link_delay, "backend": backend, "sshd": sshd,
                  "tcp_nodelay": tcp_nodelay}
        if reuse and current and current.get("phase") == "up" and not problems(current) \
                and all(current.get(k) == v for k, v in wanted.items()):
            log(f"reusing the running testbed ({nodes} hosts)")
            return current
        if state.is_corrupt(current):
            raise AlreadyUp(state.corrupt_message())
        running = bool(current) and current.get("phase") == "up"
        what = "a testbed is already up" if running else "stale testbed state found"
        # --reuse can only take a testbed that is up, so it is offered only then
        raise AlreadyUp(f"{what}: run `mtcbed down` first" + (" (or `mtcbed up --reuse`)" if running else ""))
    _check_tools(sshd, backend)
    if link_delay and not network.netem_available():
        raise BedError("--link-delay needs the kernel's netem qdisc (sch_netem), which this kernel lacks; "
                       "use --link-rate alone")

    t0 = time.monotonic()
    names = [layout.node_name(k) for k in range(1, nodes + 1)]
    st = {"version": 1, "phase": "starting", "nodes": nodes, "backend": backend, "link_rate": link_rate,
          "link_delay": link_delay, "sshd": sshd, "tcp_nodelay": tcp_nodelay, "user": layout.USER,
          "gfarm_config": str(layout.GFARM_CONFIG), "state_dir": str(layout.STATE_DIR),
          "meta": {"host": layout.META_HOST, "addr": layout.META_ADDR, "port": layout.GFMD_PORT},
          "hosts": [{"name": layout.node_name(k), "addr": layout.node_addr(k), "veth": layout.veth_name(k),
                     "gfsd_port": layout.GFSD_PORT, "mount": str(layout.mount_path(layout.node_name(k))),
                     "uts": str(layout.uts_path(layout.node_name(k)))} for k in range(1, nodes + 1)]}
    state.save(st)
    try:
        _ensure_user()
        st["fuse_conf_changed"] = fuse.ensure()  # so `down` gives /etc/fuse.conf back as it was
        state.save(st)
        network.create(nodes)
        network.add_hosts_lines([(layout.META_ADDR, layout.META_HOST)] +
                                [(h["addr"], h["name"]) for h in st["hosts"]])
        for name in names:
            network.create_uts(name)
        if backend == "postgresql":
            from . import postgres
            gfarm.configure(*postgres.config_args(), tcp_nodelay=tcp_nodelay)
            st["postgres"] = postgres.describe()
            postgres.start()
        else:
            gfarm.configure("config-gfarm", ["-b", "none", "-N"], tcp_nodelay=tcp_nodelay)
        st["meta"]["pid"] = gfarm.start_gfmd()
        state.save(st)
        gfarm.register_hosts(names, ncpu=os.cpu_count() or 1)
        try:
            st["spool"] = spool.create()
        except BedError as e:
            spool.remove()
            st["spool"] = {"fs": "the host's disk", "why": str(e)}
            log(f"mtcbed: warning: the spools stay on the host's disk (no image of their own: {e})")
        state.save(st)
        for h in st["hosts"]:
            gfarm.start_gfsd(h["name"], h["addr"])
        gfarm.wait_gfsd(names)
        for h in st["hosts"]:  # a gfsd writes its pid file after it daemonises
            h["gfsd_pid"] = wait_pid_file(layout.host_dir(h["name"]) / "gfsd.pid", f"gfsd on {h['name']}")
        state.save(st)
        gfarm.mount_all(names)
        for h in st["hosts"]:
            h["gfarm2fs_pid"] = gfarm.gfarm2fs_pid(h["mount"])
        network.shape(nodes, link_rate, link_delay)
        if sshd:
            from . import sshd as sshd_mod
            sshd_mod.start_all(st["hosts"])
            state.save(st)
        st["phase"] = "up"
        st["up_seconds"] = round(time.monotonic() - t0, 3)
        state.save(st)
    except BaseException:
        log("mtcbed: bring-up failed, tearing down what was built")
        down(log=lambda *a: None)
        raise
    return st


def problems(st):
    """What is wrong with a testbed that claims to be up (empty list when healthy)."""
    out = []
    if not pid_alive(st.get("meta", {}).get("pid")):
        out.append("gfmd is not running")
    for h in st.get("hosts", []):
        if not pid_alive(h.get("gfsd_pid")):
            out.append(f"gfsd on {h['name']} is not running")
        if not gfarm.is_mounted(h["mount"]):
            out.append(f"{h['mount']} is not mounted")
        if st.get("sshd") and not pid_alive(h.get("sshd_pid")):
            out.append(f"sshd on {h['name']} is not running")
    return out


def status():
    st = state.load()
    if st is None:
        raise NotUp("no testbed is up")
    st["problems"] = problems(st) if st.get("phase") == "up" else [f"phase is {st.get('phase')}"]
    return st


def _our_pids(st):
    """Pids we started: recorded ones, pid files under our state dir, and anything inside our namespaces."""
    pids = set()
    if st:
        pids.add(st.get("meta", {}).get("pid"))
        for h in st.get("hosts", []):
            pids.update(h.get(k) for k in ("gfsd_pid", "gfarm2fs_pid", "sshd_pid"))
    for root, _, files in os.walk(layout.STATE_DIR):
        if root.startswith(str(layout.HOME)):
            continue
        pids.update(read_pid(os.path.join(root, f)) for f in files if f.endswith(".pid"))
    for ns in network.our_namespaces():
        pids.update(network.namespace_pids(ns))
    pids.update(gfarm.daemons_using(str(layout.STATE_DIR), str(layout.MOUNT_ROOT)))
    return {p for p in pids if p and pid_alive(p) and gfarm.is_ours(p)}


def _stop(pids, timeout=3.0):
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.02)
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def down(log=print):
    """Undo everything an `up` may have made, in order: mounts, daemons, network, hosts lines, state.
    Works from partial or missing state; doing it twice is a no-op. Every step runs even if one fails."""
    st = state.load()
    from . import sshd
    found = st is not None or network.our_namespaces() or network.our_links() or gfarm.mounts() \
        or gfarm.pwrake_mounts() or sshd.CLIENT_CONFIG.exists() or fuse.added() \
        or spool.mounted() or spool.IMAGE.exists()
    if not found:
        log("no testbed is up: nothing to do")
        return False
    errors = []

    def step(fn, *args):
        try:
            fn(*args)
        except (BedError, OSError) as e:
            errors.append(str(e))

    step(gfarm.unmount_all)
    if st and st.get("backend") == "postgresql":
        from . import postgres
        step(postgres.stop)
    step(_stop, _our_pids(st))
    # gfsd children serving connections exit when their peers go; anything left in a namespace is ours
    step(_stop, [p for ns in network.our_namespaces() for p in network.namespace_pids(ns)])
    step(network.teardown)
    step(gfarm.remove_pwrake_dirs)
    step(sshd.remove_client_config)
    step(fuse.restore)
    # gfsd leaves /tmp/.gfarm-gfsd<addr>-<port>/ behind; those on our subnet are ours
    for d in glob.glob(f"/tmp/.gfarm-gfsd{layout.SUBNET}.*"):
        shutil.rmtree(d, ignore_errors=True)
    if layout.MOUNT_ROOT.exists():
        for d in layout.MOUNT_ROOT.iterdir():
            if not gfarm.is_mounted(d):
                step(d.rmdir)
    step(spool.remove)
    for sub in ("hosts", "gfarm", "ssh", "pgconfig", "log"):
        shutil.rmtree(layout.STATE_DIR / sub, ignore_errors=True)
    state.clear()
    left = network.our_namespaces() + network.our_links() + [m for m, _ in gfarm.mounts()] + gfarm.pwrake_mounts()
    if left:
        raise BedError(f"teardown left {', '.join(left)} behind ({'; '.join(errors) or 'still busy'})")
    log("testbed is down")
    return True
