"""bench/oracle_compare.py on small inline fixtures with known sums: the perf
side adds "sch delay" plus the wait that follows a preemption (state R), the
tailtrace side drops a final interval whose run never ended in a switch-out."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from analyze.schema import load_schema, record_dtype

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("oracle_compare", ROOT / "bench" / "oracle_compare.py")
oc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oc)

TIMEHIST = """\
           time    cpu  task name                       wait time  sch delay   run time  state
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------  -----
     100.000000 [0001]  busy[11/10]                         0.000      0.500      2.000      R
     100.010000 [0001]  busy[11/10]                         3.000      0.000      1.000      S
     100.020000 [0000]  my worker[12/10]                    5.000      0.250      1.000      S
     100.030000 [0001]  busy[11/10]                         4.000      1.500      1.000      R
"""


def test_perf_side_adds_waits_after_preemption():
    total, wakeup = oc.perf_sched_delay(TIMEHIST)
    # tid 11: sch 0.5 + (R ->) wait 3.0 + sch 0 + sch 1.5 (after S: wait not runnable)
    assert total[11] == pytest.approx(0.5 + 3.0 + 1.5)
    assert wakeup[11] == pytest.approx(0.5 + 1.5)
    assert total[12] == pytest.approx(0.25)  # comm with a space


RUNQ_FIELDS = ("t_runnable_ns", "t_run_ns", "pid", "tid", "cpu", "waker_tid", "kind")
SWITCH_FIELDS = ("t_off_ns", "t_on_ns", "pid", "tid", "cpu_off", "cpu_on", "kstack_id",
                 "ustack_id", "prev_state", "voluntary")


def write_run(d: Path, runq: list[tuple], switches: list[tuple]) -> None:
    """Rows are tuples of RUNQ_FIELDS / SWITCH_FIELDS; other fields stay 0."""
    schema = load_schema()
    (d / "schema.json").write_text(__import__("json").dumps(schema))
    for kind, rows, names in (("runq", runq, RUNQ_FIELDS), ("switch", switches, SWITCH_FIELDS)):
        rec = schema["records"][kind]
        arr = np.zeros(len(rows), dtype=record_dtype(schema, kind))
        for i, row in enumerate(rows):
            for name, value in zip(names, row):
                arr[i][name] = value
        header = schema["magic"].encode().ljust(8, b"\0") + rec["type"].to_bytes(4, "little") + \
            rec["size"].to_bytes(4, "little")
        (d / rec["file"]).write_bytes(header + arr.tobytes())


def test_tailtrace_side_and_the_verdict(tmp_path, capsys):
    ms = 1_000_000
    # runq: RUNQ_FIELDS
    runq = [(0, 2 * ms, 10, 11, 1, 0, 0),          # 2 ms wakeup
            (10 * ms, 13 * ms, 10, 11, 1, 0, 1),   # 3 ms preemption
            (20 * ms, 29 * ms, 10, 11, 1, 0, 1)]   # after the last switch-out: dropped
    # switch: SWITCH_FIELDS
    switches = [(10 * ms, 13 * ms, 10, 11, 1, 1, -1, -1, 0, 0),
                (20 * ms, 29 * ms, 10, 11, 1, 1, -1, -1, 0, 0),
                (15 * ms, 16 * ms, 10, 11, 1, 1, -1, -1, 0, 0)]
    write_run(tmp_path, runq, switches)
    total, wakeup, count, _ = oc.tailtrace_runq(tmp_path)
    assert total[11] == pytest.approx(5.0) and wakeup[11] == pytest.approx(2.0) and count[11] == 2
    th = tmp_path / "timehist.txt"
    th.write_text("  1.000000 [0001]  busy[11/10]  0.000  5.200  1.000  S\n")
    assert oc.main(["--run", str(tmp_path), "--timehist", str(th)]) == 0  # 4 % apart
    th.write_text("  1.000000 [0001]  busy[11/10]  0.000  6.000  1.000  S\n")
    assert oc.main(["--run", str(tmp_path), "--timehist", str(th)]) == 1  # 17 % apart
    assert "FAIL" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert oc.main(["--run", str(tmp_path / "missing"), "--timehist", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("oracle_compare: ")
