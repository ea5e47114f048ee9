"""Split every request's latency into on-CPU / runnable / lock wait / blocked.

For a request served on thread T during [t_start, t_end] every ns of T's time
is in exactly one state (docs/analysis.md, "Decomposition"). Each part comes
from its own evidence, so the closure check can fail when streams disagree:

  oncpu        = window minus the union of T's off-CPU intervals (switches)
  runq_wakeup  = sum of T's runnable intervals of kind wakeup|wakeup_new (runq)
  runq_preempt = sum of T's runnable intervals of kind preempt (runq)
  throttled    = of those, the time its cgroup (or an ancestor) was throttled by its CPU
                 quota: each interval's first throttled_ns (runq; taken out of the two above)
  lock_wait    = |futex-blocked ∩ off-CPU ∖ runnable|      (wait reasons × switches × runq)
  io_wait      = |I/O-blocked ∖ runnable|  (read, recv, poll, epoll, accept, ...: waits.py)
  sleep        = |sleep-blocked ∖ runnable|  (nanosleep, clock_nanosleep, pause)
  blocked      = sum of off-CPU − |runnable ∩ off-CPU| − lock_wait − io_wait − sleep
                 (blocked for any other reason: other syscalls, page faults, unknown)

Wait reasons come from the syscall each blocking switch-out recorded. Runs
without them (older records, kernels without bpf_task_pt_regs) take lock_wait
from the uprobe locks stream when present (|lock-wait ∩ off-CPU ∖ runnable|)
and leave io_wait and sleep NaN: that time stays in blocked.

so sum(parts) − latency = (off-CPU overlaps with each other) + (runnable time
outside off-CPU time): zero when the streams agree, positive otherwise. Both terms are
kept per request (overlap_ns, outside_ns), so a request that does not close says why.

Every request gets a check (CHECKS, column `check`): its parts are known and close
("ok"), known and do not ("overlap", "outside": the larger of the two terms), or
unknown: its thread was never seen by the probes ("thread"), it ran partly outside
the recorded time (a capture's window, the trace's start or end: "window"), or it
overlaps an edge the kernel never reported ("gap", also when the thread its work was
handed to did while it had the work, handoff.py); "no_switches" without the switch
stream. The bands (attribute.py) are cut among the requests whose parts are known.

Everything is vectorised: threads are laid end to end on one int64 axis
(key = thread index × span + t − t0), interval sets are sorted once, and the
measure of a set inside each window comes from cumulative sums and
np.searchsorted, with the partial intervals at the window edges exact.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .handoff import follow_handoffs
from .states import CLOSE_TOL, STATE_PARTS, blocked_all, overlaps_gap, thread_states

PARTS = ["queue_wait", "oncpu", "runq_wakeup", "runq_preempt", "throttled", "lock_wait", "io_wait",
         "sleep", "blocked"]


CHECKS = ["ok", "overlap", "outside", "thread", "window", "gap", "no_switches"]
CHECK_WHY = {   # "N requests ..." / a failed request "..."
    "ok": "add up to their latency (within 1%)",
    "overlap": "have parts that exceed their latency: off-CPU intervals of their thread "
               "overlap (time counted twice: streams that disagree, or lost events)",
    "outside": "have parts that exceed their latency: runnable time outside their thread's "
               "off-CPU time (a run-queue record without its switch)",
    "thread": "ran on a thread the probes did not trace (parts unknown)",
    "window": "ran partly outside the recorded time, before the trace or the capture's "
              "window began or after it ended (parts unknown)",
    "gap": "overlap a context-switch edge the kernel never reported, on their thread or "
           "on the thread their work was handed to (parts unknown)",
    "no_switches": "have no switch records (on-CPU and blocked time unknown)",
}
UNTRACED = ("thread", "window", "gap")


def _untraced(run, req: pd.DataFrame) -> np.ndarray:
    """Why each request's thread and window were not covered by the probes: a code into
    CHECKS ("thread", "window", "gap"), 0 where they were.

    A thread is traced when it appears in any scheduler stream or in tasks.bin
    (tailtrace lists every traced thread there); in a run with none of them (requests.bin
    alone, no probes) every thread is assumed traced, and in a run with them but no record
    at all (the probes traced other processes) none is. The window must lie inside meta's
    mono_start..mono_end and
    must not overlap a gap of its thread (run.gaps: a switch the kernel never
    reported, so the time there would otherwise pass for time on CPU).
    """
    why = np.zeros(len(req), dtype=np.int8)
    gaps = getattr(run, "gaps", None)
    if gaps is not None and len(gaps):
        why[overlaps_gap(gaps, req["tid"].to_numpy(), req["t_start_ns"].to_numpy(),
                         req["t_end_ns"].to_numpy())] = CHECKS.index("gap")
    t0, t1 = run.meta.get("mono_start_ns"), run.meta.get("mono_end_ns")
    out = np.zeros(len(req), dtype=bool)
    if t0:
        out |= req["t_start_ns"].to_numpy() < int(t0)
    if t1:
        out |= req["t_end_ns"].to_numpy() > int(t1)
    why[out] = CHECKS.index("window")
    if any(run.has(s) for s in ("tasks", "switches", "runq")):
        tids, inv = np.unique(req["tid"].to_numpy(), return_inverse=True)
        seen = np.zeros(len(tids), dtype=bool)
        for df in (run.tasks, run.switches, run.runq):
            seen |= np.isin(tids, df["tid"].to_numpy())
        why[~seen[inv.reshape(-1)]] = CHECKS.index("thread")
    return why


def check_of(untraced: np.ndarray, st: pd.DataFrame) -> pd.Categorical:
    """The requests' checks (CHECKS) from _untraced's codes and their thread_states."""
    code = untraced.copy()
    err, ov, out = (st[c].to_numpy() for c in ("closure_err", "overlap_ns", "outside_ns"))
    known = code == 0
    code[known & np.isnan(err)] = CHECKS.index("no_switches")
    fails = known & (err > CLOSE_TOL)
    code[fails] = np.where(np.nan_to_num(out[fails]) > np.nan_to_num(ov[fails]),
                           CHECKS.index("outside"), CHECKS.index("overlap"))
    return pd.Categorical.from_codes(code, categories=CHECKS)


def decomposed(decomp: pd.DataFrame) -> np.ndarray:
    """Requests whose parts are known (checked "ok", "overlap" or "outside"): the ones a
    band's parts are averaged over. In a run without scheduler streams (every check
    "no_switches"), every request: latency and queue wait are all there is."""
    if "check" not in decomp:
        return np.ones(len(decomp), dtype=bool)
    c = decomp["check"].cat.codes.to_numpy()
    return (c <= CHECKS.index("outside")) | (c == CHECKS.index("no_switches"))


def valid_requests(req: pd.DataFrame) -> np.ndarray:
    """Requests with usable times: 0 < t_enqueue ≤ t_start ≤ t_end (others never finished
    or were recorded wrongly; df_decompose leaves them out and summary.json counts them)."""
    e, s, t = (req[c].to_numpy() for c in ("t_enqueue_ns", "t_start_ns", "t_end_ns"))
    return (e > 0) & (e <= s) & (s <= t)


def df_decompose(run) -> pd.DataFrame:
    """One row per valid request (valid_requests): its latency split into parts, and whether they close.

    Columns: id, conn, tid, pid, status, t_enqueue_ns, t_start_ns, t_end_ns (and ret for
    requests built from spans: the function's raw return value),
    latency_ns (t_end − t_start, service time), e2e_ns (t_end − t_enqueue),
    queue_wait_ns, oncpu_ns, runq_wakeup_ns, runq_preempt_ns, throttled_ns (runnable while a
    CPU quota held its cgroup back), lock_wait_ns, io_wait_ns,
    sleep_ns, blocked_ns (blocked for other reasons), blocked_all_ns (lock_wait + io_wait +
    sleep + blocked), runnable_ns (wakeup + preempt: waiting for a CPU, throttled apart), offcpu_ns, traced (bool),
    closure_err (|Σ parts − latency| / latency), closes (closure_err ≤ 1 %), check
    (CHECKS: why the parts are what they are, CHECK_WHY says it in words).
    Parts are NaN where the stream they come from is absent or the request's
    thread/window was not traced; such requests do not close.
    """
    req = run.requests[valid_requests(run.requests)]
    keep = ["id", "conn", "tid", "pid", "status", "t_enqueue_ns", "t_start_ns", "t_end_ns"]
    out = req[keep + (["ret"] if "ret" in req else [])].reset_index(drop=True)
    out["latency_ns"] = out["t_end_ns"] - out["t_start_ns"]
    out["e2e_ns"] = out["t_end_ns"] - out["t_enqueue_ns"]
    out["queue_wait_ns"] = out["t_start_ns"] - out["t_enqueue_ns"]
    st = thread_states(run, out["tid"].to_numpy(), out["t_start_ns"].to_numpy(),
                       out["t_end_ns"].to_numpy())
    untraced = _untraced(run, out)
    traced = untraced == 0
    for c in STATE_PARTS:
        out[c] = np.where(traced, st[c].to_numpy(), np.nan)
    out["runnable_ns"] = out["runq_wakeup_ns"] + out["runq_preempt_ns"]
    out["blocked_all_ns"] = blocked_all(out)
    out["offcpu_ns"] = np.where(traced, st["offcpu_ns"].to_numpy(), np.nan)
    out["traced"] = traced
    out["closure_err"] = np.where(traced, st["closure_err"].to_numpy(), np.nan)
    out["closes"] = (out["closure_err"] <= CLOSE_TOL).to_numpy()
    out["check"] = check_of(untraced, st)
    out = follow_handoffs(run, out)
    # work handed to a thread that lost an edge while it had it: parts unknown there too
    lost = (out["handoff_unknown_ns"].to_numpy() > 0) & decomposed(out)
    if lost.any():
        out.loc[lost, "check"] = "gap"
    return out
