"""Parsers of IOR (text + JSON), mdtest, fio and iozone outputs -> envelope points.

Expected numbers are copied by hand from the fixture files (see the comments) and converted
with the exact unit factors: IOR MiB/s x 2^20, iozone KB/s x 1024.
"""
import json
import math
from pathlib import Path

import pytest

from mtcio.envelope.drivers import DRIVERS, get_driver, parse_file, parse_text
from mtcio.envelope.points import (UNITS, NoEnvelopeMetric, ParseError, Point,
                                   TruncatedOutput, UnknownFormat)

FIX = Path(__file__).parent / "fixtures"
MiB = 2 ** 20
IOR = FIX / "ior"


def one(points, metric, repeat, **kw):
    sel = [p for p in points if p.metric == metric and p.repeat == repeat
           and all(getattr(p, k) == v for k, v in kw.items())]
    assert len(sel) == 1, (metric, repeat, kw, sel)
    return sel[0]


# ------------------------------------------------------------------ every fixture parses
OUTPUTS = sorted(p for d in ("ior", "mdtest", "fio", "iozone") for p in (FIX / d).glob("*")
                 if p.suffix in (".txt", ".json") and not p.name.endswith(".json.stdout.txt"))
REFUSED = {"ior-gfarm-shared-t1m-b4m-s4-np4-prewrite.txt", "iozone-auto-s1m.txt"}


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_every_fixture_parses(path):
    if path.name in REFUSED:
        with pytest.raises(NoEnvelopeMetric) as e:
            parse_file(path)
        assert str(path) in str(e.value)
        return
    pts = parse_file(path)
    assert pts
    for p in pts:
        assert isinstance(p, Point) and p.metric in UNITS and p.unit == UNITS[p.metric]
        assert p.file_size > 0 and p.procs_per_host >= 1 and p.hosts >= 1 and p.repeat >= 0
        assert p.tool in DRIVERS and p.config["source"] == str(path)
        json.dumps(p.config)                      # storable
        row = p.to_row()
        assert json.loads(row["config"]) == p.config
        if p.ok:
            assert p.value > 0 and math.isfinite(p.value)
    # every throughput point has its bandwidth twin with B = T x bytes per op
    for p in pts:
        if p.metric in ("T1L", "T1R", "TN", "TNp", "TL") and p.ok:
            b = one(pts, "B" + p.metric[1:], p.repeat, file_size=p.file_size,
                    config=p.config)
            assert b.value > p.value


def test_all_shared_fixture_files_are_here():
    shared = Path(__file__).parents[2] / "shared" / "fixtures"
    if not shared.is_dir():
        pytest.skip("../shared/fixtures not beside the repo")
    for d in ("ior", "mdtest"):
        for f in (shared / d).iterdir():
            assert (FIX / d / f.name).read_bytes() == f.read_bytes(), f.name


# ---------------------------------------------------------------------------------- IOR
def test_ior_text_fpp_1k_np2_by_hand():
    pts = parse_file(IOR / "ior-gfarm-fpp-t1k-np2.txt")
    assert len(pts) == 12                         # 3 iterations x (TL, BL, T1L, B1L)
    # "write     0.185604   704.69 ... 2" (iteration 2)
    bl = one(pts, "BL", 2)
    assert bl.value == pytest.approx(0.185604 * MiB, rel=1e-12)
    assert one(pts, "TL", 2).value == pytest.approx(0.185604 * MiB / 1024, rel=1e-12)
    # "write     1.39       2325.65 ... 1"
    assert one(pts, "BL", 1).value == pytest.approx(1.39 * MiB, rel=1e-12)
    # "read      2.38       5797 ... 0": each rank read its own 1 KiB file
    assert one(pts, "B1L", 0).value == pytest.approx(2.38 * MiB, rel=1e-12)
    assert one(pts, "T1L", 0).value == pytest.approx(2.38 * 1024, rel=1e-12)
    p = one(pts, "T1L", 0)
    assert (p.file_size, p.procs_per_host, p.hosts, p.tool, p.tool_version) == \
        (1024, 2, 1, "ior", "4.1.0+dev")
    assert p.unit == "ops/s" and bl.unit == "bytes/s"
    assert p.config["command"].startswith("ior -a Gfarm -F -w -r -t 1k -b 1k -i 3")
    assert "no cache drop" in p.config["cache"]


