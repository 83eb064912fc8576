"""Ingest on the real Gfarm testbed: three tasks on three hosts read one shared file and one own file each (one of
the own files lives on a fourth host, so that task's 1-to-1 read is remote); the classes, alpha per task and the
outputs' hosts come out exactly as arranged.  alpha is cross-checked independently with gfwhere and each task's
hostname (gfarm2fs's profile counters cannot: with the testbed's `direct_local_access disable` libgfarm counts
every read as remote)."""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from mtcio.db.api import Store
from mtcio.preload.testing import LIB, ensure_built

pytestmark = pytest.mark.testbed
MTCBED = [sys.executable, "-m", "mtcio.testbed.cli"]


def test_three_tasks_locality_and_classes(testbed, tmp_path):
    ensure_built()
    h1, h2, h3, h4 = testbed.hosts[:4]
    share = tempfile.mkdtemp(prefix="mtcdb-bed.")
    try:
        os.chmod(share, 0o755)
        lib = os.path.join(share, "libmtcprof.so")
        shutil.copy(LIB, lib)
        os.chmod(lib, 0o755)
        logdir = os.path.join(share, "logs")
        os.mkdir(logdir)
        os.chmod(logdir, 0o1777)
        top = f"/mtcdb-{os.getpid()}"
        testbed.exec(h1, ["mkdir", "-p", testbed.mount(h1) + top])
        sizes = {"shared": 300_000, "own1": 100_000, "own2": 120_000, "own3": 140_000}
        placed = {"shared": h1, "own1": h1, "own2": h2, "own3": h4}      # own3 is NOT on t3's host h3
        for name, host in placed.items():
            testbed.exec(host, ["sh", "-c", f"head -c {sizes[name]} /dev/urandom > {testbed.mount(host)}{top}/{name}"])
        for name, host in placed.items():
            assert testbed.where(f"{top}/{name}") == [host], name
        tasks = {"t1": (h1, "own1"), "t2": (h2, "own2"), "t3": (h3, "own3")}
        for t, (host, own) in tasks.items():
            m = testbed.mount(host) + top
            cmd = f"cat {m}/shared > /dev/null && cat {m}/{own} > {m}/out-{t}"
            testbed.exec(host, ["env", f"LD_PRELOAD={lib}", f"MTCPROF_DIR={logdir}", f"MTCPROF_TASK={t}",
                                "MTCPROF_STAGE=read3", "MTCPROF_RUN=bed", "sh", "-c", cmd])
        db = tmp_path / "bed.db"
        r = subprocess.run([*MTCBED[:1], "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())",
                            "ingest", logdir, "--db", str(db),
                            "--gfwhere-cmd", " ".join(MTCBED + ["exec", h1, "--", "gfwhere"])],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "warning" not in r.stderr, r.stderr

        s = Store(db)
        files = s.files("bed")
        g = files[files["gfarm_path"].notna()]
        # the same Gfarm file read through three hosts' mounts: three trace paths, one Gfarm path
        assert sorted(g[g["gfarm_path"] == f"{top}/shared"]["path"]) == \
            sorted(testbed.mount(h) + f"{top}/shared" for h in (h1, h2, h3))
        for _, f in g.iterrows():
            name = f["gfarm_path"].rsplit("/", 1)[1]
            expect = placed.get(name) or tasks[name[4:]][0]                # out-tN lands on tN's host
            assert f["replica_hosts"] == [expect], f["path"]
            assert f["size"] == sizes.get(name, sizes.get(tasks.get(name[4:], ("", ""))[1])), f["path"]

        tf = s.task_files("bed")
        reads = tf[tf["read"]]
        cls = {(r.task, r.key.rsplit("/", 1)[1]): r.read_class for r in reads.itertuples()}
        assert cls == {("t1", "shared"): "N-1", ("t2", "shared"): "N-1", ("t3", "shared"): "N-1",
                       ("t1", "own1"): "1-1", ("t2", "own2"): "1-1", ("t3", "own3"): "1-1"}
        t = s.tasks("bed").set_index("name")
        assert [t.loc[x, "host"] for x in ("t1", "t2", "t3")] == [h1, h2, h3]
        assert [t.loc[x, "alpha"] for x in ("t1", "t2", "t3")] == [1.0, 1.0, 0.0]
        # independent cross-check: gfwhere + the hostname each task really ran on
        for x, (host, own) in tasks.items():
            uname = testbed.exec(host, ["uname", "-n"]).stdout.strip()
            local_own = uname in testbed.where(f"{top}/{own}")
            local_shared = uname in testbed.where(f"{top}/shared")
            assert t.loc[x, "alpha"] == (1.0 if local_own else 0.0)
            exp_local = sizes[own] * local_own + sizes["shared"] * local_shared
            assert t.loc[x, "bytes_read_local"] == exp_local
            assert t.loc[x, "bytes_read_remote"] == sizes[own] + sizes["shared"] - exp_local
            assert t.loc[x, "bytes_written"] == sizes[own] == t.loc[x, "bytes_written_local"]
        st = s.stages("bed").set_index("stage").loc["read3"]
        assert (st["tasks"], st["hosts"], st["read_Nto1_files"], st["read_1to1_files"]) == (3, 3, 1, 3)
        assert st["shared_size"] == sizes["shared"]
        assert st["alpha"] == pytest.approx((sizes["own1"] + sizes["own2"]) / (sizes["own1"] + sizes["own2"] +
                                                                               sizes["own3"]))
        assert st["alpha_files"] == pytest.approx(2 / 3)
        assert st["alpha_shared"] == pytest.approx(1 / 3)
        assert st["write_local"] == 1.0
        loc = s.locality("bed", by="host").set_index("host")
        assert loc.loc[h1, "alpha"] == 1.0 and loc.loc[h3, "alpha"] == 0.0
        # the workflow model of the stage (Gfarm files only: the shell's own files stay out)
        from mtcio.db.model import build
        m = build(s, "bed").stage("read3")
        assert (m.tasks, m.hosts, m.shared.files, m.shared.bytes) == (3, 3, 1, sizes["shared"])
        assert m.read.bytes_per_task.min == sizes["own1"] and m.read.bytes_per_task.max == sizes["own3"]
        assert m.read.alpha == pytest.approx(st["alpha"]) and m.read.reread_factor == 1.0
        assert m.write.local_fraction == 1.0 and m.write.files_per_task == 1.0
    finally:
        try:
            testbed.exec(h1, ["rm", "-rf", testbed.mount(h1) + f"/mtcdb-{os.getpid()}"], check=False)
        finally:
            shutil.rmtree(share, ignore_errors=True)
