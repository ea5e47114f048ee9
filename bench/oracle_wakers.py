#!/usr/bin/env python3
"""Compare tailtrace's wakers with the task perf saw current at sched_waking.

    python3 bench/oracle_wakers.py --run RUN_DIR --perf-script PERF.txt [--min-agree 0.99]

RUN_DIR is a tailtrace run directory (runq.bin); PERF.txt is the output of
`perf script --ns --show-lost-events -F comm,tid,pid,cpu,time,event,trace` of
a `perf record -a -k mono -e sched:sched_waking` of the same run.
sched_waking fires in the waker's context, so the task perf prints as current
at that event is the waker (or, in an interrupt, the task it interrupted).
Each tailtrace wakeup record that blames a task (kind wakeup, waker_ctx task,
softirq_task or task_guess) is matched to the latest perf sched_waking of the
same woken tid at or before its t_runnable_ns (the waking itself, so up to
SLACK_NS after it: perf's handler and tailtrace's program read the clock one
after the other; or the thread's switch-out when it was woken while still
switching out), at most --window-us earlier; its waker_tid is compared with
perf's current tid. Records with no such event (perf lost it, or the clocks
differ) are counted as unmatched, not as disagreements. Records in interrupt
context (hardirq, softirq) are shown apart: tailtrace blames nobody for them.
Exit status 0 when the agreeing share of matched records is at least
min-agree, 1 otherwise, 2 on bad input.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyze.load.errors import AnalysisError  # noqa: E402
from analyze.load.load import WAKER_BLAMES_TASK, load_run  # noqa: E402

IRQ_CTXS = ("hardirq", "softirq")

# "  comm  pid/tid  [001]  1105.086764532: sched:sched_waking: comm=x pid=18 prio=0 target_cpu=000"
PERF_LINE = re.compile(r"^\s*(.*?)\s+(\d+)/(\d+)\s+\[\d+\]\s+(\d+)\.(\d+):\s+"
                       r"sched:(sched_waking|sched_wakeup):\s+comm=(.*) pid=(\d+) prio=")
PERF_LOST = re.compile(r"PERF_RECORD_LOST lost (\d+)")
SLACK_NS = 2_000  # perf's and tailtrace's clock reads at the same sched_waking


class PerfEvents:
    """perf's sched_waking (time, current tid) per woken tid (sched_wakeup lines are skipped)."""

    def __init__(self, path: Path):
        waking = defaultdict(list)
        self.comms: dict[int, str] = {0: "swapper(idle)"}
        self.lost = 0
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = PERF_LINE.match(line)
                if not m:
                    lost = PERF_LOST.search(line)
                    self.lost += int(lost.group(1)) if lost else 0
                    continue
                comm, _pid, tid, sec, frac, ev, woken_comm, woken = m.groups()
                if ev != "sched_waking":
                    continue
                t = int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])
                tid, woken = int(tid), int(woken)
                if tid:
                    self.comms[tid] = comm
                self.comms.setdefault(woken, woken_comm)
                waking[woken].append((t, tid))
        self.n_waking = sum(map(len, waking.values()))
        self.waking = {k: np.array(sorted(v), dtype=np.int64).reshape(-1, 2)
                       for k, v in waking.items()}


def match_waking(rq, perf: PerfEvents, window_ns: int):
    """Per record: perf's current tid at the matched sched_waking (-1: none), and the lag."""
    cur = np.full(len(rq), -1, dtype=np.int64)
    lag = np.full(len(rq), -1, dtype=np.int64)
    for tid, idx in rq.groupby("tid", observed=True).indices.items():
        ev = perf.waking.get(int(tid))
        if ev is None:
            continue
        t = rq["t_runnable_ns"].to_numpy()[idx]
        i = np.searchsorted(ev[:, 0], t + SLACK_NS, side="right") - 1
        d = t - ev[np.maximum(i, 0), 0]
        ok = (i >= 0) & (d <= window_ns)
        cur[idx[ok]] = ev[i[ok], 1]
        lag[idx[ok]] = d[ok]
    return cur, lag


def clock_gap_ns(rq, perf: PerfEvents) -> float:
    """Median |t_runnable_ns - nearest perf sched_waking of the same tid|: ~0 if clocks agree."""
    gaps = []
    for tid, idx in rq.groupby("tid", observed=True).indices.items():
        ev = perf.waking.get(int(tid))
        if ev is None:
            continue
        ev = ev[:, 0]
        t = rq["t_runnable_ns"].to_numpy()[idx]
        i = np.searchsorted(ev, t)
        lo, hi = ev[np.clip(i - 1, 0, len(ev) - 1)], ev[np.clip(i, 0, len(ev) - 1)]
        gaps.append(np.minimum(np.abs(t - lo), np.abs(t - hi)))
    return float(np.median(np.concatenate(gaps))) if gaps else float("nan")


def name(perf: PerfEvents, comms: dict, tid: int) -> str:
    return f"{tid} {perf.comms.get(tid) or comms.get(tid, '?')}"


