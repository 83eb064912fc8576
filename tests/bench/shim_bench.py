"""Shim overhead, every row measured side by side in one run (benchmark, not a test).

Rows (issue 56 targets in brackets):
  pread 1 B on a cached file [<= 25 ns added], fwrite 64 B [<= 20 ns], open + close of one file [<= 60 ns]:
    ns per call, CPU time of the timed loop (tests/preload_progs/bench_io.c)
  process start+exit: /bin/true 200 times from a shell loop, us per process [<= 60 us added], and the same with the
    shim loaded but not tracing (MTCPROF_DIR unset): CPU time of the shell and its children
  cp -r of 2,000 small files [ratio <= 1.05 on tmpfs], CPU time of cp on the tmpfs, wall time elsewhere: on a tmpfs mounted for the bench (as root; the
    worst case: every call is a memory operation), on the local disk (tempfile's folder; on ext4 without a journal a
    create scans past inodes freed in the last ~30 s, so that row depends on what else the machine deleted), and on a
    gfarm2fs mount of a one-host testbed (as root; the file system mtcio is for)

Arms: untraced, this build of the shim (`mtcio`), with --vs-shim LIB another build of it (e.g. one built from main in
a scratch folder, to see a change before and after in one run), with --vs-darshan DIR a Darshan install of the user's
(DIR/lib/libdarshan.so, non-MPI: DARSHAN_ENABLE_NONMPI=1; `darshan` with its default settings and `darshan+dxt` with
DXT_ENABLE_IO_TRACE=1).  Each round runs every arm once, the order rotated from round to round; a row prints the
untraced median, then for each arm the median over rounds of (arm - untraced of the same round) with its quartiles,
and the median ratio.  The gfarm2fs row runs the shim arms only (the testbed user must be able to read the library).
Traced runs use the environment `mtcprof run` sets (preload/run.py shim_env).

The load average is printed at the start and at the end.

Exit codes: 0 measured; 2 bad arguments (a library or a Darshan install that is not there).
Environment: BENCH_REPS (rounds of the micro rows and the process row, default 11), BENCH_COPY_REPS (tmpfs copy, 31),
BENCH_DISK_REPS (11, 0 = skip), BENCH_GFARM_REPS (9, 0 = skip), BENCH_CALLS (calls per micro run, 3,000,000).
--results FILE: the first copy's ratio also written as this command's row (the command without --vs-shim and
--vs-darshan: the ratio is this shim's against untraced whatever arms ran beside it) of FILE's "overhead" section, e.g.
montage_example/results.json; `python -m montage_example.results` renders RESULTS.md.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from mtcio.preload.run import shim_env  # noqa: E402
from mtcio.preload.testing import LIB, env_for, prog  # noqa: E402
from mtcio.testbed.sh import as_user, in_host, user_env  # noqa: E402
from montage_example import results  # noqa: E402

REPS = max(1, int(os.environ.get("BENCH_REPS", "11")))
COPY_REPS = int(os.environ.get("BENCH_COPY_REPS", "31"))
DISK_REPS = int(os.environ.get("BENCH_DISK_REPS", "11"))
GFARM_REPS = int(os.environ.get("BENCH_GFARM_REPS", "9"))
ARM_OPTIONS = ("--vs-shim", "--vs-darshan")     # further arms: not part of the copy row's command
N_CALLS = int(os.environ.get("BENCH_CALLS", "3000000"))
N_OPENS = max(1, N_CALLS // 10)          # an open + close costs ~10 preads
N_FILES = 2000
N_PROCS = 200
TARGETS = {"pread": 25.0, "fwrite": 20.0, "openclose": 60.0, "proc": 60.0}   # added ns / us
COPY_GOAL = 1.05


class Arm:
    """One way of running a command: its environment given the bench's log folder."""

    def __init__(self, name: str, kind: str, lib: str | None = None):
        self.name, self.kind, self.lib = name, kind, lib

    def env(self, logdir: str) -> dict:
        base = env_for(None)
        if self.kind == "none":
            return base
        if self.kind == "shim":
            e = shim_env(base, dir=os.path.join(logdir, "mtcio"))
            e["LD_PRELOAD"] = self.lib
            return e
        d = os.path.join(logdir, self.name)
        e = dict(base, LD_PRELOAD=self.lib, DARSHAN_ENABLE_NONMPI="1", DARSHAN_LOG_DIR_PATH=d, DARSHAN_LOGPATH=d)
        if self.kind == "dxt":
            e["DXT_ENABLE_IO_TRACE"] = "1"
        return e


