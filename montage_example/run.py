"""Run the Montage workflow on the running testbed (`mtcbed up`), traced by the mtcio Rake plugin.

    bed = Bed.current()
    folder = stage_inputs(bed, "/montage1", local_folder, hosts)      # tile i stored on hosts[i % len(hosts)]
    result = run_workflow(bed, "/montage1", hosts, run="m1", db="mtc.db", logdir=..., placement="with")

placement:
  "with"     each task runs on the host holding most of its input bytes (the plugin's placement);
  "against"  the same choice, then the task is run on the next host of the list instead (a launcher and a
             host-to-mount map shifted by one): every placed task runs away from its data, for comparison;
  "none"     the plugin traces, every task runs on the first host.
Rake runs as root in the first host's view of the folder (the master), as in the plugin's own test; each
task runs as the testbed user on its host through a launcher doing what `mtcbed exec` does, in that host's
gfarm2fs mount, so its outputs are stored on the host that ran it.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]
MTCPROF = os.path.join(os.path.dirname(sys.executable), "mtcprof")


class RunError(Exception):
    """A step of the workflow failed; the message is one line for the user."""


@dataclass
class Bed:
    hosts: list
    mounts: dict
    user: str

    @classmethod
    def current(cls) -> "Bed":
        r = subprocess.run(MTCBED + ["status", "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RunError("no testbed is up (mtcbed up --nodes 4)")
        st = json.loads(r.stdout)
        return cls([h["name"] for h in st["hosts"]], {h["name"]: h["mount"] for h in st["hosts"]}, st["user"])

    def exec(self, host, argv, check=True, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        r = subprocess.run(MTCBED + ["exec", host, "--", *argv], **kw)
        if check and r.returncode != 0:
            raise RunError(f"on {host}: {' '.join(argv)[:120]}: {(r.stderr or '').strip()[:300]}")
        return r

    def where(self, gpath: str) -> list:
        return sorted(self.exec(self.hosts[0], ["gfwhere", gpath]).stdout.split())


def _readable_copy(local_folder: str) -> str:
    """A copy of the prepared folder the testbed user can read (the caller's folder may be private)."""
    tmp = tempfile.mkdtemp(prefix="mtcmontage.")
    os.chmod(tmp, 0o755)
    dst = os.path.join(tmp, "w")
    shutil.copytree(local_folder, dst)
    for d, ds, fs in os.walk(dst):
        os.chmod(d, 0o755)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o644)
    return dst


def stage_inputs(bed: Bed, top: str, local_folder: str, hosts: list) -> dict:
    """Copy a prepared folder (montage_example.prepare) into Gfarm at `top`: the workflow files through the
    first host, tile i written on hosts[i % len(hosts)] (so stored there).  Returns {tile file: host}."""
    src = _readable_copy(local_folder)
    try:
        m0 = bed.mounts[hosts[0]] + top
        bed.exec(hosts[0], ["mkdir", "-p", m0 + "/raw"])
        files = [os.path.join(src, f) for f in os.listdir(src) if f != "raw"]
        bed.exec(hosts[0], ["cp", *files, m0 + "/"])
        tiles = sorted(os.listdir(os.path.join(src, "raw")))
        home = {t: hosts[i % len(hosts)] for i, t in enumerate(tiles)}
        for h in hosts:
            mine = [os.path.join(src, "raw", t) for t in tiles if home[t] == h]
            if mine:
                bed.exec(h, ["cp", *mine, bed.mounts[h] + top + "/raw/"])
        return home
    finally:
        shutil.rmtree(os.path.dirname(src), ignore_errors=True)


def make_logdir(bed: Bed) -> str:
    """A log folder the shim accepts from the tasks: owned by the testbed user, writable by it only."""
    d = tempfile.mkdtemp(prefix="mtclogs.")
    os.chmod(os.path.dirname(d), os.stat(os.path.dirname(d)).st_mode | stat.S_IXOTH)
    shutil.chown(d, bed.user, bed.user)
    os.chmod(d, 0o700)
    return d


