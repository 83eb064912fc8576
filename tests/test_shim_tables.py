"""The shim's in-memory tables under load: one record per path however it is reached, cold parts of many files kept
apart (and fresh in a fork child), and the strings a traced process keeps (task, cwd, log folder, argv)."""
import os
import sys

from mtcio.preload.testing import logs, run

MANY = r"""
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
paths = []
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 40))
    if i < 40:
        os.mkdir(d)
    p = os.path.join(d, "f%d" % i)
    with open(p, "wb") as fh:
        fh.write(b"x" * (i % 7 + 1))
    paths.append(p)
for p in reversed(paths):
    os.stat(p)
random.seed(7)
random.shuffle(paths)
for p in paths:
    with open(p, "rb") as fh:
        fh.read()
d = os.path.dirname(paths[0])
os.stat(d + "/./" + os.path.basename(paths[0]))
os.stat(d + "//" + os.path.basename(paths[0]))
"""


def test_every_path_one_record(tmp_path):
    """18,000 files (more than the 16,384 hash buckets), each created, stat'ed and read back in another order, and
    one of them reached through two more spellings: exactly one record per file with its exact counts."""
    root, logdir = tmp_path / "tree", tmp_path / "logs"
    root.mkdir(), logdir.mkdir()
    n = 18000
    r = run([sys.executable, "-c", MANY, str(root), str(n)], str(logdir))
    assert r.returncode == 0, r.stderr.decode()
    (log,) = logs(str(logdir))
    assert log.complete and log.process["files_dropped"] == 0
    mine = [f for f in log.files if f["path"].startswith(str(root) + "/")]
    files = {f["path"]: f for f in mine if os.path.basename(f["path"]).startswith("f")}
    assert len(files) == n and len(mine) == n + 40          # no path twice; the 40 folders (mkdir) besides
    first = os.path.join(str(root), "d00", "f0")
    for i in range(n):
        p = os.path.join(str(root), "d%02d" % (i % 40), "f%d" % i)
        f = files[p]
        size = i % 7 + 1
        assert (f["opens"], f["creates"], f["closes"], f["writes"], f["bytes_written"], f["bytes_read"]) == \
            (2, 1, 2, 1, size, size), p
        assert f["stats"] >= (3 if p == first else 1), p
        assert f["errors"] == 0 and f["max_offset"] == size, p
    dirs = [f for f in mine if os.path.basename(f["path"]).startswith("d")]
    assert sorted(f["mkdirs"] for f in dirs) == [1] * 40


SAME_SPELLING = r"""
import os, sys
root = sys.argv[1]
os.chdir(os.path.join(root, "a"))
for _ in range(3):
    with open("f", "rb") as fh:
        fh.read()
os.stat("f")
os.chdir("../b")
with open("f", "rb") as fh:
    fh.read()
os.stat("f")
fd = os.open(os.path.join(root, "b", "f"), os.O_RDONLY)
os.close(fd)
fd = os.open(os.path.join(root, "a", "f"), os.O_RDONLY)
os.close(fd)
os.chdir(root)
with open("f", "wb") as fh:
    fh.write(b"z" * 7)
os.stat("f")
"""


def test_one_spelling_in_three_folders(tmp_path):
    """The same relative name opened again and again, then from two other working folders (the shim remembers the
    last name it resolved: a chdir must make it resolve again): each file gets exactly its own opens and bytes."""
    root, logdir = tmp_path / "tree", tmp_path / "logs"
    (root / "a").mkdir(parents=True), (root / "b").mkdir(), logdir.mkdir()
    (root / "a" / "f").write_bytes(b"x" * 3)
    (root / "b" / "f").write_bytes(b"y" * 5)
    r = run([sys.executable, "-c", SAME_SPELLING, str(root)], str(logdir), env_extra={"MTCPROF_INCLUDE": str(root)})
    assert r.returncode == 0, r.stderr.decode()
    (log,) = logs(str(logdir))
    files = {f["path"]: f for f in log.files if os.path.basename(f["path"]) == "f"}
    assert sorted(files) == [str(root / "a" / "f"), str(root / "b" / "f"), str(root / "f")]
    got = {os.path.relpath(p, root): (f["opens"], f["closes"], f["bytes_read"], f["bytes_written"], f["creates"])
           for p, f in files.items()}
    assert got == {"a/f": (4, 4, 9, 0, 0), "b/f": (2, 2, 5, 0, 0), "f": (1, 1, 0, 7, 1)}
    assert all(f["stats"] >= 1 for f in files.values())


