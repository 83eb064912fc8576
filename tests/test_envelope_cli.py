"""mtcenvelope without a testbed: import, list, show, export (YAML/CSV) and load() round trips,
plot, and the external-tool path (missing tool: a clear error; a stand-in tool on PATH: points)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mtcio import envelope
from mtcio.envelope.export import load

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
CLI = [sys.executable, "-m", "mtcio.envelope.cli"]


def cli(*args, check=True, **kw):
    cp = subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, **kw)
    if check:
        assert cp.returncode == 0, cp.stderr
    return cp


@pytest.fixture
def imported(tmp_path):
    db = tmp_path / "e.db"
    cli("import", FIX / "ior" / "ior-gfarm-fpp-t1m-np2.json",
        FIX / "mdtest" / "mdtest-gfarm-n200-np4.txt", "--db", db, "--name", "imp", "--metric", "T1L")
    return db


def test_import_list_show(imported):
    df = load(imported, "imp")
    assert set(df["metric"]) == {"TL", "BL", "T1L", "B1L"}
    assert len(df) == 18 and df["ok"].all()
    # a number checked by hand in the IOR JSON: first write iteration, 128.1388 ops/s
    tl = df[(df.metric == "TL") & (df.file_size == 1 << 20) & (df.repeat == 0)]
    assert tl["value"].iloc[0] == pytest.approx(128.1388)
    out = cli("list", "--db", imported).stdout
    assert "imp" in out and "18" in out
    show = cli("show", "--db", imported, "--name", "imp").stdout
    assert "T1L" in show and "1.0 MiB" in show and "1048576" not in show


def test_import_malformed_is_a_clear_error_and_stores_nothing(tmp_path, imported):
    bad = tmp_path / "bad.txt"
    bad.write_text("garbage\n")
    cp = cli("import", FIX / "ior" / "ior-gfarm-fpp-t1m-np1.json", bad, "--db", imported,
             "--name", "other", check=False)
    assert cp.returncode == 2
    assert "bad.txt" in cp.stderr and "not the output of a known tool" in cp.stderr
    assert "Traceback" not in cp.stderr
    assert "other" not in cli("list", "--db", imported).stdout


@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_export_round_trip(imported, tmp_path, fmt):
    out = tmp_path / f"env.{fmt}"
    cli("export", "--db", imported, "--name", "imp", "--format", fmt, "-o", out)
    a, b = load(imported, "imp"), envelope.load(out)
    assert len(a) == len(b)
    cols = ["metric", "file_size", "procs_per_host", "hosts", "repeat", "unit", "ok", "tool"]
    assert a[cols].equals(b[cols])
    assert (a["value"] == b["value"]).all()          # exact: no precision lost
    assert list(a["config"]) == list(b["config"])
    with pytest.raises(LookupError):
        envelope.load(out, "not-this-run")


def test_load_rejects_a_foreign_file(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("a: 1\n")
    with pytest.raises(ValueError, match="not an envelope export"):
        envelope.load(p)


def test_plot(imported, tmp_path):
    d = tmp_path / "fig"
    cli("plot", "--db", imported, "--name", "imp", "-o", d)
    pngs = sorted(p.name for p in d.glob("*.png"))
    assert pngs == ["B1L.png", "BL.png", "T1L.png", "TL.png"]
    assert all((d / p).stat().st_size > 10_000 for p in pngs)
    html = (d / "index.html").read_text()
    assert all(p in html for p in pngs)


@pytest.mark.parametrize("tool,exe", [("ior", "ior"), ("mdtest", "mdtest"), ("fio", "fio")])
def test_missing_tool_is_a_clear_error(tmp_path, tool, exe):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))      # fio is installed here: hide every tool
    cp = cli("measure", "--db", tmp_path / "t.db", "--tool", tool, "--hosts", "h1",
             "--launcher", "ssh {host}", "--mount", "/gfarm", check=False, env=env)
    assert cp.returncode == 2
    assert f"'{exe}' is not on PATH" in cp.stderr and "Traceback" not in cp.stderr
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("args,msg", [
    (["--hogs-per-host", "-1"], "--hogs-per-host: expected 0..256, got -1"),
    (["--hogs-per-host", "1", "--tool", "fio"], "--hogs-per-host: only the native engine runs them (not --tool fio)"),
    (["--hogs-per-kernel", "257"], "--hogs-per-kernel: expected 0..256, got 257"),
    (["--hogs-per-kernel", "1", "--tool", "mdtest"],
     "--hogs-per-kernel: only the native engine runs them (not --tool mdtest)"),
    (["--call-gap-us", "-5"], "--call-gap-us: expected 0..10000000 us, got -5"),
    (["--call-gap-us", "50", "--tool", "ior"], "--call-gap-us: only the native engine spins between calls (not --tool ior)"),
    (["--look", "-1"], "--look: expected 0..60 s, got -1.0"),
    (["--wait-quiet", "90000"], "--wait-quiet: expected 0..86400 s, got 90000.0"),
    (["--look", "0", "--wait-quiet", "5"], "--wait-quiet needs --look > 0"),
])
def test_bad_hogs_per_host_is_a_clear_error(tmp_path, args, msg):
    cp = cli("measure", "--db", tmp_path / "t.db", "--hosts", "h1", "--launcher", "ssh {host}", "--mount", "/gfarm",
             *args, check=False)
    assert cp.returncode == 2 and msg in cp.stderr and "Traceback" not in cp.stderr
    assert not (tmp_path / "t.db").exists()


def stand_in_fio(tmp_path) -> dict:
    """The environment of a stand-in `fio` that prints recorded fio JSON."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fio").write_text(
        "#!/bin/sh\n"
        "case \"$*\" in --version) echo fio-3.33; exit 0;; esac\n"
        f"case \"$*\" in *--rw=write*) cat {FIX}/fio/fio-write-1m-nj2.json;; "
        f"*) cat {FIX}/fio/fio-read-1m-nj2.json;; esac\n")
    (bindir / "fio").chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")


