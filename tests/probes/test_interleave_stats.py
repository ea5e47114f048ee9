"""bench/interleave_stats.py (overhead_interleave.sh's summary) on inline windows with
known rates: exact ratios, a linear drift cancelled, guards and the workload's span."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("interleave_stats",
                                              ROOT / "bench" / "interleave_stats.py")
ist = importlib.util.module_from_spec(spec)
sys.modules["interleave_stats"] = ist
spec.loader.exec_module(ist)

MS = 1_000_000


def schedule(n: int, period_ms: int = 500, change_ms: int = 1):
    """toggles.txt rows: on at 0, then a change every period_ms taking change_ms."""
    rows, t, state = [(0, 0, "on")], 0, "on"
    for _ in range(n):
        t += period_ms * MS
        state = "off" if state == "on" else "on"
        rows.append((t, t + change_ms * MS, state))
        t += change_ms * MS
    rows.append((t + period_ms * MS, t + period_ms * MS, "end"))
    return rows


def completions(rows, rate_of) -> np.ndarray:
    """Request ends at rate_of(state, t_ns) per second, evenly spaced in each window."""
    ends = []
    for (_, set_ns, state), (next_ns, _, _) in zip(rows, rows[1:]):
        t = set_ns
        while t < next_ns:
            r = rate_of(state, t)
            t += int(1e9 / r)
            ends.append(t)
    return np.array(ends, dtype=np.int64)


def test_constant_rates_give_the_exact_ratio():
    rows = schedule(12)
    ends = completions(rows, lambda s, t: 900.0 if s == "on" else 1000.0)
    rates = ist.window_rates(rows, np.array([0]), ends, 50 * MS)
    ratios = ist.triplet_ratios(rates)
    assert len(ratios) == 4  # 13 windows: 4 disjoint triplets
    assert ratios == pytest.approx([0.9] * 4, rel=2e-3)


def test_a_linear_drift_cancels():
    """The machine speeds up 40 % over the run; attached costs 5 %. Pairwise on/off
    ratios would be biased by the drift; the triplets are not."""
    rows = schedule(24)
    ends = completions(rows, lambda s, t: (1000.0 + 30.0 * t / 1e9) * (0.95 if s == "on" else 1))
    ratios = ist.triplet_ratios(ist.window_rates(rows, np.array([0]), ends, 50 * MS))
    assert len(ratios) >= 7
    assert ratios == pytest.approx([0.95] * len(ratios), rel=5e-3)


def test_windows_outside_the_run_and_the_guard_are_left_out():
    rows = schedule(8)
    ends = completions(rows, lambda s, t: 1000.0)
    first = 900 * MS  # the workload started in the second window: its guard reaches the third
    rates = ist.window_rates(rows, np.array([first]), ends[ends > first], 50 * MS)
    assert [s for s, _ in rates][:2] == ["on", "off"]  # windows 0 and 1 left out
    assert len(rates) == 7  # windows 2 to 8
    # a change that took the whole period leaves no window for its state
    slow = [(0, 0, "on"), (500 * MS, 510 * MS, "off"), (1010 * MS, 1990 * MS, "on"),
            (2000 * MS, 2001 * MS, "off"), (2501 * MS, 2501 * MS, "end")]
    ends = completions(slow, lambda s, t: 1000.0)
    states = [s for s, _ in ist.window_rates(slow, np.array([0]), ends, 50 * MS)]
    assert states == ["on", "off", "off"]  # the attached window shorter than its guard: out