def make_logdirs(logdir: str, arms: list[Arm]) -> None:
    for a in arms:
        if a.kind != "none":
            d = os.path.join(logdir, "mtcio" if a.kind == "shim" else a.name)
            os.makedirs(d, exist_ok=True)
            # Darshan's default layout, in case the install ignores DARSHAN_LOG_DIR_PATH
            t = time.localtime()
            if a.kind != "shim":
                os.makedirs(os.path.join(d, str(t.tm_year), str(t.tm_mon), str(t.tm_mday)), exist_ok=True)


def rounds(arms: list[Arm], reps: int, one) -> list[list[float]]:
    """reps rounds, each running every arm once (order rotated): values[arm index][round]."""
    vals = [[0.0] * reps for _ in arms]
    for r in range(reps):
        for k in range(len(arms)):
            i = (k + r) % len(arms)
            vals[i][r] = one(arms[i])
    return vals


def summary(vals: list[list[float]], scale: float = 1.0) -> tuple[float, list[tuple[float, float, float, float]]]:
    """untraced median, and per traced arm: (median added, its 1st and 3rd quartile, median ratio)."""
    base = vals[0]
    out = []
    for v in vals[1:]:
        d = sorted((x - b) * scale for x, b in zip(v, base))
        q = statistics.quantiles(d, n=4) if len(d) > 1 else [d[0], d[0], d[0]]
        out.append((statistics.median(d), q[0], q[2], statistics.median(x / b for x, b in zip(v, base))))
    return statistics.median(base) * scale, out


def print_row(label: str, base: float, arms_out, fmt: str, check: str = "") -> None:
    cells = "".join(f"  {a:>{fmt[0]}.{fmt[1]}f} [{lo:.{fmt[1]}f}..{hi:.{fmt[1]}f}] x{r:.3f}"
                    for a, lo, hi, r in arms_out)
    print(f"{label:34s} {base:11.{fmt[1]}f}{cells}{check}")


def verdict(value: float, limit: float) -> str:
    return f"   (target {limit:g}: {'OK' if value <= limit else 'MISSED'})"


def load() -> str:
    """The load average (1, 5, 15 min): the rows' medians are side by side, but a loaded machine widens them."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(argv: list[str], env: dict, cpu: bool) -> float:
    """Seconds the command took: CPU time (user + system) of it and its children when cpu, else wall time.
    CPU time leaves out the waits for a CPU a shared machine adds to whichever arm was unlucky."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, env=env, check=True)
    if not cpu:
        return time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def micro(kind: str, path: str, n: int, arms: list[Arm], logdir: str) -> list[list[float]]:
    def one(arm: Arm) -> float:
        r = subprocess.run([prog("bench_io"), kind, path, str(n)], capture_output=True, text=True,
                           env=arm.env(logdir), check=True)
        return float(r.stdout)
    return rounds(arms, REPS, one)


def processes(arms: list[Arm], logdir: str) -> list[list[float]]:
    """us per /bin/true started by a shell loop (the shell traced too, as a task's `sh -c` is)."""
    loop = f"i=0; while [ $i -lt {N_PROCS} ]; do /bin/true; i=$((i+1)); done"

    def one(arm: Arm) -> float:
        e = env_for(None, _loaded_only=True) if arm.kind == "loaded" else arm.env(logdir)
        return timed(["sh", "-c", loop], e, cpu=True) / N_PROCS * 1e6
    return rounds(arms, REPS, one)


TREE = ("import os, sys\n"
        "src, n = sys.argv[1], int(sys.argv[2])\n"
        "for i in range(n):\n"
        "    sub = os.path.join(src, f'd{i // 200}')\n"
        "    os.makedirs(sub, exist_ok=True)\n"
        "    with open(os.path.join(sub, f'f{i}'), 'wb') as fh:\n"
        "        fh.write(os.urandom(512 + (i * 37) % 3500))\n")


def copy_tree(root: str, logdir: str, reps: int, arms: list[Arm], via: list | None = None,
              via_env: dict | None = None, cpu: bool = False) -> list[list[float]]:
    """cp -r of a 2,000-file tree under root, seconds per copy for each arm (CPU time of cp when cpu).
    via: a command prefix that runs the copy elsewhere (a testbed host, as its user; environment via_env); the arms
    then go through `env` with their variables on its command line."""
    src = os.path.join(root, "src")
    subprocess.run((via or []) + ["/usr/bin/python3", "-c", TREE, src, str(N_FILES)], env=via_env, check=True)
    subprocess.run((via or []) + ["cp", "-r", src, os.path.join(root, "warm")], env=via_env, check=True)
    count = [0]

    def one(arm: Arm) -> float:
        count[0] += 1
        cmd = ["cp", "-r", src, os.path.join(root, f"dst-{count[0]}")]
        if via:
            extra = {k: v for k, v in arm.env(logdir).items() if k.startswith(("MTCPROF_", "DARSHAN_", "DXT_"))
                     or k == "LD_PRELOAD"} if arm.kind != "none" else {}
            cmd = via + ["env"] + [f"{k}={v}" for k, v in extra.items()] + cmd
        return timed(cmd, via_env if via else arm.env(logdir), cpu)
    # copies are removed only at the end: deleting between runs makes the next run pay for it (ext4 discard)
    return rounds(arms, reps, one)