def report_blamed(blamed, perf: PerfEvents, comms: dict, window_us: float) -> float:
    """Counts, agreement, per-context split and top disagreements; returns the share."""
    matched = blamed[blamed["perf_cur"] >= 0]
    agree = matched["waker_tid"] == matched["perf_cur"]
    share = float(agree.mean()) if len(matched) else 0.0
    print(f"compared (kind wakeup, a task blamed): {len(blamed)}")
    print(f"  matched to a perf sched_waking within {window_us:g} us: {len(matched)}"
          f"  (unmatched {len(blamed) - len(matched)}, not counted as disagreement)")
    if len(matched):
        lag = matched["perf_lag"]
        print(f"  sched_waking -> tailtrace t_runnable: median {lag.median() / 1e3:.1f} us, "
              f"p99 {lag.quantile(0.99) / 1e3:.1f} us")
    print(f"  agreeing waker tid: {int(agree.sum())} of {len(matched)} = {share * 100:.2f}%")
    for ctx, g in matched.groupby("waker_ctx", observed=True):
        a = int((g["waker_tid"] == g["perf_cur"]).sum())
        print(f"    {ctx:13} {a:>8} of {len(g):>8} agree")
    bad = matched[~agree]
    if len(bad):
        print("  disagreements, top 10 (tailtrace waker -> perf current [tailtrace ctx]):")
        pairs = Counter(zip(bad["waker_tid"], bad["perf_cur"], bad["waker_ctx"]))
        for (tt, pc, ctx), n in pairs.most_common(10):
            print(f"    {n:>7}  {name(perf, comms, int(tt)):28} -> "
                  f"{name(perf, comms, int(pc)):28} [{ctx}]")
    return share


def report_irq(irq, perf: PerfEvents, comms: dict) -> None:
    """Interrupt-context wakeups: perf's current task is a bystander tailtrace must not blame."""
    matched = irq[irq["perf_cur"] >= 0]
    same = int((matched["waker_tid"] == matched["perf_cur"]).sum())
    by_ctx = ", ".join(f"{c} {n}" for c, n in irq["waker_ctx"].value_counts().items() if n)
    print(f"interrupt-context wakeups (tailtrace blames no task): {len(irq)} ({by_ctx or 'none'})")
    print(f"  matched {len(matched)} (unmatched {len(irq) - len(matched)}); perf's current task "
          f"= tailtrace's waker_tid in {same}")
    if len(matched):
        print("  the task current in an interrupt is a bystander it interrupted, not the waker;"
              " most often:")
    for tid, n in Counter(matched["perf_cur"]).most_common(5):
        print(f"    {n:>7}  {name(perf, comms, int(tid))}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, type=Path, help="tailtrace run directory")
    ap.add_argument("--perf-script", required=True, type=Path, help="perf script output")
    ap.add_argument("--min-agree", type=float, default=0.99,
                    help="agreeing share of matched records needed (default 0.99)")
    ap.add_argument("--window-us", type=float, default=1000.0,
                    help="longest sched_waking -> t_runnable gap matched (default 1000)")
    a = ap.parse_args(argv)
    try:
        run = load_run(a.run)
        perf = PerfEvents(a.perf_script)
    except (OSError, AnalysisError) as e:
        print(f"oracle_wakers: {e} (give a tailtrace run directory and a perf script text file)",
              file=sys.stderr)
        return 2
    rq = run.runq
    if not run.has("runq") or not len(rq):
        print("oracle_wakers: runq.bin has no records: was the run traced with --events runq?",
              file=sys.stderr)
        return 2
    if not perf.n_waking:
        print(f"oracle_wakers: {a.perf_script} has no sched:sched_waking lines: record with "
              "-e sched:sched_waking and print with perf script -F ...,event,trace",
              file=sys.stderr)
        return 2
    comms = dict(zip(run.tasks["tid"].tolist(), run.tasks["comm"].tolist()))
    rq = rq[rq["kind"] == "wakeup"].reset_index(drop=True)
    rq["perf_cur"], rq["perf_lag"] = match_waking(rq, perf, int(a.window_us * 1000))
    ctx = ", ".join(f"{c} {n}" for c, n in rq["waker_ctx"].value_counts().items() if n)
    print(f"tailtrace wakeup records: {len(rq)} ({ctx}); runq lost: "
          f"{run.lost_events.get('runq', 0)}")
    print(f"perf: {perf.n_waking} sched_waking events, {perf.lost} lost; clock check: "
          f"median |t_runnable - perf sched_waking| = {clock_gap_ns(rq, perf):.0f} ns")
    share = report_blamed(rq[rq["waker_ctx"].isin(WAKER_BLAMES_TASK)], perf, comms, a.window_us)
    report_irq(rq[rq["waker_ctx"].isin(IRQ_CTXS)], perf, comms)
    ok = share >= a.min_agree
    print(f"agreement (waker tid vs perf's current task at sched_waking): {share * 100:.2f}% of "
          f"matched wakeups (needed {a.min_agree * 100:.1f}%): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
