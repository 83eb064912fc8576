"""concatFit: the fit concatenation step (Montage's mConcatFit is not in Debian's build).

    python3 concat_fits.py proj.tbl diffs.tbl FITS_DIR fits.tbl

Reads each overlap's mFitplane status line (FITS_DIR/fit.<plus>.<minus>.txt) and writes the IPAC table
mBgModel reads, numbering the images by proj.tbl's cntr column.  Fails when mOverlaps (diffs.tbl) found
other overlaps than the ones the workflow planned.  Standard library only: it runs on every host.
"""
import os
import re
import sys

COLS = [("plus", "int", 7), ("minus", "int", 7), ("a", "double", 16), ("b", "double", 16), ("c", "double", 16),
        ("crpix1", "double", 13), ("crpix2", "double", 13), ("xmin", "int", 10), ("xmax", "int", 10),
        ("ymin", "int", 10), ("ymax", "int", 10), ("xcenter", "double", 13), ("ycenter", "double", 13),
        ("npixel", "double", 13), ("rms", "double", 16), ("boxx", "double", 16), ("boxy", "double", 16),
        ("boxwidth", "double", 16), ("boxheight", "double", 16), ("boxang", "double", 16)]


def table_rows(path):
    """Rows of an IPAC table as dicts; columns lie between the header's '|' marks (some cells are blank)."""
    cuts, names, rows = None, None, []
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("\\"):
                continue
            if line.startswith("|"):
                if names is None:
                    cuts = [i for i, ch in enumerate(line) if ch == "|"]
                    names = [line[a + 1:b].strip() for a, b in zip(cuts, cuts[1:])]
                continue
            if line.strip():
                ends = cuts[1:-1] + [max(len(line), cuts[-1])]
                rows.append({n: line[a:b + 1].strip() for n, a, b in zip(names, [0] + cuts[1:-1], ends)})
    return rows


def main(proj_tbl, diffs_tbl, fits_dir, out):
    images = {r["fname"]: int(r["cntr"]) for r in table_rows(proj_tbl)}
    want = sorted(f for f in os.listdir(fits_dir) if f.startswith("fit.") and f.endswith(".txt"))
    pairs = [f[len("fit."):-len(".txt")].split(".") for f in want]      # fit.<plus>.<minus>.txt, file stems
    planned = {tuple(sorted((a + ".fits", b + ".fits"))) for a, b in pairs}
    found = {tuple(sorted((r["plus"], r["minus"]))) for r in table_rows(diffs_tbl)}
    if found != planned:
        sys.exit(f"concat_fits: mOverlaps found {len(found)} overlaps, the workflow planned {len(planned)}: "
                 f"missing {sorted(found - planned)}, extra {sorted(planned - found)}")
    head = "|" + "|".join(f"{n:>{w}}" for n, _, w in COLS) + "|\n"
    kinds = "|" + "|".join(f"{k:>{w}}" for _, k, w in COLS) + "|\n"
    lines = [head, kinds]
    for f, (a, b) in zip(want, pairs):
        with open(os.path.join(fits_dir, f)) as fh:
            status = fh.read()
        if 'stat="OK"' not in status:
            sys.exit(f"concat_fits: {f}: mFitplane failed: {status.strip()}")
        vals = dict(re.findall(r"(\w+)=([-+0-9.eE]+|\"[^\"]*\")", status))
        vals["plus"], vals["minus"] = images[a + ".fits"], images[b + ".fits"]
        cells = []
        for n, kind, w in COLS:
            v = float(vals[n])
            cells.append(f"{int(round(v)):>{w}d}" if kind == "int" else f"{v:>{w}.6e}")
        lines.append(" " + " ".join(cells) + " \n")
    with open(out, "w") as fh:
        fh.writelines(lines)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    main(*sys.argv[1:])