def host_launchers(bed: Bed, hosts: list, shift: int = 0) -> tuple[str, str, str]:
    """(folder, launcher template, mount template) running the task placed on hosts[i] on hosts[i + shift] (with
    a shift, each host's mount is a symlink to that host's): a shell script per host doing what `mtcbed exec` does
    (enter the host's namespaces as the testbed user, with its Gfarm config) in ~3 ms instead of a ~30 ms Python
    start per task (16 tiles on 2 hosts: 10.4 s instead of 13.6 s)."""
    from mtcio.testbed.sh import as_user, in_host, user_env
    d = tempfile.mkdtemp(prefix="mtclaunch.")
    os.chmod(d, 0o755)
    ident = {k: v for k, v in user_env().items() if k in ("HOME", "USER", "LOGNAME", "GFARM_CONFIG_FILE")}
    for i, h in enumerate(hosts):
        to = hosts[(i + shift) % len(hosts)]
        if shift:
            os.symlink(bed.mounts[to], os.path.join(d, f"mnt-{h}"))
        script = os.path.join(d, f"launch-{h}")
        with open(script, "w") as fh:
            fh.write("#!/bin/sh\nexport " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(ident.items()))
                     + "\nexec " + " ".join(map(shlex.quote, in_host(to, as_user([])))) + ' "$@"\n')
        os.chmod(script, 0o755)
    return d, os.path.join(d, "launch-{host}"), os.path.join(d, "mnt-{host}") if shift else "/mnt/mtcbed/{host}"


@dataclass
class Result:
    wall_s: float
    stdout: str
    stderr: str


