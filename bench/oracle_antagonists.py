#!/usr/bin/env python3
"""Compare who held the CPU during tailtrace's runnable intervals with perf's own reading.

    python3 bench/oracle_antagonists.py --run RUN_DIR --perf-script SCRIPT.txt [--min 0.99]

RUN_DIR: a tailtrace run directory with runq.bin and occupancy.bin (the cpu event);
SCRIPT.txt: `perf script --ns -F cpu,time,event,trace` of a system-wide `perf record -k mono`
of sched_switch taken during the same run (bench/oracle_perf_sched.sh --antagonists).

The perf side is rebuilt from the raw switches alone, independently of tailtrace's code: on
each CPU, the task perf saw switched in holds it until the next switch. perf on this VM
drops events silently now and then; where a CPU's next switch names as prev a task other
than the one perf last switched in there, the segment between is unknown and every
runnable interval touching it is left out (counted). For every other tailtrace runnable
interval [t_runnable, t_run] on CPU c, perf's occupants of c in it are summed per task,
tailtrace's come from analyze/antagonists.df_runnable_occupants, and

    agreement = Σ over intervals and tasks of min(tailtrace ns, perf ns) / Σ interval ns

is the share of runnable time both attribute to the same task. Exit status 0 when it is at
least --min, 1 below, 3 when perf vouched for less than half of tailtrace's runnable time
(inconclusive), 2 on bad input.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyze.explain.antagonists import df_runnable_occupants  # noqa: E402
from analyze.load.errors import AnalysisError  # noqa: E402
from analyze.load.load import load_run  # noqa: E402

EVENT_LINE = re.compile(r"^\s*\[(\d+)\]\s+(\d+)\.(\d{9}):\s+sched:sched_switch:\s(.*)$")
SWITCH_ARGS = re.compile(r"\bprev_pid=(\d+) prev_prio=\S+ prev_state=\S+ ==> .*\bnext_pid=(\d+) "
                         r"next_prio=\S+\s*$")


def perf_segments(lines) -> pd.DataFrame:
    """Per CPU: [t_from, t_to) held by tid, from perf's switches; ok = False where perf's
    chain broke (the next switch's prev is not the task perf switched in)."""
    cpu, t, prev, nxt = [], [], [], []
    for line in lines:
        m = EVENT_LINE.match(line)
        if not m:
            continue
        s = SWITCH_ARGS.search(m.group(4))
        if not s:
            continue
        cpu.append(int(m.group(1)))
        t.append(int(m.group(2)) * 10**9 + int(m.group(3)))
        prev.append(int(s.group(1)))
        nxt.append(int(s.group(2)))
    df = pd.DataFrame({"cpu": cpu, "t": t, "prev": prev, "next": nxt}).sort_values(
        ["cpu", "t"], kind="stable")
    c, tt = df["cpu"].to_numpy(), df["t"].to_numpy(np.int64)
    same = np.append(c[1:] == c[:-1], False)
    ok = same & np.append(df["prev"].to_numpy()[1:] == df["next"].to_numpy()[:-1], False)
    return pd.DataFrame({"cpu": c[same], "t_from": tt[same], "t_to": np.append(tt[1:], 0)[same],
                         "tid": df["next"].to_numpy()[same], "ok": ok[same]})


def perf_occupants(seg: pd.DataFrame, rq: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(rows runq_idx, tid, ns from perf; per interval: did perf cover it whole and well)."""
    a, b = rq["t_runnable_ns"].to_numpy(np.int64), rq["t_run_ns"].to_numpy(np.int64)
    rcpu = rq["cpu"].to_numpy(np.int64)
    good = np.zeros(len(rq), bool)
    parts = []
    for c in np.unique(rcpu):
        ri = np.flatnonzero(rcpu == c)
        sg = seg[seg["cpu"] == c]
        S, E = sg["t_from"].to_numpy(np.int64), sg["t_to"].to_numpy(np.int64)
        T, OK = sg["tid"].to_numpy(np.int64), sg["ok"].to_numpy(bool)
        lo = np.searchsorted(S, a[ri], side="right") - 1
        hi = np.searchsorted(S, b[ri], side="left")
        n = np.where(lo >= 0, hi - lo, 0)
        rep = np.repeat(np.arange(len(ri)), n)
        k = np.maximum(lo, 0)[rep] + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
        s = np.maximum(S[k], a[ri][rep])
        e = np.minimum(E[k], b[ri][rep])
        bad = np.bincount(rep, weights=(~OK[k]).astype(float), minlength=len(ri)) > 0
        good[ri] = (lo >= 0) & ~bad & (n > 0)
        keep = e > s
        parts.append(pd.DataFrame({"runq_idx": ri[rep][keep], "tid": T[k][keep],
                                   "ns": (e - s)[keep]}))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        {"runq_idx": [], "tid": [], "ns": []})
    return rows, good


def compare(run, seg: pd.DataFrame) -> dict:
    rq = run.runq.reset_index(drop=True)
    perf, good = perf_occupants(seg, rq)
    tt = df_runnable_occupants(run)
    dur = (rq["t_run_ns"] - rq["t_runnable_ns"]).to_numpy(np.int64)
    idx = np.flatnonzero(good & (dur > 0))
    tt = tt[np.isin(tt["runq_idx"].to_numpy(), idx)].groupby(["runq_idx", "tid"])["ns"].sum()
    pf = perf[np.isin(perf["runq_idx"].to_numpy(), idx)].groupby(["runq_idx", "tid"])["ns"].sum()
    both = pd.concat([tt.rename("tt"), pf.rename("perf")], axis=1).fillna(0)
    agree = float(np.minimum(both["tt"], both["perf"]).sum())
    total = float(dur[idx].sum())
    return {"intervals": int(len(rq)), "compared": int(len(idx)),
            "runnable_ms": float(dur.sum()) / 1e6, "compared_ms": total / 1e6,
            "agreement": agree / total if total else float("nan"),
            "perf_chain_breaks": int((~seg["ok"]).sum())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, type=Path)
    ap.add_argument("--perf-script", required=True, type=Path)
    ap.add_argument("--min", type=float, default=0.99)
    a = ap.parse_args(argv)
    try:
        run = load_run(a.run)
    except AnalysisError as e:
        print(f"oracle_antagonists: {e}", file=sys.stderr)
        return 2
    if not run.has("occupancy"):
        print(f"oracle_antagonists: {a.run} has no occupancy.bin: record with tailtrace's cpu "
              "event (--events runq,switch,cpu)", file=sys.stderr)
        return 2
    with open(a.perf_script, encoding="utf-8", errors="replace") as f:
        seg = perf_segments(f)
    r = compare(run, seg)
    share = r["compared_ms"] / r["runnable_ms"] if r["runnable_ms"] else 0.0
    print(f"runnable intervals {r['intervals']:,} ({r['runnable_ms']:,.1f} ms); perf vouched for "
          f"{r['compared']:,} ({r['compared_ms']:,.1f} ms, {share * 100:.1f}%); perf chain breaks "
          f"{r['perf_chain_breaks']:,}")
    print(f"same task held the CPU in both: {r['agreement'] * 100:.2f}% of the compared runnable "
          f"time (min {a.min * 100:.0f}%)")
    if share < 0.5:
        print("INCONCLUSIVE: perf dropped too much to vouch (run again)")
        return 3
    ok = r["agreement"] >= a.min
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
