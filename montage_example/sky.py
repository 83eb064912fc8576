"""A synthetic sky for the Montage example: K overlapping FITS tiles with a TAN WCS, stars and a different
background level (a constant plus a small gradient) on each tile.

    python -m montage_example.sky OUT_DIR --preset demo|paper|tiny [--tiles K] [--size WxH]
    make_sky(out_dir, tiles=9, width=256, height=256) -> Sky

The real 2MASS archive cannot be downloaded here, so the tiles are drawn: one star field on the sky (fixed
seed), seen through each tile's own gnomonic (TAN) projection, plus noise.  Tiles sit on a near-square grid
and overlap their neighbours by `overlap` (a fraction of a tile) along both axes, so diagonal neighbours
overlap too.  Written with numpy only (FITS is 2880-byte blocks of 80-character cards and big-endian data).

Presets: `tiny` 4 tiles of 96x96 (tests), `demo` 9 tiles of 256x256 (`make demo`), `paper` 16 tiles of
512x1024 float32 (2 MiB each, as a 2MASS image; mProjectPP writes ~4 MB per tile as in the paper's runs).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

PRESETS = {
    "tiny": dict(tiles=4, width=96, height=96),
    "demo": dict(tiles=9, width=256, height=256),
    "paper": dict(tiles=16, width=512, height=1024),
}
SCALE = 1.0 / 3600          # degrees per pixel (1 arcsec, 2MASS)
RA0, DEC0 = 210.0, 54.0     # field centre (an arbitrary patch of sky)


@dataclass
class Sky:
    folder: str
    tiles: list = field(default_factory=list)         # file names, in grid order
    backgrounds: list = field(default_factory=list)   # each tile's background level


def _card(key: str, value) -> str:
    if isinstance(value, bool):
        v = f"{'T' if value else 'F':>20}"
    elif isinstance(value, str):
        v = f"'{value:<8}'"
    elif isinstance(value, int):
        v = f"{value:>20}"
    else:
        v = f"{value:>20.10G}"
    return f"{key:<8}= {v}"[:80].ljust(80)


def write_fits(path: str, data: np.ndarray, cards: dict) -> None:
    """A primary-HDU FITS file of 32-bit floats (BITPIX -32)."""
    ny, nx = data.shape
    head = [("SIMPLE", True), ("BITPIX", -32), ("NAXIS", 2), ("NAXIS1", nx), ("NAXIS2", ny)] + list(cards.items())
    text = "".join(_card(k, v) for k, v in head) + "END".ljust(80)
    text += " " * (-len(text) % 2880)
    raw = data.astype(">f4").tobytes()
    raw += b"\0" * (-len(raw) % 2880)
    with open(path, "wb") as fh:
        fh.write(text.encode("ascii"))
        fh.write(raw)


def read_fits(path: str) -> tuple[dict, np.ndarray]:
    """(header cards, data) of a FITS primary HDU with BITPIX -32 or -64 (what Montage writes)."""
    with open(path, "rb") as fh:
        blob = fh.read()
    cards, off = {}, 0
    while True:
        block = blob[off:off + 2880].decode("ascii")
        off += 2880
        done = False
        for i in range(0, 2880, 80):
            c = block[i:i + 80]
            if c.startswith("END") and c[3:].strip() == "":
                done = True
                break
            if c[8:10] == "= ":
                v = c[10:].split("/")[0].strip() if "'" not in c[10:] else c[10:].split("'")[1].strip()
                cards[c[:8].strip()] = v
        if done:
            break
    nx, ny, bitpix = int(cards["NAXIS1"]), int(cards["NAXIS2"]), int(cards["BITPIX"])
    dtype = {-32: ">f4", -64: ">f8"}[bitpix]
    data = np.frombuffer(blob, dtype=dtype, count=nx * ny, offset=off).reshape(ny, nx).astype(float)
    return cards, data


def tan_project(ra, dec, ra0, dec0):
    """Gnomonic projection of (ra, dec) about (ra0, dec0): intermediate world coordinates in degrees."""
    r, d, r0, d0 = map(np.radians, (ra, dec, ra0, dec0))
    cosc = np.sin(d0) * np.sin(d) + np.cos(d0) * np.cos(d) * np.cos(r - r0)
    x = np.cos(d) * np.sin(r - r0) / cosc
    y = (np.cos(d0) * np.sin(d) - np.sin(d0) * np.cos(d) * np.cos(r - r0)) / cosc
    return np.degrees(x), np.degrees(y)


def grid_shape(k: int) -> tuple[int, int]:
    cols = math.ceil(math.sqrt(k))
    return cols, math.ceil(k / cols)


def make_sky(folder: str, tiles: int = 9, width: int = 256, height: int = 256, overlap: float = 0.2,
             stars_per_tile: int = 40, seed: int = 14) -> Sky:
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    cols, rows = grid_shape(tiles)
    step_x, step_y = width * (1 - overlap) * SCALE, height * (1 - overlap) * SCALE
    # one star field covering the whole grid (flat-sky offsets are fine at this field size)
    span_x, span_y = step_x * (cols - 1) + width * SCALE, step_y * (rows - 1) + height * SCALE
    n_stars = stars_per_tile * tiles
    sx = rng.uniform(-span_x / 2, span_x / 2, n_stars)
    sy = rng.uniform(-span_y / 2, span_y / 2, n_stars)
    star_dec = DEC0 + sy
    star_ra = RA0 + sx / math.cos(math.radians(DEC0))
    flux = 10 ** rng.uniform(1.5, 3.5, n_stars)
    sigma = 1.5
    sky = Sky(folder)
    yy, xx = np.mgrid[1:height + 1, 1:width + 1].astype(float)   # FITS pixels are 1-based
    for i in range(tiles):
        c, r = i % cols, i // cols
        dx, dy = (c - (cols - 1) / 2) * step_x, (r - (rows - 1) / 2) * step_y
        dec_c = DEC0 + dy
        ra_c = RA0 + dx / math.cos(math.radians(dec_c))
        crpix1, crpix2 = (width + 1) / 2, (height + 1) / 2
        bg = 100.0 + 25.0 * i + rng.uniform(-5, 5)
        img = bg + rng.uniform(-0.01, 0.01) * (xx - crpix1) + rng.uniform(-0.01, 0.01) * (yy - crpix2)
        img += rng.normal(0, 1.0, img.shape)
        px, py = tan_project(star_ra, star_dec, ra_c, dec_c)
        px = crpix1 - px / SCALE               # CDELT1 < 0: RA grows to the left
        py = crpix2 + py / SCALE
        inside = (px > -5) & (px < width + 5) & (py > -5) & (py < height + 5)
        for x0, y0, f in zip(px[inside], py[inside], flux[inside]):
            x_lo, x_hi = max(int(x0) - 6, 1), min(int(x0) + 7, width)
            y_lo, y_hi = max(int(y0) - 6, 1), min(int(y0) + 7, height)
            if x_lo > x_hi or y_lo > y_hi:
                continue
            sub = (slice(y_lo - 1, y_hi), slice(x_lo - 1, x_hi))
            img[sub] += f / (2 * math.pi * sigma ** 2) * np.exp(
                -((xx[sub] - x0) ** 2 + (yy[sub] - y0) ** 2) / (2 * sigma ** 2))
        name = f"tile{i:03d}.fits"
        write_fits(os.path.join(folder, name), img, {
            "CTYPE1": "RA---TAN", "CTYPE2": "DEC--TAN", "EQUINOX": 2000.0,
            "CRVAL1": ra_c, "CRVAL2": dec_c, "CRPIX1": crpix1, "CRPIX2": crpix2,
            "CDELT1": -SCALE, "CDELT2": SCALE, "CROTA2": 0.0, "BUNIT": "DN"})
        sky.tiles.append(name)
        sky.backgrounds.append(bg)
    return sky


def parse_tile_size(text: str) -> tuple[int, int]:
    """'WIDTHxHEIGHT' (pixels) -> (width, height); ValueError otherwise."""
    w, h = (int(v) for v in text.lower().split("x"))
    return w, h


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="montage_example.sky", description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    p.add_argument("--tiles", type=int, help="K tiles (default: the preset's)")
    p.add_argument("--size", help="WIDTHxHEIGHT pixels of a tile (default: the preset's)")
    a = p.parse_args(argv)
    kw = dict(PRESETS[a.preset])
    if a.tiles is not None:
        if a.tiles < 1:
            p.error("--tiles must be >= 1")
        kw["tiles"] = a.tiles
    if a.size:
        try:
            w, h = parse_tile_size(a.size)
        except ValueError:
            p.error(f"--size must be WIDTHxHEIGHT, got {a.size!r}")
        kw.update(width=w, height=h)
    try:
        sky = make_sky(a.out_dir, **kw)
    except OSError as e:
        print(f"montage_example.sky: {e}", file=sys.stderr)
        return 1
    print(f"{len(sky.tiles)} tiles of {kw['width']}x{kw['height']} in {a.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