COLD = r"""
import os, sys
root = sys.argv[1]
fds = []
for i in range(300):
    fd = os.open(os.path.join(root, "s%d" % i), os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b"abcdef")
    os.lseek(fd, 2, 0)
    os.lseek(fd, 0, 2)
    fds.append(fd)
for i in range(300):
    os.mkdir(os.path.join(root, "m%d" % i))
pid = os.fork()
if pid == 0:
    for fd in fds[:3]:
        os.lseek(fd, 1, 0)
    os.rmdir(os.path.join(root, "m0"))
    os._exit(0)
os.waitpid(pid, 0)
for fd in fds:
    os.close(fd)
"""


def test_cold_counters_per_file_and_fresh_in_fork_child(tmp_path):
    """300 files with seeks and 300 folders made (counters kept in the shared cold parts): each has its own exact
    count; a fork child counts only its own seeks and rmdir, the parent's stay out of its log."""
    root, logdir = tmp_path / "w", tmp_path / "logs"
    root.mkdir(), logdir.mkdir()
    r = run([sys.executable, "-c", COLD, str(root)], str(logdir))
    assert r.returncode == 0, r.stderr.decode()
    by_origin = {lg.process["origin"]: lg for lg in logs(str(logdir))}
    assert sorted(by_origin) == ["exec", "fork"]
    parent, child = by_origin["exec"], by_origin["fork"]
    pf = {os.path.basename(f["path"]): f for f in parent.files if f["path"].startswith(str(root) + "/")}
    for i in range(300):
        s, m = pf["s%d" % i], pf["m%d" % i]
        assert (s["seeks"], s["writes"], s["bytes_written"], s["closes"], s["mkdirs"]) == (2, 1, 6, 1, 0)
        assert (m["mkdirs"], m["seeks"], m["rmdirs"]) == (1, 0, 0)
    cf = {os.path.basename(f["path"]): f for f in child.files if f["path"].startswith(str(root) + "/")}
    assert sorted(cf) == ["m0", "s0", "s1", "s2"]
    assert [cf["s%d" % i]["seeks"] for i in range(3)] == [1, 1, 1]
    assert all(cf["s%d" % i]["writes"] == 0 and cf["s%d" % i]["mkdirs"] == 0 for i in range(3))
    assert (cf["m0"]["rmdirs"], cf["m0"]["mkdirs"]) == (1, 0)


def test_strings_kept_at_start(tmp_path):
    """The strings a traced process keeps: the task cut to 255 bytes, the log folder given relative (with ./ and
    //) normalised against the working directory, a deep working directory, and every argument."""
    deep = tmp_path
    for i in range(30):
        deep = deep / ("level%02d_" % i + "x" * 40)
    deep.mkdir(parents=True)
    (deep / "logs").mkdir()
    args = ["a%d" % i * 3 for i in range(200)]
    r = run([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('z')", str(deep / "out")] + args,
            ".//./logs", env_extra={"MTCPROF_TASK": "t" * 300, "MTCPROF_STAGE": "stage-1"}, cwd=str(deep))
    assert r.returncode == 0, r.stderr.decode()
    (log,) = logs(str(deep / "logs"))
    p = log.process
    assert p["task"] == "t" * 255 and p["stage"] == "stage-1"
    assert p["cwd"] == str(deep) and p["log_dir"] == str(deep / "logs")
    assert p["argv"][-200:] == args and p["argv"][3] == str(deep / "out")
    assert log.file_by_path(str(deep / "out"))["bytes_written"] == 1