def test_ior_text_16m_np4_by_hand():
    pts = parse_file(IOR / "ior-gfarm-fpp-t16m-np4.txt")
    # "write     1337.82    85.71 ... 1": 4 ranks x 16 MiB files -> files/s = MiB/s / 16
    assert one(pts, "TL", 1).value == pytest.approx(1337.82 / 16, rel=1e-12)
    assert one(pts, "BL", 1).value == pytest.approx(1337.82 * MiB, rel=1e-12)
    # "read      2427.72    154.33 ... 2"
    assert one(pts, "B1L", 2).value == pytest.approx(2427.72 * MiB, rel=1e-12)
    assert one(pts, "B1L", 2).procs_per_host == 4
    # the IOPS column (transfers over wr/rd time) is not what T counts
    assert one(pts, "T1L", 2).value != pytest.approx(154.33)


def test_ior_text_interleaved_libgfarm_lines_and_shared_file():
    pts = parse_file(IOR / "ior-gfarm-shared-t1m-b4m-s4-np4.txt")
    # N-to-1 write of a shared file is no envelope metric: only the reads remain, and they
    # are partitioned (each rank its 1/N slice), not TN's whole-file reads: TNp/BNp
    assert {p.metric for p in pts} == {"TNp", "BNp"}
    assert sorted(p.repeat for p in pts if p.metric == "TNp") == [0, 1, 2]
    # "read      2891.10    2947.70 ... 2" (after two 'libgfarm: <info>' lines)
    bn = one(pts, "BNp", 2)
    assert bn.value == pytest.approx(2891.10 * MiB, rel=1e-12)
    assert bn.file_size == 64 * MiB               # the shared file; each rank reads 16 MiB
    assert one(pts, "TNp", 2).value == pytest.approx(2891.10 / 16, rel=1e-12)
    assert "partitioned" in bn.config["n_to_1"]
    assert (bn.config["files_per_proc"], bn.config["ops"], bn.config["bytes_per_op"]) == \
        (1, 4, 16 * MiB)
    # the caller's "these are TN reads" cannot turn a partitioned read into TN
    assert {p.metric for p in parse_file(IOR / "ior-gfarm-shared-t1m-b4m-s4-np4.txt",
                                         {"read_metric": "TN"})} == {"TNp", "BNp"}


def test_ior_json_by_hand():
    pts = parse_file(IOR / "ior-gfarm-fpp-t1k-np2.json")
    # Results[]: write 0.1845, read 1.6623, write 0.5434, read 0.4684, write 0.2998, read 0.5078
    for rep, w, r in [(0, 0.1845, 1.6623), (1, 0.5434, 0.4684), (2, 0.2998, 0.5078)]:
        assert one(pts, "BL", rep).value == pytest.approx(w * MiB, rel=1e-12)
        assert one(pts, "TL", rep).value == pytest.approx(w * 1024, rel=1e-12)
        assert one(pts, "B1L", rep).value == pytest.approx(r * MiB, rel=1e-12)
    p = one(pts, "TL", 0)
    assert (p.procs_per_host, p.hosts, p.tool_version, p.config["format"]) == \
        (2, 1, "4.1.0+dev", "json")


def test_ior_json_readonly_shared():
    pts = parse_file(IOR / "ior-gfarm-shared-t1m-b4m-s4-np4-readonly.json")
    doc = json.loads((IOR / "ior-gfarm-shared-t1m-b4m-s4-np4-readonly.json").read_text())
    bws = [r["bwMiB"] for r in doc["tests"][0]["Results"]]
    assert len(bws) == 3
    for rep, bw in enumerate(bws):
        assert one(pts, "BNp", rep).value == pytest.approx(bw * MiB, rel=1e-12)
    assert one(pts, "BNp", 0).config["use_existing_file"] is True


def test_ior_prewrite_raw_results_and_clear_refusal():
    text = (IOR / "ior-gfarm-shared-t1m-b4m-s4-np4-prewrite.txt").read_text()
    with pytest.raises(NoEnvelopeMetric, match="N-to-1 write"):
        get_driver("ior").parse(text, {"source": "prewrite.txt"})
    (r,) = get_driver("ior").results(text)
    # "write     820.57     833.08 ... 0"
    assert r["access"] == "write" and r["bw_bytes"] == pytest.approx(820.57 * MiB)
    assert (r["tasks"], r["block"], r["segments"], r["fpp"]) == (4, 4 * MiB, 4, False)


