"""The per-host shell the envelope harness drives: one command's exit code, stdout and stderr
apart from the next one's, and no file left behind however the shell ends."""
import os

from mtcio.envelope.agent import Agent, run_many


def local_agent(tmp_path):
    return Agent("local", [], env={**os.environ, "TMPDIR": str(tmp_path)})


def test_each_command_gets_its_own_exit_code_and_stderr(tmp_path):
    a = local_agent(tmp_path)
    try:
        r1 = a.run(["sh", "-c", "echo out1; echo err1 >&2; exit 3"], 10)
        r2 = a.run(["true"], 10)
        r3 = a.run("echo x; echo y >&2; echo z >&2", 10)
        r4 = a.run(["sh", "-c", "ls /proc/self/fd"], 10)
    finally:
        a.close()
    assert (r1.rc, r1.stdout, r1.stderr) == (3, "out1\n", "err1")
    assert (r2.rc, r2.stdout, r2.stderr) == (0, "", "")
    assert (r3.rc, r3.stdout, r3.stderr) == (0, "x\n", "y\nz")
    assert sorted(r4.stdout.split()) == ["0", "1", "2", "3"]     # the shell's own fds not inherited


def test_no_file_left_after_close_kill_or_timeout(tmp_path):
    closed, killed, late = (local_agent(tmp_path) for _ in range(3))
    closed.run(["true"], 10)
    killed.run(["true"], 10)
    assert len(os.listdir(tmp_path)) == 0          # unlinked while the shells still run
    closed.close()
    killed.kill()
    r = run_many([(late, ["sleep", "30"])], 0.5)[0]
    assert r.rc is None and "killed" in r.stderr
    assert os.listdir(tmp_path) == []
