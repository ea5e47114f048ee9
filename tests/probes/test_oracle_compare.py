"""bench/oracle_compare.py on small inline fixtures with known intervals: the
perf side rebuilt from raw events (preemptions, wakings, a second wakeup that
keeps the first, a wakeup perf never saw, a CPU whose switch chain broke,
wakeup_new, a wakeup of a running thread), matched one by one to tailtrace's
intervals by switch-in."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from analyze.load.schema import load_schema, record_dtype

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("oracle_compare", ROOT / "bench" / "oracle_compare.py")
oc = importlib.util.module_from_spec(spec)
sys.modules["oracle_compare"] = oc  # dataclasses look their module up
spec.loader.exec_module(oc)

def sw(cpu: int, t: str, prev: int, state: str, nxt: int, prev_comm: str = "busy") -> str:
    return (f"[{cpu:03d}] {t}:       sched:sched_switch: prev_comm={prev_comm} prev_pid={prev} "
            f"prev_prio=120 prev_state={state} ==> next_comm=x next_pid={nxt} next_prio=120")


def wk(cpu: int, t: str, pid: int, new: bool = False, ev: str = "sched_waking") -> str:
    ev = "sched_wakeup_new" if new else ev
    return f"[{cpu:03d}] {t}:       sched:{ev}: comm=w pid={pid} prio=120 target_cpu=001"


SCRIPT = [
    sw(1, "1.000000000", 0, "R", 11),            # 11 first seen: no interval
    sw(1, "1.002000000", 11, "R+", 12, "busy"),  # 11 preempted; 12 first seen
    sw(1, "1.005000000", 12, "S", 11, "my worker"),  # 11: 3 ms preemption
    wk(0, "1.006000000", 12),
    sw(1, "1.006500000", 11, "S", 12),           # 12: 0.5 ms wakeup
    wk(0, "1.010000000", 11),
    wk(0, "1.011000000", 11, ev="sched_wakeup"),  # already runnable: keeps 1.010
    sw(1, "1.012000000", 12, "S", 11),           # 11: 2 ms wakeup
    sw(1, "1.020000000", 11, "S", 12),           # 12 asleep, its wakeup lost: incomplete
    sw(1, "1.040000000", 15, "S", 11),           # chain broken (cpu 1 ran 12); 11 asleep: incomplete
    wk(0, "1.041000000", 12),                    # 12 unknown since the break: nothing opens
    sw(1, "1.042000000", 11, "S", 12),
    wk(0, "1.050000000", 16, new=True),
    sw(0, "1.050100000", 0, "R", 16),            # 16: 0.1 ms wakeup_new
    wk(1, "1.051000000", 16),                    # woken while running: nothing
    sw(0, "1.052000000", 16, "S", 0),
    "garbage line",
]


def test_perf_side_rebuilds_only_what_perf_saw_whole():
    p = oc.perf_intervals(SCRIPT)
    ms = 1_000_000
    base = 1_000_000_000
    assert p.complete[11] == [(base + 2 * ms, base + 5 * ms, oc.PREEMPT),
                              (base + 10 * ms, base + 12 * ms, oc.WAKEUP)]
    assert p.complete[12] == [(base + 6 * ms, base + 6 * ms + ms // 2, oc.WAKEUP)]
    assert p.complete[16] == [(base + 50 * ms, base + 50 * ms + ms // 10, oc.WAKEUP_NEW)]
    assert dict(p.incomplete) == {12: 1, 11: 1}
    assert p.cpu_breaks == 1


def test_woken_while_switching_out_is_incomplete():
    """A waking perf saw before the thread's own blocking switch-out (the waker
    ran on another CPU while it was still switching out): perf cannot say when
    the wait began, so the interval is not compared."""
    p = oc.perf_intervals([
        sw(1, "1.000000000", 0, "R", 21),
        wk(0, "1.000500000", 21),            # woken while still on CPU 1
        sw(1, "1.000500200", 21, "S", 0),
        sw(0, "1.001000000", 0, "R", 21),    # switched in: incomplete
        sw(0, "1.002000000", 21, "S", 0),
        wk(1, "1.003000000", 21),
        sw(1, "1.003400000", 0, "R", 21),    # 0.4 ms, complete
    ])
    assert p.complete[21] == [(1_003_000_000, 1_003_400_000, oc.WAKEUP)]
    assert dict(p.incomplete) == {21: 1}


RUNQ_FIELDS = ("t_runnable_ns", "t_run_ns", "pid", "tid", "cpu", "waker_tid", "kind")
SWITCH_FIELDS = ("t_off_ns", "t_on_ns", "pid", "tid", "cpu_off", "cpu_on", "kstack_id",
                 "ustack_id", "prev_state", "voluntary")


def write_run(d: Path, runq: list[tuple], switches: list[tuple]) -> None:
    """Rows are tuples of RUNQ_FIELDS / SWITCH_FIELDS; other fields stay 0."""
    schema = load_schema()
    (d / "schema.json").write_text(json.dumps(schema))
    for kind, rows, names in (("runq", runq, RUNQ_FIELDS), ("switch", switches, SWITCH_FIELDS)):
        rec = schema["records"][kind]
        arr = np.zeros(len(rows), dtype=record_dtype(schema, kind))
        for i, row in enumerate(rows):
            for name, value in zip(names, row):
                arr[i][name] = value
        header = schema["magic"].encode().ljust(8, b"\0") + rec["type"].to_bytes(4, "little") + \
            rec["size"].to_bytes(4, "little")
        (d / rec["file"]).write_bytes(header + arr.tobytes())


def test_matching_and_the_verdict(tmp_path, capsys):
    ms = 1_000_000
    base = 1_000_000_000
    # tailtrace saw 11's two intervals (switch-ins 1 µs after perf's) and 12's one; one more
    # 12 interval perf could not vouch for
    runq = [(base + 2 * ms, base + 5 * ms + 1000, 10, 11, 1, 0, 1),
            (base + 10 * ms, base + 12 * ms + 1000, 10, 11, 1, 0, 0),
            (base + 6 * ms, base + 6 * ms + ms // 2, 10, 12, 1, 0, 0),
            (base + 19 * ms, base + 20 * ms, 10, 12, 1, 0, 0)]
    write_run(tmp_path, runq, [])
    (tmp_path / "meta.json").write_text(json.dumps({"mono_start_ns": base,
                                                    "mono_end_ns": base + 100 * ms}))
    tt, _, window = oc.tailtrace_intervals(tmp_path)
    perf = oc.perf_intervals(SCRIPT)
    ag = oc.agree_thread(tt[11], perf.complete[11], window)
    assert (ag.matched, ag.tt_missing) == (2, 0)
    assert ag.tt_ms == pytest.approx(5.002) and ag.perf_ms == pytest.approx(5.0)
    # an interval tailtrace lacks is counted missing, apart from the sums of the matched
    ag = oc.agree_thread(tt[11][:1], perf.complete[11], window)
    assert (ag.matched, ag.tt_missing) == (1, 1) and ag.rel_diff() == pytest.approx(1e-3 / 3, 1e-2)
    # outside tailtrace's window: not compared
    assert oc.agree_thread(tt[11], perf.complete[11], (base + 3 * ms, base + 100 * ms)).matched == 1

    script = tmp_path / "script.txt"
    script.write_text("\n".join(SCRIPT) + "\n")
    args = ["--run", str(tmp_path), "--perf-script", str(script)]
    # 11: 0.04 % apart, coverage 2/2; 12: coverage 1/2
    assert oc.main(args + ["--min-coverage", "0.5"]) == 0
    assert "PASS" in capsys.readouterr().out.splitlines()[-1]
    # agreeing, but perf saw too little of 12 to vouch: inconclusive, not failed
    assert oc.main(args + ["--min-coverage", "0.6"]) == 3
    assert "INCONCLUSIVE" in capsys.readouterr().out.splitlines()[-1]
    # a disagreement of a thread perf saw enough of (11) fails, whatever the others' coverage
    assert oc.main(args + ["--min-coverage", "0.5", "--tol", "0.0001"]) == 1
    assert oc.main(args + ["--min-coverage", "0.6", "--tol", "0.0001"]) == 1
    out = capsys.readouterr().out
    # ... but not one of threads perf saw too little of: its "complete" intervals may span
    # events it dropped
    assert oc.main(args + ["--min-coverage", "1.01", "--tol", "0.0001"]) == 3
    assert "INCONCLUSIVE" in capsys.readouterr().out.splitlines()[-1]
    assert "FAIL" in out.splitlines()[-1] and "2 incomplete" in out and "1 broken" in out


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert oc.main(["--run", str(tmp_path / "missing"), "--perf-script", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("oracle_compare: ")
