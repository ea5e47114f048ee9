"""Split every request's latency into on-CPU / runnable / lock wait / blocked.

For a request served on thread T during [t_start, t_end] every ns of T's time
is in exactly one state (docs/analysis.md, "Decomposition"). Each part comes
from its own evidence, so the closure check can fail when streams disagree:

  oncpu        = window minus the union of T's off-CPU intervals (switches)
  runq_wakeup  = sum of T's runnable intervals of kind wakeup|wakeup_new (runq)
  runq_preempt = sum of T's runnable intervals of kind preempt (runq)
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
overlaps an edge the kernel never reported ("gap"); "no_switches" without the switch
stream. The bands (attribute.py) are cut among the requests whose parts are known.

Everything is vectorised: threads are laid end to end on one int64 axis
(key = thread index × span + t − t0), interval sets are sorted once, and the
measure of a set inside each window comes from cumulative sums and
np.searchsorted, with the partial intervals at the window edges exact.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import RUNQ_KINDS, per_run
from .intervals import Axis, IntervalSet, Windows, iv_intersect, iv_union
from .waits import REASONS, has_reasons, reason_codes

PARTS = ["queue_wait", "oncpu", "runq_wakeup", "runq_preempt", "lock_wait", "io_wait", "sleep",
         "blocked"]
# the parts that split blocked time by wait reason (waits.REASONS), "other" stays blocked
REASON_PARTS = {"lock": "lock_wait", "io": "io_wait", "sleep": "sleep"}
CLOSE_TOL = 0.01  # closure_err at or below this: the request "closes"


# ---- thread states over windows ----------------------------------------------

STATE_COLS = ["oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "io_wait_ns",
              "sleep_ns", "blocked_ns", "offcpu_ns", "overlap_ns", "outside_ns", "closure_err"]


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


class _StateSets:
    """The interval sets of one run on one axis, independent of the windows measured, so a
    run's many thread_states calls (decomposition, each critical-path hop, lock chains)
    build them once: off-CPU (each, and their union), wakeup / preempt runnable, runnable ∩
    off-CPU, and per wait reason (or the uprobe lock waits) the blocked and blocked ∩
    runnable parts."""

    def __init__(self, run, axis: Axis):
        self.axis = axis
        self.has_sw, self.has_rq = run.has("switches"), run.has("runq")
        self.reasons = self.has_sw and has_reasons(run)
        self.locks = self.has_sw and not self.reasons and run.has("locks")
        ou, rin, self.why = None, _EMPTY, {}
        if self.has_sw:
            # sorted by key once; each subset below is then sorted too, and disjoint when
            # the whole is (a thread's own off-CPU intervals do not overlap)
            sw = run.switches
            s, e, rows = axis.rows(*(sw[c].to_numpy() for c in ("tid", "t_off_ns", "t_on_ns")))
            self.off = IntervalSet(s, e)
            ou = (s, e) if self.off.disjoint else iv_union(s, e)
            self.off_union = self.off if self.off.disjoint else IntervalSet(*ou, disjoint=True)
        if self.has_rq:
            rq = run.runq
            r_s, r_e, r_rows = axis.rows(*(rq[c].to_numpy()
                                           for c in ("tid", "t_runnable_ns", "t_run_ns")))
            pre = (rq["kind"].cat.codes.to_numpy() == RUNQ_KINDS.index("preempt"))[r_rows]
            del r_rows
            self.preempt, self.wakeup = IntervalSet(r_s[pre], r_e[pre]), IntervalSet(r_s[~pre], r_e[~pre])
            del pre
            if ou is not None:
                ru = (r_s, r_e) if IntervalSet.is_disjoint(r_s, r_e) else iv_union(r_s, r_e)
                rin = iv_intersect(*ru, *ou)
            del r_s, r_e
        self.rin = IntervalSet(*rin, disjoint=True)
        if self.reasons:
            sw = run.switches
            vol = sw["voluntary"].to_numpy(bool)[rows]
            code = reason_codes(sw["syscall"].to_numpy()[rows])
            for reason, part in REASON_PARTS.items():
                m = vol & (code == REASONS.index(reason))
                u = (s[m], e[m]) if self.off.disjoint else iv_union(s[m], e[m])
                self.why[part] = (IntervalSet(*u, disjoint=True),
                                  IntervalSet(*iv_intersect(*u, *rin), disjoint=True))
        elif self.locks:
            lk = run.locks
            lu = iv_union(*axis.intervals(lk["tid"].to_numpy(), lk["t_request_ns"].to_numpy(),
                                          lk["t_acquired_ns"].to_numpy()))
            self.why["lock_wait"] = (IntervalSet(*iv_intersect(*lu, *ou), disjoint=True),
                                     IntervalSet(*iv_intersect(*lu, *rin), disjoint=True))


def _state_sets(run, tid: np.ndarray, t_lo: int, t_hi: int, why: bool = True) -> _StateSets:
    """The run's _StateSets on an axis holding every traced thread and the query's threads
    over the run's whole time, cached on the run (rebuilt when a query falls outside it or
    a stream frame was replaced, or when why is wanted and drop_reason_sets dropped it)."""
    frames = tuple((id(getattr(run, s)), len(getattr(run, s)))
                   for s in ("switches", "runq", "locks"))
    tids = np.unique(tid)

    def fits(sets) -> bool:
        ax = sets.axis
        return (bool(ax.index(tids)[1].all()) and ax.t0 <= t_lo and t_hi <= ax.t1
                and (sets.why is not None or not why))

    def build() -> _StateSets:
        # -1 too: a lock chain asks for the unknown holder, which must not cost a rebuild
        parts, lo, hi = [tids, np.array([-1], np.int64)], [t_lo], [t_hi]
        for s, a, b in (("switches", "t_off_ns", "t_on_ns"),
                        ("runq", "t_runnable_ns", "t_run_ns"),
                        ("locks", "t_request_ns", "t_acquired_ns")):
            df = getattr(run, s)
            if len(df):
                parts.append(np.unique(df["tid"].to_numpy(np.int64)))
                lo.append(int(df[a].min()))
                hi.append(int(df[b].max()))
        return _StateSets(run, Axis(np.concatenate(parts), max(min(lo), 1), max(hi)))

    return per_run(run, "_state_sets", frames, build, fits)


def drop_reason_sets(run) -> None:
    """Let go of the per-reason sets (the why of _StateSets: blocked on a lock, IO, sleep,
    and their runnable parts) kept on the run, once only thread_brief needs the sets (the
    critical path's hops): a later thread_states builds them all again."""
    c = getattr(run, "_state_sets", None)
    if c is not None:
        c[1].why = None


def thread_brief(run, tid, w_start, w_end) -> pd.DataFrame:
    """oncpu_ns, runnable_ns, blocked_all_ns (whatever the reason) of thread tid[i] during
    [w_start[i], w_end[i]]: thread_states' three totals for windows that need no more (each
    hop of the critical path), measuring 5 interval sets instead of 9. NaN where a stream
    is absent or the window invalid; needs w_start > 0."""
    tid = np.asarray(tid, dtype=np.int64)
    ws, we = np.asarray(w_start, dtype=np.int64), np.asarray(w_end, dtype=np.int64)
    nan = np.full(len(tid), np.nan)
    valid = (we >= ws) & (ws > 0)
    if not valid.any():
        return pd.DataFrame({"oncpu_ns": nan, "runnable_ns": nan, "blocked_all_ns": nan})
    st = _state_sets(run, tid[valid], int(ws[valid].min()), int(we[valid].max()), why=False)
    g, _ = st.axis.index(tid)
    k = Windows(st.axis.key(g, ws), st.axis.key(g, we))
    lat = (we - ws).astype(np.float64)
    on = lat - st.off_union.sum(k) if st.has_sw else nan
    rn = st.wakeup.sum(k) + st.preempt.sum(k) if st.has_rq else nan
    bl = st.off.sum(k) - st.rin.sum(k) if st.has_sw else nan
    res = {"oncpu_ns": on, "runnable_ns": rn, "blocked_all_ns": bl}
    return pd.DataFrame({c: np.where(valid, v, np.nan) for c, v in res.items()}, copy=False)


def thread_states(run, tid, w_start, w_end) -> pd.DataFrame:
    """State of thread tid[i] during [w_start[i], w_end[i]], one row per window.

    Columns STATE_COLS (ns; float with NaN where a needed stream is absent or
    the window is invalid). offcpu_ns is the sum of off-CPU intervals (before
    de-duplication). closure_err = |Σ parts − window| / window, and Σ parts − window =
    overlap_ns (off-CPU time counted more than once: off-CPU intervals that overlap)
    + outside_ns (runnable time outside off-CPU time; NaN without runq). Without
    switches only the runnable parts are known; without runq the runnable
    parts are NaN and that time stays in blocked; without wait reasons io_wait
    and sleep are NaN, and lock_wait comes from the locks stream (NaN without
    it); what they do not cover stays in blocked.
    """
    tid = np.asarray(tid, dtype=np.int64)
    ws, we = np.asarray(w_start, dtype=np.int64), np.asarray(w_end, dtype=np.int64)
    n = len(tid)
    valid = (we >= ws) & (ws > 0)
    nan = np.full(n, np.nan)
    if not valid.any():
        return pd.DataFrame({c: nan for c in STATE_COLS})
    st = _state_sets(run, tid[valid], int(ws[valid].min()), int(we[valid].max()))
    g, _ = st.axis.index(tid)
    k = Windows(st.axis.key(g, ws), st.axis.key(g, we))
    lat = (we - ws).astype(np.float64)

    off_sum, oncpu = ((st.off.sum(k), lat - st.off_union.sum(k)) if st.has_sw
                      else (nan, nan))
    rq_w, rq_p = ((st.wakeup.sum(k), st.preempt.sum(k)) if st.has_rq else (nan, nan))
    rq_in_off = st.rin.sum(k)
    why = {"lock_wait": nan, "io_wait": nan, "sleep": nan}
    for part, (blocked_set, runnable_part) in st.why.items():
        why[part] = blocked_set.sum(k) - runnable_part.sum(k)
    known = sum(np.nan_to_num(v) for v in why.values())
    blocked = off_sum - rq_in_off - known  # NaN without switches

    total = oncpu + np.nan_to_num(rq_w) + np.nan_to_num(rq_p) + known + blocked
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(total - lat) / lat
    err = np.where(lat == 0, np.where(np.abs(total - lat) == 0, 0.0, np.inf), err)
    overlap = off_sum - (lat - oncpu)                     # NaN without switches
    outside = rq_w + rq_p - rq_in_off                     # NaN without runq
    res = {"oncpu_ns": oncpu, "runq_wakeup_ns": rq_w, "runq_preempt_ns": rq_p,
           "lock_wait_ns": why["lock_wait"], "io_wait_ns": why["io_wait"],
           "sleep_ns": why["sleep"], "blocked_ns": blocked, "offcpu_ns": off_sum,
           "overlap_ns": overlap, "outside_ns": outside, "closure_err": err}
    return pd.DataFrame({c: np.where(valid, v, np.nan) for c, v in res.items()}, copy=False)


def blocked_all(states: pd.DataFrame) -> np.ndarray:
    """Blocked time whatever the reason: lock_wait + io_wait + sleep + blocked (NaN parts
    count 0; NaN when blocked itself is)."""
    known = sum(states[f"{p}_ns"].fillna(0).to_numpy() for p in REASON_PARTS.values())
    return states["blocked_ns"].to_numpy() + known


# Each request's check (column `check`): why its parts are what they are.
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
    "gap": "overlap a context-switch edge the kernel never reported (parts unknown)",
    "no_switches": "have no switch records (on-CPU and blocked time unknown)",
}
UNTRACED = ("thread", "window", "gap")


