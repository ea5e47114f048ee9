"""bench/ab_stats.py (overhead.sh's summary) on inline rows with known ratios."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ab_stats", ROOT / "bench" / "ab_stats.py")
ab = importlib.util.module_from_spec(spec)
sys.modules["ab_stats"] = ab  # dataclasses look their module up
spec.loader.exec_module(ab)


def rows(mode_rps: dict[str, list[float]], **extra) -> list[dict]:
    out = []
    for mode, values in mode_rps.items():
        for i, rps in enumerate(values, 1):
            out.append({"mode": mode, "round": i, "rps": rps, "errors": 0, **extra.get(mode, {})})
    return out


@pytest.mark.parametrize("df,table", [(1, 12.706), (3, 3.182), (5, 2.571), (10, 2.228),
                                      (30, 2.042), (100, 1.984)])
def test_t_quantile_matches_the_table(df, table):
    assert ab.t975(df) == pytest.approx(table, rel=0.0015)


def test_geomean_and_interval_of_per_round_ratios():
    # per-round ratios 0.9, 1.0, 0.9, 1.0 (the none runs differ, the ratios do not)
    s = {x.mode: x for x in ab.summarize(rows({"none": [100, 200, 100, 200],
                                                "default": [90, 200, 90, 200]}))}
    d = s["default"]
    logs = [math.log(0.9), 0.0] * 2
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    assert d.geomean == pytest.approx(math.sqrt(0.9))
    assert d.ci_low == pytest.approx(math.exp(mean - 3.182 * sd / 2))
    assert d.ci_high == pytest.approx(math.exp(mean + 3.182 * sd / 2))
    assert d.per_round_median == pytest.approx(0.95)
    assert d.ratio_of_medians == pytest.approx(145 / 150)
    assert d.verdict == "unresolved" and s["none"].verdict == ""


def test_verdicts_need_the_whole_interval():
    tight = {"none": [100.0] * 6}
    s = {x.mode: x for x in ab.summarize(rows({**tight, "default": [96, 97, 96, 97, 96, 97],
                                                "listen": [90, 91, 90, 91, 90, 91],
                                                "events=runq": [80] * 6}))}
    assert s["default"].verdict == "met" and s["default"].ci_low >= 0.95
    assert s["listen"].verdict == "not met" and s["listen"].ci_high < 0.97
    assert s["events=runq"].target is None and s["events=runq"].verdict == ""
    assert s["events=runq"].geomean == pytest.approx(0.8)


def test_cpu_share_and_lost_events_are_summed_per_mode():
    r = rows({"none": [100, 100], "default": [95, 95]},
             default={"cpu_share": 0.03, "lost": {"runq": 2, "switch": 0}})
    r[-1]["cpu_share"] = 0.05
    d = [x for x in ab.summarize(r) if x.mode == "default"][0]
    assert d.cpu_share == pytest.approx(0.04)
    assert d.lost == {"runq": 4, "switch": 0}
    assert "4.0%" in ab.format_table(ab.summarize(r))


def test_missing_baseline_is_an_error(tmp_path, capsys):
    f = tmp_path / "results.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in rows({"default": [90]})) + "\n")
    assert ab.main(["ab_stats.py", str(f)]) == 1
    assert "no 'none' runs" in capsys.readouterr().err
    assert ab.main(["ab_stats.py"]) == 2


def test_a_mode_against_another_round_by_round():
    # dwarf is 0.98 of fp in every round while both drift against none
    s = {x.mode: x for x in ab.summarize(rows({"none": [100, 100, 100],
                                                "fp": [90, 95, 100],
                                                "dwarf": [88.2, 93.1, 98]}), baseline="fp")}
    assert s["dwarf"].geomean == pytest.approx(0.98)
    assert s["dwarf"].ci_low == pytest.approx(0.98) and s["dwarf"].target is None
    assert s["none"].geomean == pytest.approx((1 / 0.9 / 0.95) ** (1 / 3))
    assert s["fp"].verdict == "" and s["dwarf"].verdict == ""
    with pytest.raises(ValueError, match="no 'alt' runs"):
        ab.summarize(rows({"none": [1.0]}), baseline="alt")