def test_ior_read_metric_from_context():
    # the orchestrator knows where the replicas were: it says so
    pts = parse_file(IOR / "ior-gfarm-fpp-t1m-np2.txt",
                     {"read_metric": "T1R", "config": {"cache": "dropped"}})
    assert {p.metric for p in pts} == {"TL", "BL", "T1R", "B1R"}
    assert one(pts, "T1R", 0).config["cache"] == "dropped"


def test_ior_json_stdout_file_points_to_summary_file():
    with pytest.raises(ParseError, match=r"ior-gfarm-fpp-t1k-np1\.json"):
        parse_file(IOR / "ior-gfarm-fpp-t1k-np1.json.stdout.txt")


# ------------------------------------------------------------------------------- mdtest
def test_mdtest_three_iterations_recovered_by_hand():
    pts = parse_file(FIX / "mdtest" / "mdtest-gfarm-n200-np1.txt")
    # "File creation  622.227  564.638  598.279  29.993" with -w 1024: create+write+close
    tl = sorted(p.value for p in pts if p.metric == "TL")
    assert tl == pytest.approx(sorted([622.227, 564.638, 3 * 598.279 - 622.227 - 564.638]))
    assert one(pts, "BL", 0).value == pytest.approx(622.227 * 1024)
    assert one(pts, "TL", 0).file_size == 1024
    assert "recovered" in one(pts, "TL", 2).config["statistic"]
    # no -e: the read phase was open/close only -> no read point
    assert {p.metric for p in pts} == {"TL", "BL"}


def test_mdtest_read_rate_with_e():
    pts = parse_file(FIX / "mdtest" / "mdtest-gfarm-n200-e1k-np4.txt")
    # "File read  1919.367  1696.914  1816.329  112.127", -e 1024, 4 tasks on 1 node
    t = sorted(p.value for p in pts if p.metric == "T1L")
    assert t == pytest.approx(sorted([1919.367, 1696.914, 3 * 1816.329 - 1919.367 - 1696.914]))
    p = one(pts, "B1L", 0)
    assert p.value == pytest.approx(1919.367 * 1024)
    assert (p.procs_per_host, p.hosts, p.tool_version) == (4, 1, "4.1.0+dev")


def test_mdtest_create_only_is_tm_and_many_iterations_give_the_mean():
    text = (FIX / "mdtest" / "mdtest-gfarm-n200-np4.txt").read_text()
    text = text.replace("'-w' '1024' ", "").replace("'-i' '3'", "'-i' '5'") \
               .replace("(of 3 iterations)", "(of 5 iterations)")
    pts = parse_text(text, {"source": "edited"})
    (tm,) = pts
    # the run had -u (a directory per task): not Tm's one shared directory, so Tmu
    assert (tm.metric, tm.value, tm.unit, tm.repeat) == ("Tmu", 895.780, "ops/s", 0)
    assert tm.config["statistic"].startswith("mean of 5 iterations")
    assert (tm.config["files_per_proc"], tm.config["ops"]) == (200, 800)
    (tm,) = parse_text(text.replace("'-u' ", ""), {"source": "edited"})
    assert (tm.metric, tm.config["unique_dir"]) == ("Tm", False)


def test_mdtest_inconsistent_summary_is_an_error():
    text = (FIX / "mdtest" / "mdtest-gfarm-n200-np1.txt").read_text()
    text = text.replace("598.279         29.993", "598.279        129.993")
    with pytest.raises(ParseError, match="standard deviation"):
        parse_text(text, {"source": "bad-sd"})


