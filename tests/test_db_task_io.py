"""Per-task I/O (ingest_tasks.fill_task_io): the streamed sums of one-image tasks and the general (task, file) query
for the others give what the per-task Python sums give, on real shim logs with Gfarm mounts and replica hosts."""
import os
import sqlite3

from mtcio.db import ingest_tasks
from mtcio.db import store

from helpers.tracing import traced
from test_db_ingest import ingest_with_replicas

COLS = ", ".join(ingest_tasks._TASK_IO_COLS)


def test_streamed_task_io_equals_the_sums_task_by_task(tmp_path):
    mnt, logs = tmp_path / "mnt", tmp_path / "logs"
    mnt.mkdir(), logs.mkdir()
    (mnt / "a").write_bytes(b"x" * 100)
    (mnt / "b").write_bytes(b"y" * 30)
    (tmp_path / "plain").write_bytes(b"z" * 7)
    os.symlink(mnt, tmp_path / "mnt2")                     # a second mount point of the same Gfarm folder
    env = {"MTCPROF_GFARM_MOUNTS": f"{mnt}:{tmp_path / 'mnt2'}"}
    runs = [(["cat", f"{mnt}/a", f"{mnt}/b", str(tmp_path / "plain")], "one", "h1"),     # one image
            (["cat", f"{mnt}/a", f"{tmp_path}/mnt2/a"], "twice", "h2"),                  # one image, /a twice
            (["sh", "-c", f"cat {mnt}/b > /dev/null; printf 12345 > {mnt}/c"], "several", "h2")]
    for argv, task, host in runs:
        assert traced(logs, argv, task, "S", "R", MTCPROF_HOST=host, **env).returncode == 0
    db = ingest_with_replicas(tmp_path, logs, "/a h1\n/b h2 h3\n/c h2\n")
    c = sqlite3.connect(db)
    got = {r[0]: r[1:] for r in c.execute(f"SELECT name, n_processes, {COLS} FROM tasks")}
    c.close()
    assert {k: v[0] for k, v in got.items()} == {"one": 1, "twice": 1, "several": 2}
    # bytes_read, files_read, read local / remote bytes and files, unknown bytes, written bytes placed locally
    pick = lambda v: (v[1], v[3], v[5], v[6], v[7], v[8], v[9], v[10])          # noqa: E731
    assert pick(got["one"]) == (137, 3, 100, 30, 1, 1, 7, 0)       # /a local on h1, /b remote, plain unknown
    assert pick(got["twice"]) == (200, 1, 0, 200, 0, 1, 0, 0)      # one Gfarm file by two paths: one file
    assert pick(got["several"])[:2] == (30, 1) and pick(got["several"])[7] == 5
    conn = store.connect(db)
    rid = conn.execute("SELECT id FROM runs").fetchone()[0]
    hosts = {r[0]: r[1] for r in conn.execute("SELECT id, name FROM hosts")}
    conn.execute(f"UPDATE tasks SET ({COLS}) = ({', '.join('0' * len(ingest_tasks._TASK_IO_COLS))})")
    ingest_tasks._task_io_in_python(conn, rid, hosts, "sum")          # the reference: task by task in Python
    assert {r[0]: r[1:] for r in conn.execute(f"SELECT name, n_processes, {COLS} FROM tasks")} == got
    conn.close()
