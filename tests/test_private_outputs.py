"""Every file an mtcio command writes is 0600 and every folder it creates 0700, whatever the umask (traces and
envelopes name users' paths): `mtcenvelope export` and `plot`, the folders `mtcprof run --dir` and
`mtcpredict --out` create, parents included, and the helpers they share."""
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mtcio.private import private_dir, write_private

ROOT = Path(__file__).resolve().parent.parent
IOR = ROOT / "tests" / "fixtures" / "ior" / "ior-gfarm-fpp-t1m-np2.json"
ENVELOPE = [sys.executable, "-m", "mtcio.envelope.cli"]
MTCPROF = [sys.executable, "-c", "import sys; from mtcio.cli import mtcprof; sys.exit(mtcprof())"]
MTCPREDICT = [sys.executable, "-c", "import sys; from mtcio.cli import mtcpredict; sys.exit(mtcpredict())"]
MONTAGE = ROOT / "montage_example" / "montage.yaml"
UMASKS = [0o000, 0o022]


def mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def under_umask(umask, argv, **kw):
    cp = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                        preexec_fn=lambda: os.umask(umask), **kw)
    assert cp.returncode == 0, cp.stderr
    return cp


@pytest.fixture
def envelope_db(tmp_path):
    db = tmp_path / "e.db"
    under_umask(0o000, [*ENVELOPE, "import", IOR, "--db", db, "--name", "r", "--metric", "T1L"])
    assert os.listdir(tmp_path) == ["e.db"] and mode(db) == 0o600
    return db


@pytest.mark.parametrize("umask", UMASKS)
@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_export_file_is_0600(tmp_path, envelope_db, umask, fmt):
    out = tmp_path / f"r.{fmt}"
    under_umask(umask, [*ENVELOPE, "export", "--db", envelope_db, "--format", fmt, "-o", out])
    # and SQLite's files beside the db that export opened (they take the db's mode)
    assert {mode(out), *(mode(tmp_path / n) for n in os.listdir(tmp_path) if n.startswith("e.db"))} == {0o600}
    out.chmod(0o644)                                   # an existing output is replaced by a private one
    under_umask(umask, [*ENVELOPE, "export", "--db", envelope_db, "--format", fmt, "-o", out])
    assert mode(out) == 0o600
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []     # no temp file left


@pytest.mark.parametrize("umask", UMASKS)
def test_plot_folder_0700_its_parents_too_and_files_0600(tmp_path, envelope_db, umask):
    fig = tmp_path / "new" / "fig"
    under_umask(umask, [*ENVELOPE, "plot", "--db", envelope_db, "--name", "r", "-o", fig])
    assert (mode(tmp_path / "new"), mode(fig)) == (0o700, 0o700)
    names = sorted(os.listdir(fig))
    assert names == ["B1L.png", "BL.png", "T1L.png", "TL.png", "index.html"]
    assert {n: mode(fig / n) for n in names} == {n: 0o600 for n in names}
    assert (fig / "T1L.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("umask", UMASKS)
def test_mtcprof_run_log_folder_and_parents_0700(tmp_path, umask):
    logs = tmp_path / "a" / "L"
    under_umask(umask, [*MTCPROF, "run", "--dir", logs, "--", "true"])
    assert (mode(tmp_path / "a"), mode(logs)) == (0o700, 0o700)
    assert [mode(logs / n) for n in os.listdir(logs)] == [0o600]


def test_mtcpredict_out_folder_and_parents_0700(tmp_path):
    out = tmp_path / "a" / "p"
    under_umask(0o000, [*MTCPREDICT, MONTAGE, "--bootstrap", "0", "--out", out])
    assert (mode(tmp_path / "a"), mode(out)) == (0o700, 0o700)
    assert {mode(out / n) for n in os.listdir(out)} == {0o600}


def test_helpers_are_exact_even_under_a_umask_that_takes_owner_bits(tmp_path):
    old = os.umask(0o277)
    try:
        private_dir(tmp_path / "x" / "y")
        write_private(tmp_path / "x" / "y" / "f", "é")
    finally:
        os.umask(old)
    assert (mode(tmp_path / "x"), mode(tmp_path / "x" / "y"), mode(tmp_path / "x" / "y" / "f")) == \
        (0o700, 0o700, 0o600)
    assert (tmp_path / "x" / "y" / "f").read_bytes() == "é".encode()
    kept = tmp_path / "kept"                           # an existing folder is the user's: left as it is
    kept.mkdir(mode=0o755)
    kept.chmod(0o755)
    private_dir(kept)
    assert mode(kept) == 0o755
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError):
        private_dir(tmp_path / "file")
    with pytest.raises(NotADirectoryError):
        private_dir(tmp_path / "file" / "sub")