# ---------------------------------------------------------------------------------- fio
def test_fio_by_hand():
    pts = parse_file(FIX / "fio" / "fio-write-1m-nj2.json")
    # write: io_bytes 67108864 in runtime 66 ms (group_reporting, 2 jobs, 1 MiB files)
    bl = one(pts, "BL", 0)
    assert bl.value == pytest.approx(67108864 * 1000 / 66)
    assert one(pts, "TL", 0).value == pytest.approx(67108864 * 1000 / 66 / MiB)
    assert (bl.procs_per_host, bl.file_size, bl.tool_version) == (2, MiB, "3.33")
    sh = parse_file(FIX / "fio" / "fio-read-shared-16m-nj4.json")
    # 4 jobs read the same 16 MiB file: io_bytes 67108864, runtime 12 ms
    assert one(sh, "BN", 0).value == pytest.approx(67108864 * 1000 / 12)
    assert one(sh, "TN", 0).value == pytest.approx(67108864 * 1000 / 12 / (16 * MiB))
    reps = parse_file(FIX / "fio" / "fio-write-128k-nj2-3reps.json")
    # three stonewalled groups of the same job: runtimes 3, 2, 2 ms for 16 MiB each
    assert [p.value for p in reps if p.metric == "BL"] == \
        pytest.approx([16777216 * 1000 / 3, 16777216 * 1000 / 2, 16777216 * 1000 / 2])
    assert [p.repeat for p in reps if p.metric == "BL"] == [0, 1, 2]


# ------------------------------------------------------------------------------- iozone
def test_iozone_by_hand():
    pts = parse_file(FIX / "iozone" / "iozone-t2-s1m-r128k-write-read.txt")
    # "Parent sees throughput for  2 initial writers =  849747.72 KB/sec"
    assert one(pts, "BL", 0).value == pytest.approx(849747.72 * 1024)
    assert one(pts, "TL", 0).value == pytest.approx(849747.72 * 1024 / MiB)
    # "Parent sees throughput for  2 readers = 1858566.79 KB/sec"
    b = one(pts, "B1L", 0)
    assert b.value == pytest.approx(1858566.79 * 1024)
    assert b.config["children_see_bytes_per_s"] == pytest.approx(3636819.50 * 1024)
    assert (b.procs_per_host, b.file_size, b.tool_version) == (2, MiB, "3.414")


def test_iozone_stonewalled_phase_is_a_failed_point():
    pts = parse_file(FIX / "iozone" / "iozone-t4-s16m-r1m-read-stonewalled.txt")
    assert {p.metric for p in pts} == {"T1L", "B1L"}
    assert all(not p.ok and "stonewall" in p.error and p.to_row()["value"] is None
               for p in pts)


# --------------------------------------------------------------------- malformed inputs
def cut(path, frac):
    t = path.read_text()
    return t[: int(len(t) * frac)]


@pytest.mark.parametrize("name,frac", [
    ("ior/ior-gfarm-fpp-t1k-np2.txt", 0.3),       # stops in the Options block
    ("ior/ior-gfarm-fpp-t1k-np2.txt", 0.6),       # stops inside the Results table
    ("ior/ior-gfarm-fpp-t1k-np2.txt", 0.9),       # stops inside the summary
    ("ior/ior-gfarm-fpp-t1k-np2.json", 0.5),
    ("ior/ior-gfarm-fpp-t1k-np2.json", 0.97),
    ("mdtest/mdtest-gfarm-n200-np2.txt", 0.5),
    ("mdtest/mdtest-gfarm-n200-np2.txt", 0.8),
    ("fio/fio-write-1m-nj2.json", 0.5),
    ("iozone/iozone-t2-s1m-r128k-write-read.txt", 0.8),
])
def test_truncated_outputs_raise_truncated(tmp_path, name, frac):
    f = tmp_path / Path(name).name
    f.write_text(cut(FIX / name, frac))
    with pytest.raises(TruncatedOutput) as e:
        parse_file(f)
    assert str(f) in str(e.value)


def test_missing_iteration_row_is_detected(tmp_path):
    t = (IOR / "ior-gfarm-fpp-t1k-np2.txt").read_text().splitlines(keepends=True)
    t = [ln for ln in t if not ln.startswith("read      2.37 ")]
    f = tmp_path / "ior-missing-row.txt"
    f.write_text("".join(t))
    with pytest.raises(TruncatedOutput, match="2 'read' result rows, but 3"):
        parse_file(f)


@pytest.mark.parametrize("content,exc,match", [
    ("", ParseError, "empty"),
    ("   \n\n", ParseError, "empty"),
    ("hello world\n", UnknownFormat, "not the output of a known tool"),
    ('{"a": 1}', UnknownFormat, "known tool"),
])
def test_empty_and_unknown(tmp_path, content, exc, match):
    f = tmp_path / "x.out"
    f.write_text(content)
    with pytest.raises(exc, match=match) as e:
        parse_file(f)
    assert str(f) in str(e.value)


