"""--toggle-ms (probes/core/toggle.h): the programs detached and attached in turn, for
bench/overhead_interleave.sh. Oracle by construction: a switch record is written by
the switch program at the switch-in it closes (t_on_ns, the same CLOCK_MONOTONIC as
toggles.txt), so no record may close inside a window where every program was
detached, and a steady sleeper (a switch every ~0.5 ms) fills every attached one."""
from __future__ import annotations

import numpy as np

from test_probes_cli import one_line_error
from tt_run import helper, meta, needs_root, records, tailtrace

pytestmark = needs_root


def toggles(run_dir) -> list[tuple[int, int, str]]:
    rows = [l.split() for l in (run_dir / "toggles.txt").read_text().splitlines()]
    return [(int(a), int(b), s) for a, b, s in rows]


def test_detached_windows_have_no_records_and_attached_ones_do(tmp_path):
    p = tailtrace(tmp_path, "--events", "runq,switch", "--toggle-ms", "200", "--",
                  helper("sleeper"), "4000", "500")
    assert p.returncode == 0, p.stderr
    t = toggles(tmp_path)
    assert t[0][2] == "on" and t[-1][2] == "end"
    states = [s for _, _, s in t[1:-1]]
    assert len(states) >= 6 and states == ["off", "on"] * (len(states) // 2) + ["off"] * (
        len(states) % 2), states
    t_on = np.sort(records(tmp_path, "switch")["t_on_ns"].astype(np.int64))
    t_on = t_on[t_on > 0]
    for (_, set_ns, state), (next_ns, _, _) in zip(t, t[1:]):
        n = np.searchsorted(t_on, next_ns) - np.searchsorted(t_on, set_ns, side="right")
        if state == "off":
            assert n == 0, (set_ns, next_ns, n)  # every program detached
        elif next_ns - set_ns > 100_000_000 and t[-1][1] - next_ns > 0:
            assert n >= 50, (set_ns, next_ns, n)  # ~200 ms of a switch every ~0.5 ms
    assert meta(tmp_path)["options"]["toggle_ms"] == 200


def test_toggle_ms_refuses_uprobe_events(tmp_path):
    p = tailtrace(tmp_path, "--events", "runq,locks", "--toggle-ms", "200", "--", "true")
    one_line_error(p, "--toggle-ms", "runq,switch,offcpu")


def test_toggle_ms_bounds(tmp_path):
    one_line_error(tailtrace(tmp_path, "--toggle-ms", "10", "--", "true"), "--toggle-ms")