FIO_SWEEP = ["--tool", "fio", "--hosts", "a,b", "--launcher", "env", "--sizes", "1m", "--procs", "2", "--repeat", "1",
             "--quiet"]


def test_tool_path_with_a_stand_in_fio(tmp_path):
    """A stand-in `fio` runs through the same code path as the real one: per-host commands through the launcher,
    parsed by the fio driver, stored."""
    env = stand_in_fio(tmp_path)
    db = tmp_path / "t.db"
    cp = cli("measure", "--db", db, "--name", "fio", *FIO_SWEEP, "--mount", str(tmp_path),
             "--metrics", "TL,BL,T1L,B1L", env=env)
    df = load(db, "fio")
    assert set(df["metric"]) == {"TL", "BL", "T1L", "B1L"}, cp.stderr
    assert df["ok"].all() and (df["value"] > 0).all()
    assert (df["tool"] == "fio").all() and (df["hosts"] == 2).all()


def spinners(seconds: float) -> list:
    """One CPU-bound process per CPU for ``seconds``."""
    spin = f"import time\nt = time.time() + {seconds}\nwhile time.time() < t: pass\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]


def test_a_busy_machine_is_said_before_the_sweep(tmp_path):
    """Every CPU spinning through --look and --wait-quiet: a warning naming the CPUs' share, after the wait."""
    env = stand_in_fio(tmp_path)
    procs = spinners(60)
    try:
        cp = cli("measure", "--db", tmp_path / "t.db", "--name", "hot", *FIO_SWEEP, "--mount", str(tmp_path),
                 "--metrics", "TL", "--look", "0.5", "--wait-quiet", "1.2", env=env)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    lines = [x for x in cp.stderr.splitlines() if "machine is busy" in x]
    assert len(lines) == 2, cp.stderr
    assert lines[0].startswith("mtcenvelope: the machine is busy (CPUs ") and "waiting up to 1 s" in lines[0]
    assert lines[1].startswith("warning: the machine is busy before the sweep (CPUs ")
    assert re.search(r", still after waiting \d s\): an envelope measured beside other work measures that work too",
                     lines[1])
    cpu = int(lines[1].split("(CPUs ")[1].split("%")[0])
    assert 50 <= cpu <= 100
    assert len(load(tmp_path / "t.db", "hot")) == 1     # then measured anyway


class ScriptedMachine:
    """This machine as mtcenvelope's look sees it, scripted: a clock that moves only when the look sleeps, and CPUs
    100 % busy until ``busy_until`` s, idle after, whatever else the real machine runs."""

    def __init__(self, busy_until):
        self.now, self.busy_until = 0.0, busy_until

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def cpu(self):          # (busy, total) ticks since boot, 1 ms each
        return round(min(self.now, self.busy_until) * 1000), round(self.now * 1000)


def test_the_wait_for_a_quiet_machine_ends_when_it_is_quiet(tmp_path, monkeypatch, capsys):
    """CPUs busy for 2.2 s: the sweep waits for them (at most 60 s), says when it was quiet, and does not warn.
    Looks of 0.5 s: five are busy (the fifth 40 %), the sixth, from 2.5 to 3 s, is quiet."""
    from mtcio.envelope import cli as envcli
    from mtcio.envelope import machine
    m = ScriptedMachine(busy_until=2.2)
    monkeypatch.setattr(machine, "time", m)         # the load and clock the look sees: not the real machine's
    monkeypatch.setattr(machine, "_cpu", m.cpu)
    monkeypatch.setattr(machine, "_disks", dict)
    monkeypatch.setenv("PATH", stand_in_fio(tmp_path)["PATH"])
    rc = envcli.main([str(a) for a in ("measure", "--db", tmp_path / "t.db", "--name", "q", *FIO_SWEEP,
                                       "--mount", tmp_path, "--metrics", "TL", "--wait-quiet", "60")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert [x for x in err.splitlines() if not x.startswith("done: run 'q' ")] == [
        "mtcenvelope: the machine is busy (CPUs 100% busy, disks 0% busy, 0.0 MiB/s written (over 0.5 s)); "
        "waiting up to 60 s for it to quiet down",
        "mtcenvelope: quiet after 3 s (CPUs 0% busy, disks 0% busy, 0.0 MiB/s written (over 0.5 s))"]
    assert m.now == 3.0
    assert len(load(tmp_path / "t.db", "q")) == 1


def test_writes_to_a_disk_make_the_machine_busy():
    """600 MiB written with O_DIRECT beside the look: the written rate alone makes it busy (a fast disk is seldom
    20 % busy). /var/tmp: on the disk where /tmp may be a tmpfs."""
    from mtcio.envelope import machine
    d = tempfile.mkdtemp(dir="/var/tmp")
    dd = subprocess.Popen(["dd", "if=/dev/zero", f"of={d}/w", "bs=1M", "count=600", "oflag=direct"],
                          stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        load = machine.look(0.5)
    finally:
        dd.kill()
        dd.wait()
        shutil.rmtree(d)
    assert load.written > machine.WRITTEN_BUSY and load.busy(), load