def test_garbled_numbers(tmp_path):
    t = (FIX / "mdtest" / "mdtest-gfarm-n200-np2.txt").read_text()
    f = tmp_path / "md.txt"
    f.write_text(t.replace("923.734", "9x3.734"))
    with pytest.raises(ParseError, match="File creation"):
        parse_file(f)
    j = json.loads((IOR / "ior-gfarm-fpp-t1k-np2.json").read_text())
    j["tests"][0]["Results"][2]["bwMiB"] = "fast"
    f2 = tmp_path / "ior.json"
    f2.write_text(json.dumps(j))
    with pytest.raises(ParseError, match="bwMiB"):
        parse_file(f2)


def test_missing_file_is_a_parse_error(tmp_path):
    with pytest.raises(ParseError, match="cannot read"):
        parse_file(tmp_path / "nope.txt")


def test_ior_bare_nan_in_json_is_accepted():
    t = (IOR / "ior-gfarm-fpp-t1k-np2.json").read_text()
    t = t.replace('"latency": 0.0098', '"latency": nan', 1)
    pts = parse_text(t, {"source": "nan.json"})
    assert len(pts) == 12


def test_point_validation():
    with pytest.raises(ValueError, match="unknown metric"):
        Point("TX", 1, 1, 1, 1.0, "ops/s", 0, "ior")
    with pytest.raises(ValueError, match="bytes/s"):
        Point("BL", 1, 1, 1, 1.0, "ops/s", 0, "ior")
    with pytest.raises(ValueError, match="reason"):
        Point("BL", 1, 1, 1, math.nan, "bytes/s", 0, "ior", ok=False)
    f = Point.failed("Tm", 0, 2, 1, 0, "native", "gfsd died")
    assert f.to_row()["value"] is None and f.to_row()["ok"] == 0


# ----------------------------------------------------------------------- command lines
def test_ior_commands():
    ior = get_driver("ior")
    tl = ior.command("TL", 1024, 4, "/bench/f", api="Gfarm")
    assert tl[:4] == ["mpirun", "--oversubscribe", "-np", "4"]
    assert tl[4:] == ["ior", "-a", "Gfarm", "-t", "1024", "-b", "1024", "-s", "1", "-i", "1",
                      "-o", "/bench/f", "-F", "-w", "-k"]
    r = ior.command("B1R", 16 * MiB, 8, "/g/f", hosts=2, launcher=None)
    assert r[0] == "ior" and "-C" in r and "-E" in r and "-F" in r and "-r" in r
    assert r[r.index("-t") + 1] == str(MiB)
    with pytest.raises(ValueError, match="2 hosts"):
        ior.command("T1R", MiB, 2, "/g/f", hosts=1)
    with pytest.raises(ValueError, match="ior cannot measure TN"):
        ior.command("TN", 4 * MiB, 4, "/g/shared", launcher=None)   # it reads slices: TNp
    with pytest.raises(ValueError, match="Tm"):
        ior.command("Tm", 0, 1, "/x")


def test_mdtest_fio_iozone_commands():
    md = get_driver("mdtest")
    tm = md.command("Tm", 0, 2, "/bench/d", launcher=None, files_per_proc=50)
    assert tm == ["mdtest", "-a", "POSIX", "-F", "-n", "50", "-i", "1", "-d", "/bench/d",
                  "-C"]                              # one shared directory, as Tm is defined
    assert md.command("T1R", 1024, 4, "/d", hosts=2, launcher=None)[-2:] == ["-N", "2"]
    assert "-S" in md.command("TN", 1024, 4, "/d", launcher=None)
    fio = get_driver("fio").command("BL", MiB, 2, "/mnt/d", repeats=3)
    assert fio.count("--stonewall") == 3 and "--rw=write" in fio
    ioz = get_driver("iozone").command("T1L", 16 * MiB, 2, "/mnt/d/f.{rank}")
    assert ioz[:3] == ["iozone", "-t", "2"] and ioz[-3:] == ["-F", "/mnt/d/f.0", "/mnt/d/f.1"]