def fs_type(path: str) -> str:
    return subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True).stdout.strip() or "?"


def gfarm_copy(share: str, arms: list[Arm]) -> list[list[float]] | None:
    """The copy on a gfarm2fs mount of a one-host testbed (mtcbed), run as the testbed user in its namespace."""
    mtcbed = [sys.executable, "-m", "mtcio.testbed.cli"]
    with open("/run/mtcbed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one testbed per machine
        subprocess.run(mtcbed + ["down"], capture_output=True)
        up = subprocess.run(mtcbed + ["up", "--nodes", "1"], capture_output=True, text=True)
        if up.returncode:
            print(f"(gfarm2fs copy skipped: mtcbed up failed: {up.stderr.strip()[-200:]})")
            return None
        try:
            st = json.loads(subprocess.run(mtcbed + ["status", "--json"], capture_output=True, text=True,
                                           check=True).stdout)
            host = st["hosts"][0]
            os.chmod(share, 0o755)       # the testbed user reads the shims and writes logs here
            local = []
            for i, a in enumerate(arms):
                if a.kind == "shim":
                    lib = os.path.join(share, f"libmtcprof-{i}.so")
                    shutil.copy(a.lib, lib)
                    a = Arm(a.name, a.kind, lib)
                local.append(a)
            logdir = os.path.join(share, "gfarm-logs")
            os.makedirs(os.path.join(logdir, "mtcio"))
            os.chmod(logdir, 0o1777)
            os.chmod(os.path.join(logdir, "mtcio"), 0o1777)
            # the prefix `mtcbed exec` uses, without its Python start-up in every timed run
            return copy_tree(os.path.join(host["mount"], "shim_bench"), logdir, GFARM_REPS, local,
                             via=in_host(host["name"], as_user([])), via_env=user_env())
        finally:
            subprocess.run(mtcbed + ["down"], capture_output=True)


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="shim_bench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The shim's overhead per call, per process and on many small files, as added time and ratio "
                    "against untraced runs, arms alternating.",
        epilog="exit codes:\n  0  measured\n  2  bad arguments (a library or a Darshan install that is not there)\n"
               "\nenvironment: BENCH_REPS, BENCH_COPY_REPS, BENCH_DISK_REPS, BENCH_GFARM_REPS, BENCH_CALLS "
               "(see the module's docstring)")
    ap.add_argument("--vs-shim", metavar="LIB", help="another build of libmtcprof.so, measured as a further arm")
    ap.add_argument("--vs-darshan", metavar="DIR",
                    help="a Darshan install (DIR/lib/libdarshan.so): adds the darshan and darshan+dxt arms")
    ap.add_argument("--results", metavar="FILE", help="write the first copy's ratio into this results file too")
    ap.add_argument("--only", metavar="ROWS", default="pread,fwrite,openclose,proc,copy",
                    help="comma-separated rows to run (default: all): pread, fwrite, openclose, proc, copy")
    a = ap.parse_args(argv)
    if a.vs_shim and not os.path.isfile(a.vs_shim):
        ap.exit(2, f"shim_bench: --vs-shim: no such library: {a.vs_shim}\n")
    if a.vs_darshan is not None and not os.path.isfile(os.path.join(a.vs_darshan, "lib", "libdarshan.so")):
        ap.exit(2, f"shim_bench: --vs-darshan: {os.path.join(a.vs_darshan, 'lib', 'libdarshan.so')} not found "
                   "(DIR must be a Darshan install prefix)\n")
    rows = a.only.split(",")
    bad = [r for r in rows if r not in ("pread", "fwrite", "openclose", "proc", "copy")]
    if bad:
        ap.exit(2, f"shim_bench: --only: unknown row {bad[0]!r} (pread, fwrite, openclose, proc, copy)\n")
    a.rows = rows
    return a


