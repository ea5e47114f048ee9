"""Acceptance: report.html renders in headless Chromium with no missing image.

Two proofs: a full-page screenshot that is not blank, and the DOM after load
(--dump-dom) of a copy of the page with a small inline script that counts
images that failed to decode (complete && naturalWidth == 0). A control page
with a deliberately broken image shows that the check does detect one.
"""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib import image as mpimg

import synth
from analyze import pipeline

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CHECK = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
  var d = document.createElement('div');
  d.id = 'imgcheck';
  d.setAttribute('data-total', imgs.length);
  d.setAttribute('data-broken', broken.length);
  d.setAttribute('data-min-width', Math.min.apply(null, imgs.map(function (i) {
    return i.naturalWidth; }).concat([99999])));
  document.body.appendChild(d);
});
</script>"""


def chromium(tmp_path, *args):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: run scripts/install-deps.sh (installs chromium)")
    profile = tmp_path / f"profile{len(list(tmp_path.iterdir()))}"
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *map(str, args)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return r


def image_check(tmp_path, page: str) -> dict:
    check = tmp_path / "check.html"
    check.write_text(page.replace("</body>", CHECK + "</body>"))
    r = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", f"file://{check}")
    m = re.search(r'id="imgcheck" data-total="(\d+)" data-broken="(\d+)" '
                  r'data-min-width="(\d+)"', r.stdout)
    assert m, f"no image check in the DOM dump (rc={r.returncode}): {r.stderr[-500:]}"
    return {"total": int(m[1]), "broken": int(m[2]), "min_width": int(m[3])}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("shot")
    synth.make_run(d, 400)
    pipeline.build_report(d)
    return d


def test_report_renders_with_no_missing_image(run_dir, tmp_path):
    page = (run_dir / "report.html").read_text()
    n_img = len(re.findall(r"<img\b", page))
    assert n_img == 5
    got = image_check(tmp_path, page)
    assert got == {"total": n_img, "broken": 0, "min_width": got["min_width"]}
    assert got["min_width"] > 300


def test_check_detects_a_broken_image(tmp_path):
    page = ('<!DOCTYPE html><html><body><img src="data:image/png;base64,iVBORw0KGgoAAAAN">'
            "</body></html>")
    assert image_check(tmp_path, page) == {"total": 1, "broken": 1, "min_width": 0}


def test_screenshot_is_not_blank(run_dir, tmp_path):
    shot = tmp_path / "report.png"
    r = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,4000",
                 "--hide-scrollbars", f"file://{run_dir / 'report.html'}")
    assert shot.exists(), f"no screenshot (rc={r.returncode}): {r.stderr[-500:]}"
    img = mpimg.imread(shot)[..., :3]
    assert img.shape[:2] == (4000, 1280)
    # the page background is light grey; the report draws text, tables and figures on it
    rows_with_ink = (img.min(axis=2) < 0.5).any(axis=1).mean()
    assert rows_with_ink > 0.3
    colours = np.unique((img[::4, ::4] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 200          # figures in colour, not one flat fill
    # the headline is at the top: dark, large text in the first 300 px
    assert (img[:300].min(axis=2) < 0.2).mean() > 0.01
