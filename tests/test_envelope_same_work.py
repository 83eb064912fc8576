"""A driver and the native engine measure a metric with the same work: the same files, the
same number of ops and the same bytes per op (fio, the one external tool Debian packages;
on a local folder: what is compared is the work, not the file system)."""
import os
import shutil
import subprocess

import pytest

from mtcio.envelope import engine as eng
from mtcio.envelope.drivers import get_driver, parse_text
from mtcio.envelope.sweep import Sweep

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed "
                                "(make setup installs it)")


def files_of(d):
    return sorted((n, os.path.getsize(os.path.join(d, n))) for n in os.listdir(d))


@pytest.mark.parametrize("size,procs", [(128 << 10, 2), (1 << 20, 3)])
def test_fio_and_the_engine_do_the_same_writes_and_reads(tmp_path, size, procs):
    eng.build()
    k = Sweep().k_for(size)                 # what the sweep gives both (16 at 128 KiB, 2 at 1 MiB)
    fio_dir, nat_dir = tmp_path / "fio", tmp_path / "native"
    fio_dir.mkdir()
    nat_dir.mkdir()
    drv = get_driver("fio")
    points = {}
    for metric in ("TL", "T1L"):
        cp = subprocess.run(drv.command(metric, size, procs, str(fio_dir), files_per_proc=k),
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr
        points[metric] = {p.metric: p for p in parse_text(cp.stdout, {"source": metric}, "fio")}
    runs = {}
    for op in ("write", "read"):
        argv = eng.engine_argv(op, path=f"{nat_dir}/f{{lrank}}_{{i}}", procs=procs,
                               files_per_proc=k, size=size, block=min(size, 1 << 20))
        runs[op] = eng.run_engine(argv)
        assert runs[op].returncode == 0, runs[op].stderr
    # the same files: procs x k files of size bytes each
    fio_files, nat_files = files_of(fio_dir), files_of(nat_dir)
    assert len(fio_files) == len(nat_files) == procs * k
    assert {s for _, s in fio_files} == {s for _, s in nat_files} == {size}
    for (metric, op) in (("TL", "write"), ("T1L", "read")):
        t = points[metric][metric]
        b = points[metric]["B" + metric[1:]]
        recs = runs[op].records
        # the same ops: one per file, every byte of it, files_per_proc files per process
        assert t.config["ops"] == len(recs) == procs * k
        assert t.config["files_per_proc"] == k
        assert len({r.path for r in recs}) == procs * k
        assert t.config["bytes_per_op"] == size and {r.bytes for r in recs} == {size}
        assert t.config["io_bytes"] == sum(r.bytes for r in recs) == procs * k * size
        assert b.value == pytest.approx(t.value * size, rel=1e-12)
        # and the engine's points say the same about themselves
        (nt, nb) = eng.points_from_runs(metric, [runs[op]], file_size=size,
                                        procs_per_host=procs, hosts=1, repeat=0)
        assert nt.config["ops"] == t.config["ops"] and nt.metric == t.metric


@pytest.mark.testbed
def test_fio_sweep_and_native_sweep_rest_on_the_same_work(testbed, tmp_path):
    """`measure --tool fio` and the native sweep on the 4-host testbed: for every metric the
    same files per process, ops and bytes per op (fio per host, summed over hosts)."""
    import sys
    from mtcio.envelope.export import load
    db = tmp_path / "w.db"
    args = ["--db", db, "--sizes", "128k", "--procs", "2", "--repeat", "1", "--quiet",
            "--metrics", "TL,BL,T1L,B1L,T1R,B1R,TN,BN"]
    for name, extra in (("fio", ["--tool", "fio"]), ("native", ["--precision", "0"])):
        cp = subprocess.run([sys.executable, "-m", "mtcio.envelope.cli", "measure", "--name",
                             name, *map(str, args), *extra], capture_output=True, text=True,
                            timeout=300)
        assert cp.returncode == 0, cp.stderr[-2000:]
    fio, nat = load(db, "fio"), load(db, "native")
    assert fio["ok"].all() and nat["ok"].all()
    assert sorted(fio["metric"]) == sorted(nat["metric"]) and len(fio) == 8
    for m in ("TL", "BL", "T1L", "B1L", "T1R", "B1R", "TN", "BN"):
        f = fio[fio.metric == m].iloc[0]
        n = nat[nat.metric == m].iloc[0]
        work = ("files_per_proc", "ops", "bytes_per_op")
        assert [f.config[c] for c in work] == [n.config[c] for c in work], m
        assert (f.file_size, f.procs_per_host, f.hosts) == (n.file_size, n.procs_per_host, 4)
    t = nat[nat.metric == "TL"].iloc[0].config
    assert (t["files_per_proc"], t["ops"], t["bytes_per_op"]) == (16, 16 * 2 * 4, 128 << 10)
    assert nat[nat.metric == "TN"].iloc[0].config["files_per_proc"] == 1
