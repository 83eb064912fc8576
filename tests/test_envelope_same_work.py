"""A driver and the native engine measure a metric with the same work: the same files, the
same number of ops and the same bytes per op (fio, the one external tool Debian packages;
on a local folder: what is compared is the work, not the file system)."""
import os
import shutil
import subprocess

import pytest

from mtcio.envelope import engine as eng
from mtcio.envelope.drivers import get_driver, parse_text
from mtcio.envelope.measure import Sweep

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
