#!/usr/bin/env python3
"""Compare tailtrace's run-queue delay with perf sched's, per thread.

    python3 bench/oracle_compare.py --run RUN_DIR --timehist TIMEHIST.txt [--top 10] [--tol 0.10]

RUN_DIR is a tailtrace run directory (runq.bin, tasks.bin, schema.json);
TIMEHIST.txt is the output of `perf sched timehist --state -i perf.data` for
the same run. For each thread of the traced process, the summed run-queue
delay from both tools is printed for the `top` busiest threads (most tailtrace
runnable intervals), with their relative difference:
  tailtrace: sum of t_run - t_runnable over runq.bin (wakeups and preemptions);
  perf:      sum of the "sch delay" column (wakeup -> run), plus the "wait time"
             of every line that follows one ending in state R (preempted:
             timehist reports that wait as wait time, not sch delay).
The wakeup-only part (tailtrace kinds WAKEUP/WAKEUP_NEW vs perf sch delay) is
shown too. Exit status 0 when every thread's total agrees within tol, 1
otherwise, 2 on bad input.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyze.schema import SchemaError, load_schema, read_records  # noqa: E402

PREEMPT = 1  # enum tt_runq_kind

# "  1234.567890 [0001]  comm[tid/pid]  wait  sch_delay  run  [state]"  (comm may have spaces)
TIMEHIST_LINE = re.compile(
    r"^\s*\d+\.\d+\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
    r"(?:\s+(\S+))?\s*$")


def perf_sched_delay(text: str) -> tuple[dict[int, float], dict[int, float]]:
    """Per tid: total runnable ms (sch delay + waits after preemption), and sch delay ms."""
    total: dict[int, float] = defaultdict(float)
    wakeup: dict[int, float] = defaultdict(float)
    last_state: dict[int, str] = {}
    for line in text.splitlines():
        m = TIMEHIST_LINE.match(line)
        if not m:
            continue
        tid, wait, sch = int(m.group(3)), float(m.group(5)), float(m.group(6))
        wakeup[tid] += sch
        total[tid] += sch
        if last_state.get(tid, "").startswith("R"):
            total[tid] += wait
        last_state[tid] = m.group(8) or ""
    return total, wakeup


def tailtrace_runq(run: Path):
    """Per tid: runnable ms (all kinds), wakeup-kind ms, interval count; and comms."""
    schema = load_schema(run)
    rq = read_records(run / "runq.bin", schema, "runq")
    total: dict[int, float] = defaultdict(float)
    wakeup: dict[int, float] = defaultdict(float)
    count: dict[int, int] = defaultdict(int)
    if (run / "switches.bin").exists():
        # timehist prints a thread's wait with the run that follows it, when
        # that run ends with a switch-out: a final run cut by the thread's exit
        # or the end of tracing has no line. Drop the same intervals here.
        sw = read_records(run / "switches.bin", schema, "switch")
        last_off: dict[int, int] = {}
        for tid, t_off in zip(sw["tid"].tolist(), sw["t_off_ns"].tolist()):
            last_off[tid] = max(t_off, last_off.get(tid, 0))
        keep = [t_run <= last_off.get(tid, 0)
                for tid, t_run in zip(rq["tid"].tolist(), rq["t_run_ns"].tolist())]
        rq = rq[keep]
    ms = ((rq["t_run_ns"] - rq["t_runnable_ns"]) / 1e6).tolist()
    for tid, kind, d in zip(rq["tid"].tolist(), rq["kind"].tolist(), ms):
        total[tid] += d
        count[tid] += 1
        if kind != PREEMPT:
            wakeup[tid] += d
    comms: dict[int, str] = {}
    if (run / "tasks.bin").exists():
        tasks = read_records(run / "tasks.bin", schema, "task")
        comms = {int(t): c.decode(errors="replace") for t, c in zip(tasks["tid"], tasks["comm"])}
    return total, wakeup, count, comms


def rel_diff(a: float, b: float) -> float:
    if b > 0:
        return abs(a - b) / b
    return 0.0 if a == 0 else float("inf")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, type=Path, help="tailtrace run directory")
    ap.add_argument("--timehist", required=True, type=Path, help="perf sched timehist output")
    ap.add_argument("--top", type=int, default=10, help="busiest threads compared (default 10)")
    ap.add_argument("--tol", type=float, default=0.10, help="relative tolerance (default 0.10)")
    a = ap.parse_args(argv)
    try:
        tt, tt_wake, count, comms = tailtrace_runq(a.run)
        perf, perf_wake = perf_sched_delay(a.timehist.read_text())
    except (OSError, SchemaError) as e:
        print(f"oracle_compare: {e} (give a tailtrace run directory and a timehist text file)",
              file=sys.stderr)
        return 2
    if not tt:
        print("oracle_compare: runq.bin has no records: was the run traced with --events runq?",
              file=sys.stderr)
        return 2
    busiest = sorted(tt, key=lambda t: count[t], reverse=True)[: a.top]
    print(f"{'tid':>8} {'comm':16} {'intervals':>9} {'tailtrace ms':>13} {'perf ms':>10} "
          f"{'diff':>7} | {'wakeup: tt ms':>13} {'perf ms':>10} {'diff':>7}")
    worst = 0.0
    for tid in busiest:
        p, pw = perf.get(tid, 0.0), perf_wake.get(tid, 0.0)
        rel, relw = rel_diff(tt[tid], p), rel_diff(tt_wake[tid], pw)
        worst = max(worst, rel)
        print(f"{tid:>8} {comms.get(tid, '?'):16} {count[tid]:>9} {tt[tid]:>13.3f} {p:>10.3f} "
              f"{rel * 100:>6.1f}% | {tt_wake[tid]:>13.3f} {pw:>10.3f} {relw * 100:>6.1f}%")
    ok = worst <= a.tol
    print(f"agreement (total run-queue delay per thread): worst {worst * 100:.1f}% over the "
          f"{len(busiest)} busiest threads (tolerance {a.tol * 100:.0f}%): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