def run_workflow(bed: Bed, top: str, hosts: list, *, run: str, db: str, logdir: str,
                 placement: str = "with", slots: int = 2, timeout: float = 900,
                 on_line=None, extra_env: dict | None = None) -> Result:
    """rake -m under the plugin in the first host's view of `top`; raises RunError when it fails.
    on_line(str) is called with each line rake prints on stderr (progress); extra_env (MTCPROF_INGEST=off,
    MTCPROF_LIB=...) is added last."""
    from mtcio import pwrake_plugin
    master = bed.mounts[hosts[0]] + top
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_")}
    env.update(MTCPROF_CMD=MTCPROF, MTCPROF_DIR=logdir, MTCPROF_RUN=run, MTCPROF_DB=os.path.abspath(db))
    from mtcio.preload.testing import LIB
    env["MTCPROF_LIB"] = LIB
    if placement not in ("with", "against", "none"):
        raise ValueError(placement)
    if placement == "none":
        hosts = hosts[:1]
        slots = slots * len(bed.hosts)
    shift_dir, launcher, mount = host_launchers(bed, hosts, 1 if placement == "against" else 0)
    # Gfarm's clients (placement's gfwhere+gfls, ingest's gfwhere) through a host's launcher script too
    env.update(MTCPROF_LAUNCHER=launcher, MTCPROF_MOUNT=mount, MTCPROF_GFARM_CMD=launcher.replace("{host}", hosts[0]))
    env["MTCPROF_HOSTS"] = " ".join(f"{h}:{slots}" for h in hosts)
    env.update(extra_env or {})
    jobs = slots * len(hosts)
    argv = ["rake", "-I", pwrake_plugin.path(), "-r", "mtcio/rake", "-m", "-j", str(jobs)]
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(argv, cwd=master, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        err_lines = []
        import threading
        out_buf = []
        th = threading.Thread(target=lambda: out_buf.append(p.stdout.read()), daemon=True)
        th.start()
        for line in p.stderr:
            err_lines.append(line)
            if on_line:
                on_line(line.rstrip("\n"))
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise RunError(f"the workflow did not finish in {timeout:.0f} s")
        th.join()
        wall = time.monotonic() - t0
        err = "".join(err_lines)
        if p.returncode != 0:
            raise RunError(f"rake failed (exit {p.returncode}): {_rake_error(err_lines)}")
        return Result(wall, "".join(out_buf), err)
    finally:
        if shift_dir:
            shutil.rmtree(shift_dir, ignore_errors=True)


def _rake_error(err_lines: list) -> str:
    """What rake said went wrong: its "rake aborted!" message (a failed command's line and the lines just
    before it), not the plugin's closing lines, which come after it."""
    lines = [l.rstrip("\n") for l in err_lines]
    if "rake aborted!" in lines:
        i = lines.index("rake aborted!")
        said = [l for l in lines[i + 1:i + 4] if l.strip() and not l.startswith(("/", "Tasks:", "(See"))]
        before = [l for l in lines[max(0, i - 6):i] if l.strip() and not l.startswith("mtcprof:")]
        return " | ".join(before[-3:] + said)[:600]
    last = [l for l in lines if l.strip() and not l.startswith(("/", "Tasks:", "(See"))]
    return (last[-1] if last else "").strip()[:300]


def run_untraced_local(folder: str, jobs: int = 2, timeout: float = 600) -> float:
    """Plain rake (no plugin) in a local folder: the reference mosaic.  Returns the wall time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_")}
    t0 = time.monotonic()
    r = subprocess.run(["rake", "-m", "-j", str(jobs)], cwd=folder, env=env, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RunError(f"untraced rake failed: {r.stderr.strip()[-300:]}")
    return time.monotonic() - t0


# --- under real Pwrake, in its Gfarm mode -------------------------------------------------------------------

def pwrake_command() -> tuple[list, str] | None:
    """(argv, bin folder) of Pwrake: a source checkout named by PWRAKE_SRC (`ruby -I SRC/lib SRC/bin/pwrake`),
    else `pwrake` on PATH; None when neither exists.  Pwrake is not part of mtcio and is never installed by it."""
    src = os.environ.get("PWRAKE_SRC")
    if src and os.path.isfile(os.path.join(src, "bin", "pwrake")):
        src = os.path.abspath(src)
        return ["ruby", "-I", os.path.join(src, "lib"), os.path.join(src, "bin", "pwrake")], os.path.join(src, "bin")
    exe = shutil.which("pwrake")
    return ([exe], os.path.dirname(exe)) if exe else None


def run_pwrake(bed: Bed, top: str, hosts: list, *, run: str, db: str, logdir: str, slots: int = 2,
               timeout: float = 900, on_line=None, extra_env: dict | None = None) -> Result:
    """Pwrake under the plugin (compat + pwrake files) as the testbed user on hosts[0] (needs `mtcbed up
    --sshd`), in that host's gfarm2fs view of `top`: Pwrake switches to its Gfarm mode, each worker mounts its
    own gfarm2fs and tasks are scheduled by their inputs' locations.  The run and Pwrake's own profile
    (`-L`, table pwrake_tasks) are then stored in `db` by this process (root), so `db` may be a store the
    testbed user cannot write.  `extra_env` is given to the master (and so to the tasks' traced commands).
    Raises RunError when Pwrake fails."""
    from mtcio import pwrake_plugin
    from mtcio.preload.testing import LIB
    cmd = pwrake_command()
    if cmd is None:
        raise RunError("Pwrake not found: set PWRAKE_SRC to a Pwrake source checkout or put pwrake on PATH")
    argv, bindir = cmd
    work = tempfile.mkdtemp(prefix="mtcpwrake.")
    os.chmod(work, 0o1777)                          # the master writes its profile here as the testbed user
    try:
        with open(os.path.join(work, "hosts"), "w") as fh:
            fh.write("".join(f"{h} {slots}\n" for h in hosts))
        os.chmod(os.path.join(work, "hosts"), 0o644)
        pwlog = os.path.join(work, "pwlog")
        # gfwhere-pipe (Pwrake's bin/) must be on the master's PATH in Gfarm mode
        env = ["env", f"PATH={bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}", f"MTCPROF_CMD={MTCPROF}",
               f"MTCPROF_LIB={LIB}", f"MTCPROF_DIR={logdir}", f"MTCPROF_RUN={run}", "MTCPROF_INGEST=off",
               *(f"{k}={v}" for k, v in (extra_env or {}).items())]
        req = ["-r", pwrake_plugin.path("compat"), "-r", pwrake_plugin.path("pwrake")]
        full = MTCBED + ["exec", hosts[0], "--", *env, *argv, *req, "--hostfile", os.path.join(work, "hosts"),
                         "-L", pwlog]
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MTCPROF_")}
        t0 = time.monotonic()
        p = subprocess.Popen(full, cwd=bed.mounts[hosts[0]] + top, env=clean, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        lines = []
        import threading
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            for line in p.stdout:
                lines.append(line)
                if on_line:
                    on_line(line.rstrip("\n"))
            p.wait()
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        out = "".join(lines)
        if p.returncode != 0:
            if p.returncode < 0:
                raise RunError(f"Pwrake did not finish in {timeout:.0f} s")
            last = [l for l in lines if l.strip() and not l.startswith(("/", "\t", "Tasks:", "(See"))]
            raise RunError(f"pwrake failed (exit {p.returncode}): {(last[-1] if last else out).strip()[:300]}")
        gfwhere = " ".join(MTCBED) + f" exec {hosts[0]} -- gfwhere"
        for what, a in (("ingest", ["ingest", logdir, "--db", db, "--run", run, "--gfwhere-cmd", gfwhere,
                                    "--no-progress"]),
                        ("pwrake-import", ["pwrake-import", pwlog, "--db", db, "--run", run])):
            r = subprocess.run([MTCPROF, *a], capture_output=True, text=True, env=clean)
            if r.returncode != 0:
                raise RunError(f"mtcprof {what} failed: {(r.stderr or r.stdout).strip()[-300:]}")
            out += r.stdout + r.stderr
        out += f"mtcprof: run {run} stored in {os.path.abspath(db)}\n"
        return Result(wall, "", out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
