"""Processes traced by the real shim, and a small traced run."""
import os

from mtcio.preload.testing import run


def traced(logdir, argv, task=None, stage=None, run_label=None, **extra):
    env = {k: v for k, v in (("MTCPROF_TASK", task), ("MTCPROF_STAGE", stage), ("MTCPROF_RUN", run_label))
           if v is not None}
    env.update(extra)
    r = run(argv, str(logdir), env_extra=env)
    return r


def quiet(*a, **k):
    pass


def make_run(tmp_path):
    """Two tasks of stage S1, one of S2, shell pipelines and redirections."""
    d, logs = tmp_path / "d", tmp_path / "logs"
    d.mkdir(), logs.mkdir()
    (d / "in").write_bytes(b"hello world\n")            # 12 bytes
    (d / "in2").write_bytes(os.urandom(5000))
    sh = lambda c: ["sh", "-c", c]                      # noqa: E731
    assert traced(logs, sh(f"cd {d} && cat in > out; cat in2 | wc -c > out2; cat in in2 > /dev/null"),
                  "t1", "S1", "R").returncode == 0
    assert traced(logs, sh(f"cat {d}/in2 > {d}/out3"), "t2", "S1", "R").returncode == 0
    assert traced(logs, sh(f"cat {d}/out3 {d}/out > {d}/final"), "t3", "S2", "R").returncode == 0
    return d, logs