def _untraced(run, req: pd.DataFrame) -> np.ndarray:
    """Why each request's thread and window were not covered by the probes: a code into
    CHECKS ("thread", "window", "gap"), 0 where they were.

    A thread is traced when it appears in any scheduler stream or in tasks.bin
    (tailtrace lists every traced thread there); without tasks.bin every thread
    is assumed traced. The window must lie inside meta's mono_start..mono_end and
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
    if len(run.tasks):
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
    """Requests whose parts are known (checked "ok", "overlap" or "outside"): the ones the
    bands are cut among. Where no request's parts are known (no scheduler streams), every
    request: then latency and queue wait are all there is."""
    if "check" not in decomp:
        return np.ones(len(decomp), dtype=bool)
    c = decomp["check"].cat.codes.to_numpy()
    m = c <= CHECKS.index("outside")
    return m if m.any() else np.ones(len(decomp), dtype=bool)


def overlaps_gap(gaps: pd.DataFrame, tid, t0, t1) -> np.ndarray:
    """For each window [t0, t1) of thread tid: does it overlap one of that thread's gaps
    (run.gaps rows: tid, t_from_ns, t_to_ns)? Per thread: sort the gaps by start, and a
    window overlaps iff the furthest end among the gaps starting before t1 is after t0."""
    tid, t0, t1 = np.asarray(tid), np.asarray(t0), np.asarray(t1)
    hit = np.zeros(len(tid), dtype=bool)
    for g_tid, g in gaps.groupby("tid", sort=False):
        rows = np.flatnonzero(tid == g_tid)
        if not len(rows):
            continue
        g = g.sort_values("t_from_ns", kind="stable")
        starts = g["t_from_ns"].to_numpy()
        ends = np.maximum.accumulate(g["t_to_ns"].to_numpy())
        i = np.searchsorted(starts, t1[rows], side="left") - 1
        hit[rows] = (i >= 0) & (ends[np.maximum(i, 0)] > t0[rows])
    return hit


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
    queue_wait_ns, oncpu_ns, runq_wakeup_ns, runq_preempt_ns, lock_wait_ns, io_wait_ns,
    sleep_ns, blocked_ns (blocked for other reasons), blocked_all_ns (lock_wait + io_wait +
    sleep + blocked), runnable_ns (wakeup + preempt), offcpu_ns, traced (bool),
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
    for c in ["oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "io_wait_ns",
              "sleep_ns", "blocked_ns"]:
        out[c] = np.where(traced, st[c].to_numpy(), np.nan)
    out["runnable_ns"] = out["runq_wakeup_ns"] + out["runq_preempt_ns"]
    out["blocked_all_ns"] = blocked_all(out)
    out["offcpu_ns"] = np.where(traced, st["offcpu_ns"].to_numpy(), np.nan)
    out["traced"] = traced
    out["closure_err"] = np.where(traced, st["closure_err"].to_numpy(), np.nan)
    out["closes"] = (out["closure_err"] <= CLOSE_TOL).to_numpy()
    out["check"] = check_of(untraced, st)
    return out
