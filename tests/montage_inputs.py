"""Small synthetic Montage inputs made with Montage's own mMakeImg: TAN-projected FITS tiles and a template header.

    make_inputs(folder, n=2, size=64) -> dict(images=[paths], template=path)

Tiles overlap (each shifted by a third of a tile in RA), so every Montage stage has work to do.
"""
from __future__ import annotations

import os
import subprocess

HDR = """SIMPLE  = T
BITPIX  = -64
NAXIS   = 2
NAXIS1  = {nx}
NAXIS2  = {ny}
CTYPE1  = 'RA---TAN'
CTYPE2  = 'DEC--TAN'
EQUINOX = 2000
CRVAL1  = {ra:.6f}
CRVAL2  = {dec:.6f}
CRPIX1  = {cx:.1f}
CRPIX2  = {cy:.1f}
CDELT1  = -{scale:.6f}
CDELT2  = {scale:.6f}
CROTA2  = 0.0
END
"""


def header(ra: float, dec: float, nx: int, ny: int, scale: float = 0.001) -> str:
    return HDR.format(nx=nx, ny=ny, ra=ra, dec=dec, cx=(nx + 1) / 2, cy=(ny + 1) / 2, scale=scale)


def make_inputs(folder: str, n: int = 2, size: int = 64, ra: float = 10.0, dec: float = 20.0,
                scale: float = 0.001, env: dict | None = None) -> dict:
    os.makedirs(folder, exist_ok=True)
    images = []
    for i in range(n):
        hdr = os.path.join(folder, f"img{i}.hdr")
        with open(hdr, "w") as fh:
            fh.write(header(ra + i * size * scale / 3, dec, size, size, scale))
        fits = os.path.join(folder, f"img{i}.fits")
        r = subprocess.run(["mMakeImg", hdr, fits], capture_output=True, text=True, env=env)
        if r.returncode != 0 or 'stat="OK"' not in r.stdout:
            raise RuntimeError(f"mMakeImg failed: {r.stdout} {r.stderr}")
        images.append(fits)
    width = size + (n - 1) * size // 3 + 8
    template = os.path.join(folder, "template.hdr")
    with open(template, "w") as fh:
        fh.write(header(ra + (n - 1) * size * scale / 6, dec, width, size + 8, scale))
    return {"images": images, "template": template}
