"""The Montage workflow model, parameterised by tiles and hosts: the YAML `mtcpredict` reads, before any run.

    python -m montage_example.montage_model --tiles 64 --hosts 4 [--width 512 --height 1024] [--procs 2]
        [--placement paper|data] -o montage-64x4.yaml
    model(tiles=64, hosts=4, ...) -> dict (schema: db/workflow_model.py)

montage.yaml beside it is the paper's 955-image case written by hand; this writes the same fields for the
Rakefile in workflow/ on the synthetic sky of sky.py (K tiles of W x H float32 on a near-square grid
overlapping by 20 %), one stage per Rakefile stage, so a prediction can be made for any size and compared
with `mtcprof model` of a traced run.  How each field is derived:

  tasks            mProjectPP, mBackground: K; mDiff, mFitplane: the grid's overlaps (left-right, up-down and
                   both diagonals: (c-1)r + c(r-1) + 2(c-1)(r-1) for c x r tiles); the other stages: 1 (mImgtbl
                   is three stages, the raw, projected and corrected tables)
  hosts            min(C, tasks)
  procs_per_host   --procs (the plugin's slots per host)
  read / write     bytes from the tile size S = 4 W H: mProjectPP reads S and writes an image and an area
                   file of 2 S each (double precision); mDiff reads two such pairs and writes its difference
                   and area over the overlap (0.2 x 2 S each, diagonals 0.04 x 2 S); mBackground reads an image
                   pair and writes one; mAdd reads every corrected pair and writes the mosaic and its area
                   (~(1 + 0.8 (c - 1)) (1 + 0.8 (r - 1)) x 2 S each); mShrink reads the mosaic, writes it / 4
  alpha            --placement paper: the paper's 94 % (mProjectPP), 62 % (mDiff), 63 % (mBackground);
                   --placement data: 1.0 for mProjectPP and mBackground (placed with their data), 0.5 for
                   mDiff (its two images often sit on two hosts); single tasks: 1 / C of their inputs local
  shared           the template header (~300 B) read by every mProjectPP and mDiff task; the image table and
                   corrections read by every mBackground task (~ 600 B per tile)
  metadata         opens + stats per task as the traced runs of this Rakefile show (small: ~3 per file)
"""
from __future__ import annotations

import argparse
import math
import sys

PAPER_ALPHA = {"mProjectPP": 0.94, "mDiff": 0.62, "mBackground": 0.63}
HDR = 300


def overlaps(tiles: int) -> tuple[int, int]:
    """(side, diagonal) overlapping pairs on the sky's grid (sky.grid_shape), the last row possibly short."""
    cols = math.ceil(math.sqrt(tiles))
    pos = [(i % cols, i // cols) for i in range(tiles)]
    side = diag = 0
    for i, (a, b) in enumerate(pos):
        for (c, d) in pos[i + 1:]:
            if abs(a - c) <= 1 and abs(b - d) <= 1:
                if a != c and b != d:
                    diag += 1
                else:
                    side += 1
    return side, diag


def _d(v):
    v = int(round(v))
    return {"min": v, "mean": v, "max": v}


def _stage(name, tasks, hosts, procs, read_bytes, read_files, write_bytes, write_files, alpha, shared=(0, 0),
           meta=3.0):
    files = max(read_files, 1)
    hosts = min(hosts, tasks)
    return {
        "name": name, "tasks": tasks, "hosts": hosts, "procs_per_host": min(procs, math.ceil(tasks / hosts)),
        "read": {"bytes_per_task": _d(read_bytes), "files_per_task": float(read_files),
                 "file_size": _d(read_bytes / files), "alpha": round(alpha, 3), "reread_factor": 1.0},
        "shared": {"files": shared[0], "bytes": int(shared[1]), "bytes_read_per_task": float(shared[1])},
        "write": {"bytes_per_task": _d(write_bytes), "files_per_task": float(write_files),
                  "file_size": _d(write_bytes / max(write_files, 1))},
        "metadata": {"ops_per_task": float(meta * max(read_files + write_files, 1)),
                     "creates_per_task": float(write_files)},
    }


def model(tiles: int, hosts: int, width: int = 512, height: int = 1024, procs: int = 1,
          placement: str = "paper") -> dict:
    if tiles < 2 or hosts < 1 or width < 8 or height < 8 or procs < 1:
        raise ValueError("need tiles >= 2, hosts >= 1, procs >= 1 and tiles of at least 8 x 8 pixels")
    K, C, P = tiles, hosts, procs
    S = 4 * width * height                               # a raw tile (float32)
    proj = 2 * S                                         # one projected image or area file (double)
    cols = math.ceil(math.sqrt(K))
    rows = math.ceil(K / cols)
    side, diag = overlaps(K)
    nov = side + diag
    diff = proj * (0.2 * side + 0.04 * diag) / nov      # a difference image covers the overlap only
    mosaic = (1 + 0.8 * (cols - 1)) * (1 + 0.8 * (rows - 1)) * proj
    a = dict(PAPER_ALPHA) if placement == "paper" else {"mProjectPP": 1.0, "mDiff": 0.5, "mBackground": 1.0}
    one = 1.0 / C
    tbl = 600 * K
    st = [
        _stage("mImgtbl-raw", 1, C, P, 2880 * K, K, tbl, 1, one),
        _stage("mMakeHdr", 1, C, P, tbl, 1, HDR, 1, 1.0),
        _stage("mProjectPP", K, C, P, S, 1, 2 * proj, 2, a["mProjectPP"], (1, HDR)),
        _stage("mImgtbl-proj", 1, C, P, 2880 * K, K, tbl, 1, one),
        _stage("mOverlaps", 1, C, P, tbl, 1, 100 * nov, 1, 1.0),
        _stage("mDiff", nov, C, P, 4 * proj, 4, 2 * diff, 2, a["mDiff"], (1, HDR)),
        _stage("mFitplane", nov, C, P, diff, 1, 400, 1, 1.0),
        _stage("concatFit", 1, C, P, 400 * nov + tbl, nov + 1, 200 * nov, 1, one),
        _stage("mBgModel", 1, C, P, tbl + 200 * nov, 2, 60 * K, 1, 1.0),
        _stage("mBackground", K, C, P, 2 * proj, 2, 2 * proj, 2, a["mBackground"], (2, tbl + 60 * K)),
        _stage("mImgtbl-corr", 1, C, P, 2880 * K, K, tbl, 1, one),
        _stage("mAdd", 1, C, P, 2 * proj * K, 2 * K, 2 * mosaic, 2, one),
        _stage("mShrink", 1, C, P, mosaic, 1, mosaic / 4, 1, 1.0),
        _stage("mViewer", 1, C, P, mosaic / 4, 1, mosaic / 32, 1, 1.0),
    ]
    return {"mtcio_workflow": 1, "run": None,
            "source": {"note": f"montage_example/montage_model.py --tiles {K} --hosts {C} --width {width} "
                               f"--height {height} --procs {P} --placement {placement}"},
            "stages": st}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="montage_example.montage_model", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiles", type=int, required=True)
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--height", type=int, default=1024)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--placement", choices=("paper", "data"), default="paper")
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args(argv)
    try:
        m = model(a.tiles, a.hosts, a.width, a.height, a.procs, a.placement)
    except ValueError as e:
        print(f"montage_model: {e}", file=sys.stderr)
        return 2
    import yaml
    text = "# Montage workflow model written by montage_example/montage_model.py (fields: its docstring)\n" + \
        yaml.safe_dump(m, sort_keys=False, default_flow_style=None, width=120)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
