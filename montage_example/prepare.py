"""Lay out a Montage workflow folder: the tiles under raw/, the Rakefile, concat_fits.py and overlaps.txt.

    python -m montage_example.prepare FOLDER --preset tiny|demo|paper [--tiles K] [--size WxH]
    prepare(folder, preset="demo", **sky_overrides) -> list of overlap pairs

overlaps.txt is planned before the run, as Montage's mDAG does for Pegasus: mImgtbl + mOverlaps on the raw
tiles (same footprints as the projected ones on this small field), here in a private temporary folder.  The
traced run's own mOverlaps is checked against it by the concatFit task.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

try:
    from . import sky as skymod
except ImportError:                      # run as a script
    import sky as skymod

HERE = os.path.dirname(os.path.abspath(__file__))
WORKFLOW_FILES = ("Rakefile", "concat_fits.py")


class PrepareError(Exception):
    pass


def _run(argv, cwd):
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0 or 'stat="OK"' not in r.stdout:
        raise PrepareError(f"{argv[0]} failed: {(r.stdout + r.stderr).strip()}")
    return r.stdout


def plan_overlaps(raw_dir: str) -> list[tuple[str, str]]:
    """(plus, minus) tile stems of every overlap, as mOverlaps finds them."""
    with tempfile.TemporaryDirectory(prefix="mtcmontage.") as tmp:
        _run(["mImgtbl", os.path.abspath(raw_dir), "images.tbl"], tmp)
        _run(["mOverlaps", "images.tbl", "diffs.tbl"], tmp)
        pairs = []
        with open(os.path.join(tmp, "diffs.tbl")) as fh:
            for line in fh:
                if line.startswith(("|", "\\")) or not line.strip():
                    continue
                w = line.split()
                pairs.append(tuple(sorted((os.path.basename(w[2])[:-5], os.path.basename(w[3])[:-5]))))
    return sorted(pairs)


def install(folder: str, pairs) -> None:
    for f in WORKFLOW_FILES:
        shutil.copy(os.path.join(HERE, "workflow", f), os.path.join(folder, f))
    with open(os.path.join(folder, "overlaps.txt"), "w") as fh:
        fh.writelines(f"{a} {b}\n" for a, b in pairs)


def prepare(folder: str, preset: str = "demo", **over) -> list[tuple[str, str]]:
    kw = dict(skymod.PRESETS[preset])
    kw.update({k: v for k, v in over.items() if v is not None})
    skymod.make_sky(os.path.join(folder, "raw"), **kw)
    pairs = plan_overlaps(os.path.join(folder, "raw"))
    install(folder, pairs)
    return pairs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="montage_example.prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--preset", choices=sorted(skymod.PRESETS), default="demo")
    p.add_argument("--tiles", type=int)
    p.add_argument("--size")
    a = p.parse_args(argv)
    over = {"tiles": a.tiles}
    if a.size:
        try:
            over["width"], over["height"] = skymod.parse_tile_size(a.size)
        except ValueError:
            p.error(f"--size must be WIDTHxHEIGHT, got {a.size!r}")
    try:
        pairs = prepare(a.folder, a.preset, **over)
    except (OSError, PrepareError) as e:
        print(f"montage_example.prepare: {e}", file=sys.stderr)
        return 1
    print(f"{a.folder}: {len(os.listdir(os.path.join(a.folder, 'raw')))} tiles, {len(pairs)} overlaps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
