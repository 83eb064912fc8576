"""The commands as a user meets them: one exit-code table, --help/--version everywhere, one-line errors (never a
traceback), `-o -` to a closed pipe, the log folder checks of `mtcprof run`, start-up without heavy imports."""
import os
import signal
import subprocess
import sys
import time

import pytest

from mtcio import __version__
from mtcio.exitcodes import guard, printable
from mtcio.preload.testing import ensure_built

BIN = os.path.dirname(sys.executable)
MTCPROF = os.path.join(BIN, "mtcprof")
MTCBED = os.path.join(BIN, "mtcbed")
SUBCOMMANDS = ("run", "dump", "ingest", "model", "report", "export")


def sh(*argv, **kw):
    return subprocess.run(list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A small traced run, ingested: (logs folder, db)."""
    ensure_built()
    tmp = tmp_path_factory.mktemp("cli")
    logs, db = tmp / "logs", tmp / "t.db"
    src = tmp / "src"
    src.write_bytes(os.urandom(30000))
    r = sh(MTCPROF, "run", "--dir", str(logs), "--run", "R", "--task", "t1", "--stage", "cp", "--trace-ops", "--",
           "dd", f"if={src}", f"of={tmp / 'dst'}", "bs=1", "status=none")
    assert r.returncode == 0, r.stderr
    r = sh(MTCPROF, "ingest", str(logs), "--db", str(db), "--run", "R", "--no-progress", "--gfwhere-cmd", "none")
    assert r.returncode == 0, r.stderr
    return logs, db


def test_version_on_every_command():
    for argv, prog in (([MTCPROF], "mtcprof"), ([MTCBED], "mtcbed"), ([os.path.join(BIN, "mtcenvelope")],
                                                                      "mtcenvelope")):
        r = sh(*argv, "--version")
        assert (r.returncode, r.stdout, r.stderr) == (0, f"{prog} (mtcio) {__version__}\n", "")


@pytest.mark.parametrize("argv", [[], *[[c] for c in SUBCOMMANDS]])
def test_mtcprof_help_ends_with_the_exit_code_table(argv):
    r = sh(MTCPROF, *argv, "--help")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.split("\n\n")[-1].startswith("exit codes:\n")     # its rows: tests/test_help_pages.py
    for stale in ("DESIGN.md", "seed's", "Figs."):
        assert stale not in r.stdout


@pytest.mark.parametrize("argv", [[], ["up"], ["down"], ["status"], ["exec"]])
def test_mtcbed_help_ends_with_the_exit_code_table(argv):
    r = sh(MTCBED, *argv, "--help")
    assert r.returncode == 0 and r.stdout.split("\n\n")[-1].startswith("exit codes:\n")


def test_usage_lines_show_the_double_dash():
    assert sh(MTCPROF, "run", "--help").stdout.splitlines()[0] == (
        "usage: mtcprof run [-h] [--dir DIR] [--run RUN] [--task TASK] [--stage STAGE] [options] -- CMD...")
    assert sh(MTCBED, "exec", "--help").stdout.splitlines()[0] == "usage: mtcbed exec [-h] HOST -- CMD..."


def test_every_option_has_help():
    import argparse
    import importlib

    from mtcio import cli
    from mtcio.testbed.cli import _parser
    missing = []
    for name, (mod, _) in cli._MTCPROF_SUBCOMMANDS.items():
        p = argparse.ArgumentParser()
        importlib.import_module(mod).add_arguments(p)
        missing += [f"mtcprof {name} {a.dest}" for a in p._actions if not a.help]
    for name, sp in next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices.items():
        missing += [f"mtcbed {name} {a.dest}" for a in sp._actions if not a.help]
    assert missing == []


def test_no_subcommand_and_bad_arguments_exit_2():
    r = sh(MTCPROF)
    assert r.returncode == 2 and r.stderr.startswith("usage: mtcprof")
    r = sh(MTCPROF, "frobnicate")
    assert r.returncode == 2 and "invalid choice: 'frobnicate'" in r.stderr
    r = sh(MTCPROF, "run", "--dir", "/tmp")
    assert r.returncode == 2 and one_line(r.stderr).startswith("mtcprof run: no command given")


@pytest.mark.parametrize("sub,extra", [("ingest", ["LOGS"]), ("model", ["--run", "R", "-o", "OUT"]),
                                       ("report", ["--run", "R", "-o", "OUT"]),
                                       ("export", ["--run", "R", "-o", "OUT"])])
def test_db_that_is_a_folder(tmp_path, sub, extra):
    argv = [str(tmp_path / "x") if a in ("LOGS", "OUT") else a for a in extra]
    r = sh(MTCPROF, sub, *argv, "--db", str(tmp_path))
    assert r.returncode == 2
    assert one_line(r.stderr) == f"mtcprof {sub}: --db {tmp_path} is a folder, not a database file"
    r = sh(MTCPROF, sub, *argv, "--db", str(tmp_path / "no" / "such.db"))
    assert r.returncode == 2
    assert one_line(r.stderr) == f"mtcprof {sub}: --db {tmp_path}/no/such.db: no such folder {tmp_path}/no"


def test_dump_missing_folder_and_garbage(tmp_path):
    garbage = tmp_path / "g.mtclog"
    garbage.write_bytes(b"\x1b[2J\xff\xfe\x00evil" + os.urandom(64))
    r = sh(MTCPROF, "dump", str(tmp_path / "nope.mtclog"))
    assert (r.returncode, r.stdout) == (2, "")
    assert one_line(r.stderr) == f"mtcprof dump: {tmp_path}/nope.mtclog: no such file"
    r = sh(MTCPROF, "dump", str(tmp_path))
    assert (r.returncode, r.stdout) == (2, "")
    assert one_line(r.stderr) == f"mtcprof dump: {tmp_path}: not a regular file (folder)"
    r = subprocess.run([MTCPROF, "dump", str(garbage)], capture_output=True)
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr == f"mtcprof dump: {garbage}: not an mtcprof log\n".encode()


def test_dump_of_a_log_cut_inside_its_header_prints_no_record(traced, tmp_path):
    logs, _ = traced
    (p,) = [os.path.join(logs, f) for f in os.listdir(logs)]
    cut = tmp_path / "cut.mtclog"
    cut.write_bytes(open(p, "rb").read()[:40])       # header + half a record: no process record to show
    r = sh(MTCPROF, "dump", str(cut))
    assert r.returncode == 1
    assert [line.split(",")[0] for line in r.stdout.splitlines()] == ['{"type":"error"']
    assert r.stderr == "mtcprof dump: some logs are truncated or corrupt (see the error lines)\n"


def test_export_to_a_closed_pipe_ends_quietly(traced):
    _, db = traced
    p = subprocess.Popen([MTCPROF, "export", "--db", str(db), "--run", "R", "-o", "-"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout.read(10) == b'{"traceEve'
    p.stdout.close()                                      # what `| head` does
    assert p.wait(timeout=60) == 0
    assert p.stderr.read() == b""


def test_run_log_folder_checks(tmp_path):
    ensure_built()
    f = tmp_path / "file"
    f.write_text("x")
    r = sh(MTCPROF, "run", "--dir", str(f), "--", "true")
    assert r.returncode == 2 and one_line(r.stderr) == f"mtcprof run: log folder {f} is a file, not a folder"
    new = tmp_path / "a" / "b"
    assert sh(MTCPROF, "run", "--dir", str(new), "--", "true").returncode == 0
    assert (os.stat(new).st_mode & 0o777, len(os.listdir(new))) == (0o700, 1)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    r = sh(MTCPROF, "run", "--dir", str(shared), "--", "true")
    assert r.returncode == 2 and one_line(r.stderr) == (
        f"mtcprof run: log folder {shared} is writable by others (mode 0777): chmod o-w it or use another folder")
    assert os.listdir(shared) == []
    if os.geteuid() == 0:        # a folder, and a link, that another user made
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        r = sh(MTCPROF, "run", "--dir", str(theirs), "--", "true")
        assert r.returncode == 2 and one_line(r.stderr) == (
            f"mtcprof run: log folder {theirs} belongs to another user (uid 65534, you are 0): "
            "use a folder of your own")
        link = tmp_path / "link"
        link.symlink_to(new)
        os.lchown(link, 65534, 65534)
        r = sh(MTCPROF, "run", "--dir", str(link), "--", "true")
        assert r.returncode == 2 and one_line(r.stderr) == (
            f"mtcprof run: log folder {link} is a link owned by another user (uid 65534)")


def test_run_keeps_the_commands_status_and_signals(tmp_path):
    ensure_built()
    d = str(tmp_path / "logs")
    assert sh(MTCPROF, "run", "--dir", d, "--", "sh", "-c", "exit 7").returncode == 7
    r = sh("sh", "-c", f"{MTCPROF} run --dir {d} -- sh -c 'kill -INT $$'; echo $?")
    assert r.stdout == "130\n"
    # the command handles Ctrl-C itself: its own status
    assert sh(MTCPROF, "run", "--dir", d, "--", "sh", "-c", "trap 'exit 4' INT; kill -INT $$; sleep 5").returncode == 4
    r = sh(MTCPROF, "run", "--dir", d, "--", "no-such-command-x")
    assert r.returncode == 127 and one_line(r.stderr) == "mtcprof run: command not found: no-such-command-x"
    # Ctrl-C on the terminal reaches the command itself (mtcprof run became it): no Python traceback
    p = subprocess.Popen([MTCPROF, "run", "--dir", d, "--", "sleep", "30"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while open(f"/proc/{p.pid}/comm").read().strip() != "sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=10) == -signal.SIGINT
    assert p.stderr.read() == b""


def test_guard_turns_errors_into_one_line(capsys, monkeypatch):
    monkeypatch.delenv("MTCIO_DEBUG", raising=False)
    assert guard("x", lambda: 1 // 0) == 1
    assert capsys.readouterr().err == ("x: ZeroDivisionError: integer division or modulo by zero "
                                       "(unexpected; MTCIO_DEBUG=1 shows where)\n")

    def interrupted():
        raise KeyboardInterrupt

    assert guard("x", interrupted) == 130 and capsys.readouterr().err == "x: interrupted\n"

    def missing():
        open("/nonexistent/\x1b[31mred")

    assert guard("x", missing) == 2
    assert capsys.readouterr().err == "x: no such file: /nonexistent/\\x1b[31mred\n"
    monkeypatch.setenv("MTCIO_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        guard("x", lambda: 1 // 0)


def test_printable_escapes_binary():
    assert printable(b"ok\xff\x00\n") == "ok\\xff\\x00\\n"
    assert printable("a" * 300) == "a" * 200 + "..."


# The libraries the fast paths must not import, checked in a fresh interpreter: a tracing workflow starts every
# task through `mtcprof run` (and, on the testbed, `mtcbed exec`); --help builds one parser, imports no library.
HEAVY = ("numpy", "pandas", "yaml", "matplotlib")
OTHERS = ("mtcio.db.ingest", "mtcio.db.ingest_cli", "mtcio.db.model", "mtcio.db.report", "mtcio.db.export_chrome",
          "mtcio.testbed.bed", "mtcio.envelope.measure")
PROBE = ("import sys; {call}\nprint(sorted(m for m in {mods!r} if m in sys.modules and "
         "type(sys.modules[m]).__name__ == 'module'))")


@pytest.mark.parametrize("call,mods", [
    ("from mtcio.cli import mtcprof; mtcprof(['run', '--dir', sys.argv[1], '--', '/nonexistent-cmd'])",
     HEAVY + OTHERS),
    ("from mtcio.cli import mtcprof; mtcprof(['dump', sys.argv[2]])", HEAVY + OTHERS),
    ("from mtcio.testbed.cli import main; main(['exec', 'no-such-host', '--', 'true'])", HEAVY + OTHERS),
    ("from mtcio.cli import mtcprof\ntry: mtcprof(['--help'])\nexcept SystemExit: pass", HEAVY + OTHERS),
    *[(f"from mtcio.cli import mtcprof\ntry: mtcprof(['{c}', '--help'])\nexcept SystemExit: pass", HEAVY)
      for c in ("ingest", "model", "report", "export")],
])
def test_fast_paths_import_nothing_heavy(traced, call, mods):
    logs, _ = traced
    log = os.path.join(logs, os.listdir(logs)[0])
    r = subprocess.run([sys.executable, "-c", PROBE.format(call=call, mods=mods), str(logs), log],
                       capture_output=True, text=True)
    assert r.stdout.splitlines()[-1] == "[]", r.stdout + r.stderr


@pytest.mark.parametrize("argv", [["list"], ["import", "x.json", "--name", "n"], ["show"], ["export", "-o", "-"]])
def test_envelope_db_that_is_a_folder(tmp_path, argv):
    r = sh(os.path.join(BIN, "mtcenvelope"), *argv, "--db", str(tmp_path))
    assert r.returncode == 2
    assert one_line(r.stderr) == f"mtcenvelope {argv[0]}: --db {tmp_path} is a folder, not a database file"


def test_ctrl_c_while_writing_to_a_stalled_reader(traced):
    """Ctrl-C in a subcommand: one line, exit 130, and no hang on the output nobody reads."""
    logs, _ = traced
    log = os.path.join(logs, os.listdir(logs)[0])
    p = subprocess.Popen([MTCPROF, "dump", log], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(1) == b"{"
    time.sleep(0.5)                 # the dump (MiBs of op lines) fills the pipe and blocks in write()
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=20) == 130
    assert p.stderr.read() == b"mtcprof dump: interrupted\n"


def test_dash_output_is_stdout(traced, tmp_path):
    _, db = traced
    for sub, first in (("model", "# mtcio workflow model"), ("export", '{"traceEvents":')):
        r = sh(MTCPROF, sub, "--db", str(db), "--run", "R", "-o", "-", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(first) and os.listdir(tmp_path) == []
