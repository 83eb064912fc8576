"""Every page mtcio writes, as headless Chromium shows it at 1400 px: the prediction report, the run report and the
demo page (built from stored outputs).  Each loads every image it shows (all embedded), has no frame, no text wider
than the window (nothing cut off at the right), and its screenshot is a drawn page.  Skipped only when chromium is
not installed (make setup installs it)."""
import os
import shutil
import subprocess

import pytest

from helpers.cli import MONTAGE, predict

from montage_example import page

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (make setup installs it)")
WIDTH = 1400
# written into a copy of the page: the window's width, the page's, images loaded / shown, frames
PROBE = ("<script>window.onload = () => { const im = [...document.images]; document.body.setAttribute('data-probe', "
         "[window.innerWidth, document.documentElement.scrollWidth, im.filter(i => i.complete && i.naturalWidth > 0)"
         ".length, im.length, document.querySelectorAll('iframe').length].join(',')); };</script>")


def chromium(args, profile):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={WIDTH},1200",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=180)


def shown(html_path, tmp_path):
    """(window width, page width, images loaded, images, frames), and the screenshot's pixels."""
    check = tmp_path / "check.html"
    check.write_text(open(html_path).read() + PROBE)
    r = chromium(["--dump-dom", check.as_uri()], tmp_path / "profile")
    assert r.returncode == 0, r.stderr[-2000:]
    probe = tuple(int(x) for x in r.stdout.split('data-probe="')[1].split('"')[0].split(","))
    shot = tmp_path / "shot.png"
    r = chromium([f"--screenshot={shot}", html_path.as_uri()], tmp_path / "profile")
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    from PIL import Image
    im = Image.open(shot).convert("L")
    return probe, im


def _looks_drawn(im):
    assert im.size[0] == WIDTH
    lo, hi = im.getextrema()
    assert hi - lo > 200                        # text on a background, not a blank page
    dark = sum(im.histogram()[:128])
    assert 0.01 < dark / (im.size[0] * im.size[1]) < 0.6


def test_prediction_report(tmp_path):
    out = tmp_path / "rep"
    assert predict(MONTAGE, "--out", out, "--bootstrap", "0", "--what-if", "hosts=4,8").returncode == 0
    (win, width, loaded, images, frames), im = shown(out / "report.html", tmp_path)
    assert (win, loaded, images, frames) == (WIDTH, 5, 5, 0) and width <= win
    _looks_drawn(im)


def test_run_report(tmp_path):
    from test_montage_page_html import built
    built(tmp_path)
    (win, width, loaded, images, frames), im = shown(tmp_path / "profile" / "index.html", tmp_path)
    assert win == WIDTH and width <= win and loaded == images >= 2 and frames == 0
    _looks_drawn(im)


def test_demo_page(tmp_path):
    from test_montage_page_html import INFO, RUNS, built
    db = built(tmp_path)
    path, _ = page.write(str(tmp_path), str(db), RUNS, INFO)
    (win, width, loaded, images, frames), im = shown(tmp_path / "index.html", tmp_path)
    assert (win, loaded, images, frames) == (WIDTH, 3, 3, 0) and width <= win
    _looks_drawn(im)
    assert os.path.getsize(path) > 100_000      # the figures are in the page itself