def write_result(path: str, fs: str, ratio: float) -> None:
    env = " ".join(f"{k}={os.environ[k]}" for k in sorted(os.environ) if k.startswith("BENCH_"))
    results.set_overhead_row(path, {
        "command": (env + " " if env else "") + results.command_line("tests/bench/shim_bench.py", sys.argv[1:],
                                                                    drop=ARM_OPTIONS + ("--results",)),
        "what": f"`cp -r` of 2,000 small files on a {fs}" + (", the worst case" if fs == "tmpfs" else ""),
        "ratio": round(ratio, 3), "detail": f"{time.strftime('%Y-%m-%d')}; goal {COPY_GOAL}"})
    print(f"written into {path} (python -m montage_example.results renders the page)")


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    prog("bench_io")                     # builds the shim and the programs
    arms = [Arm("untraced", "none"), Arm("mtcio", "shim", LIB)]
    if a.vs_shim:
        arms.append(Arm("vs-shim", "shim", os.path.abspath(a.vs_shim)))
    if a.vs_darshan is not None:
        lib = os.path.abspath(os.path.join(a.vs_darshan, "lib", "libdarshan.so"))
        arms += [Arm("darshan", "darshan", lib), Arm("darshan+dxt", "dxt", lib)]
    shims = [x for x in arms if x.kind in ("none", "shim")]
    tmp = tempfile.mkdtemp(prefix="shim_bench.")
    # room for every copy (kept to the end, see copy_tree): a tree takes ~8.2 MB of a tmpfs (2,000 files of at most
    # 4 KiB, a page each), so with the Darshan arms 31 rounds need more than the 1 GiB three arms fit in
    size_mb = 256 + (COPY_REPS * len(arms) + 2) * 10
    on_tmpfs = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "shim_bench", tmp]).returncode == 0
    logdir = os.path.join(tmp, "logs")
    make_logdirs(logdir, arms)
    try:
        data = os.path.join(tmp, "cached")
        with open(data, "wb") as fh:
            fh.write(os.urandom(4096))
        open(data, "rb").read()
        print(f"shim_bench: {REPS} rounds of alternating arms (copies of 2,000 files: {COPY_REPS} on the bench's "
              f"folder, {DISK_REPS} on the disk, {GFARM_REPS} on gfarm2fs); {N_CALLS} calls per micro run")
        print(f"arms: {', '.join(x.name + (' = ' + x.lib if x.lib else '') for x in arms)}")
        print(f"machine: {os.cpu_count()} CPUs, {load()} at the start")
        print(f"{'case':34s} {'untraced':>11s}" + "".join(f"  {x.name + ' added [IQR] ratio':>28s}" for x in arms[1:]))
        micro_rows = (("pread", "pread 1 B, cached (ns/call)", data, N_CALLS),
                      ("fwrite", "fwrite 64 B (ns/call)", os.path.join(tmp, "fw"), N_CALLS),
                      ("openclose", "open + close (ns/pair)", data, N_OPENS))
        for key, label, path, n in micro_rows:
            if key in a.rows:
                base, out = summary(micro(key, path, n, arms, logdir))
                print_row(label, base, out, (9, 1), verdict(out[0][0], TARGETS[key]))
        if "proc" in a.rows:
            parms = arms[:2] + [Arm("loaded", "loaded")] + arms[2:]
            base, out = summary(processes(parms, logdir))
            print_row("process start+exit, /bin/true (us)", base, out[:1] + out[2:], (9, 1),
                      verdict(out[0][0], TARGETS["proc"]))
            print(f"{'  mtcio loaded, not tracing (us)':34s} {base:11.1f}  {out[1][0]:>9.1f} "
                  f"[{out[1][1]:.1f}..{out[1][2]:.1f}] x{out[1][3]:.3f}")
        if "copy" in a.rows:
            mem = fs_type(tmp) == "tmpfs"      # all CPU there: timed as CPU time, like the rows above
            copies = [(f"cp -r, {fs_type(tmp)} ({'CPU ' if mem else ''}ms)",
                       copy_tree(tmp, logdir, COPY_REPS, arms, cpu=mem), arms)]
            if DISK_REPS > 0:
                disk = tempfile.mkdtemp(prefix="shim_bench.disk.")
                try:
                    copies.append((f"cp -r, {fs_type(disk)} (ms)", copy_tree(disk, logdir, DISK_REPS, arms), arms))
                finally:
                    shutil.rmtree(disk, ignore_errors=True)
            if os.geteuid() == 0 and GFARM_REPS > 0:
                share = tempfile.mkdtemp(prefix="shim_bench.gfarm.")
                try:
                    g = gfarm_copy(share, shims)
                finally:
                    shutil.rmtree(share, ignore_errors=True)
                if g:
                    copies.append(("cp -r, gfarm2fs on mtcbed (ms)", g, shims))
            for label, vals, used in copies:
                base, out = summary(vals, 1e3)
                r = out[0][3]
                print_row(label, base, out, (9, 2),
                          f"   (goal {COPY_GOAL}: {'OK' if r <= COPY_GOAL else 'MISSED'})" if "tmpfs" in label else "")
                if len(used) != len(arms):
                    print(f"{'':34s} (arms: {', '.join(x.name for x in used[1:])})")
            if a.results:
                write_result(a.results, fs_type(tmp), summary(copies[0][1], 1e3)[1][0][3])
        print(f"machine: {load()} at the end")
    finally:
        if on_tmpfs:
            subprocess.run(["umount", tmp])
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
