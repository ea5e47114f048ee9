"""The decomposition's checks, on inline fixtures with known answers: each request says
why its parts are what they are; every request is in its band, its parts known or not (the
band counts the unknown ones and averages the known ones); a band that does not add up gets
no share, in the headline, the table and the figure, and summary.json counts and names the
requests behind it."""
import re

import numpy as np

from fixtures import MS, T0, US, make_run, off, req, rq, task
from analyze.render import plot
from analyze.explain.attribute import BANDS, adds_up, df_bands
from analyze.explain.attribute import check_summary
from analyze.explain.decompose import df_decompose
from analyze.explain.findings import Findings
from analyze.render.html import ReportInputs, render_report
from analyze.render.summary import summary_dict


def _window_run():
    """Thread 7: request 0 [0, 30] ms began before the recording (mono_start T0 + 1 ms);
    request 1 [32, 40] ms sleeps [33, 36] (runnable [35.5, 36]). Thread 8: request 2
    [2, 6] ms on CPU throughout."""
    return make_run(requests=[req(0, 7, 0, 30 * MS), req(1, 7, 32 * MS, 40 * MS),
                              req(2, 8, 2 * MS, 6 * MS)],
                    switches=[off(7, 33 * MS, 36 * MS, syscall=35)],
                    runq=[rq(7, 35 * MS + 500 * US, 36 * MS)],
                    tasks=[task(7, "w0"), task(8, "w1")],
                    meta={"mono_start_ns": T0 + 1 * MS, "mono_end_ns": T0 + 50 * MS})


def test_a_request_outside_the_recording_stays_in_its_band_counted_unknown():
    d = df_decompose(_window_run())
    assert d["check"].astype(str).tolist() == ["window", "ok", "ok"]
    bands = df_bands(d)
    # request 0 (30 ms, parts unknown) is the slowest: the ≥P99 band holds it, counted
    # unknown with its reason; the ≤P50 band's two requests (4 and 8 ms) add up
    assert bands["n"].tolist() == [2, 0, 0, 1]
    assert bands["n_unknown"].tolist() == [0, 0, 0, 1]
    tail, med = bands.loc[BANDS[3]], bands.loc[BANDS[0]]
    assert tail["unknown_check"] == "window" and bool(tail["slowest_unknown"])
    assert np.isnan(tail["oncpu_ms"]) and adds_up(tail)      # no part is known
    assert med["latency_ms"] == 6.0 and med["oncpu_ms"] == 4.5
    assert med["parts_share"] == 1.0 and adds_up(med)
    c = check_summary(d, bands)
    assert c == {"requests": 3, "decomposed": 2, "close": 2, "left_out": 1,
                 "by_check": {"ok": 2, "window": 1}, "bands_add_up": {b: True for b in BANDS},
                 "failed": [{"id": 0, "tid": 7, "pid": 100, "t_start_ns": T0,
                             "latency_ms": 30.0, "parts_ms": None, "check": "window",
                             "why": c["failed"][0]["why"]}]}
    assert c["failed"][0]["why"].startswith("ran partly outside the recorded time")


def _overlap_run():
    """Thread 7, request [0, 10] ms: two switch records claim [2, 6] and [4, 8] ms off CPU
    (2 ms counted twice), the second woken at 7.5 ms; request [20, 25] ms on thread 8 (off
    CPU at [10, 12] ms before it, so not asleep since before the run) with a runnable interval
    [22, 23] ms that no switch holds (1 ms outside off-CPU time)."""
    return make_run(requests=[req(0, 7, 0, 10 * MS), req(1, 8, 20 * MS, 25 * MS)],
                    switches=[off(7, 2 * MS, 6 * MS, syscall=202),
                              off(7, 4 * MS, 8 * MS, syscall=202), off(8, 10 * MS, 12 * MS)],
                    runq=[rq(7, 7 * MS + 500 * US, 8 * MS), rq(8, 22 * MS, 23 * MS)],
                    tasks=[task(7, "w0"), task(8, "w1")])


def test_parts_that_exceed_the_latency_say_why():
    d = df_decompose(_overlap_run())
    assert d["check"].astype(str).tolist() == ["overlap", "outside"]
    assert np.allclose(d["closure_err"], [0.2, 0.2])
    c = check_summary(d, df_bands(d))
    assert c["by_check"] == {"overlap": 1, "outside": 1} and c["left_out"] == 0
    assert [f["parts_ms"] for f in c["failed"]] == [12.0, 6.0]
    assert "off-CPU intervals of their thread overlap" in c["failed"][0]["why"]
    assert "runnable time outside" in c["failed"][1]["why"]


def test_a_band_that_does_not_add_up_shows_no_share(tmp_path):
    run = _overlap_run()
    d = df_decompose(run)
    bands = df_bands(d)
    tail = bands.loc[BANDS[3]]          # the 10 ms request with 12 ms of parts
    assert tail["n"] == 1 and np.isclose(tail["parts_share"], 1.2) and not adds_up(tail)
    s = summary_dict(Findings(run, d, bands))
    assert s["checks"]["bands_add_up"][BANDS[3]] is False
    h = s["headline"]
    assert "add up to 120% of their time, not 100%, so no share is given" in h, h
    assert "1 of them fail the decomposition check; 1 have parts that exceed" in h, h
    assert not re.search(r"spent \d+%", h)
    page = render_report(ReportInputs(summary=s, bands=bands))
    row = re.search(r"<tr><td>≥P99</td>(.*?)</tr>", page).group(1)
    assert "no share" in row and not re.search(r"\d+%", row), row
    assert "its parts add up to 120.0% of its mean end-to-end time" in page
    assert "Checks: 2 of 2 requests fail the decomposition check" in page
    # the figure draws no share bars for it (and says so)
    plot.plot_decomposition(bands, tmp_path / "d.png")


def test_a_run_that_adds_up_prints_no_check():
    run = _window_run()
    d = df_decompose(run)
    d = d[d["check"] == "ok"].reset_index(drop=True)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["checks"]["by_check"] == {"ok": 2} and not s["checks"]["failed"]
    assert not any("decomposition check" in w for w in s["warnings"])
    page = render_report(ReportInputs(summary=s, bands=df_bands(d)))
    assert "Checks:" not in page and "no share" not in page
