"""Each plot_* writes a real, non-empty PNG from a fixture (and a readable one when data is absent)."""
import numpy as np
import pandas as pd
import pytest
from matplotlib import image as mpimg

import synth
from analyze.render import plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_png(path, min_w=400):
    raw = open(path, "rb").read()
    assert raw[:8] == PNG_MAGIC and len(raw) > 5000
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= 150
    # not a blank canvas: a real share of non-white pixels
    assert (img[..., :3] < 0.9).any(axis=2).mean() > 0.01


@pytest.fixture(scope="module")
def tr():
    return synth.truth(400)


def test_percentile_points_exact():
    x, y = plot.percentile_points(np.arange(1, 11) * 1e6)   # 1..10 ms
    assert list(y) == list(range(1, 11))
    assert x[0] == 1.0 and x[-1] == 10.0 and x[5] == 2.0    # rank 5 of 10: p=0.5 -> x=2
    x, y = plot.percentile_points(np.arange(100_000) * 1.0, max_points=500)
    assert len(x) <= 501 and y[-1] == 99_999 / 1e6 and np.all(np.diff(x) > 0)


def test_plot_percentiles_single_and_runs(tmp_path, tr):
    _check_png(plot.plot_percentiles(tr.decomp, tmp_path / "p.png"))
    d2 = tr.decomp.assign(latency_ns=tr.decomp["latency_ns"] * 2, e2e_ns=tr.decomp["e2e_ns"] * 2)
    _check_png(plot.plot_percentiles({"pool": tr.decomp, "naive": d2}, tmp_path / "c.png",
                                     column="e2e_ns"))


def test_plot_decomposition(tmp_path, tr):
    _check_png(plot.plot_decomposition(synth.bands_of(tr.decomp), tmp_path / "d.png"), min_w=800)


def test_plot_timeline(tmp_path, tr):
    _check_png(plot.plot_timeline(tr.decomp, tmp_path / "t.png", t0_ns=synth.T_BASE), min_w=800)


def test_plot_runq_hist(tmp_path):
    hist = pd.DataFrame({"lo_us": [0, 1, 2, 4, 8, 16], "hi_us": [1, 2, 4, 8, 16, 32],
                         "count": [0, 10, 250, 40, 0, 3]})
    _check_png(plot.plot_runq_hist(hist, tmp_path / "r.png"))


def test_plot_cpu_placement_long_and_wide(tmp_path):
    long = pd.DataFrame({"tid": [101, 101, 102, 103], "cpu": [0, 1, 1, 0],
                         "oncpu_ns": [3e6, 1e6, 5e6, 2e6]})
    m = plot.placement_matrix(long)
    assert m.loc[101, 0] == 3e6 and m.loc[102, 0] == 0 and list(m.columns) == [0, 1]
    wide = m.reset_index()
    assert plot.placement_matrix(wide).equals(m)
    _check_png(plot.plot_cpu_placement(long, tmp_path / "h.png", names={101: "pool-w0"}))


def test_empty_inputs_still_draw_an_explanation(tmp_path):
    empty = synth.truth(400).decomp.iloc[:0]
    for p in [plot.plot_percentiles(empty, tmp_path / "a.png"),
              plot.plot_timeline(empty, tmp_path / "b.png"),
              plot.plot_runq_hist(pd.DataFrame(columns=["lo_us", "hi_us", "count"]),
                                  tmp_path / "c.png"),
              plot.plot_cpu_placement(pd.DataFrame(columns=["tid", "cpu", "oncpu_ns"]),
                                      tmp_path / "d.png")]:
        raw = open(p, "rb").read()
        assert raw[:8] == PNG_MAGIC and len(raw) > 1000
