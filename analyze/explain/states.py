"""Thread states over windows: for thread tid[i] during [w_start[i], w_end[i]], how much
of it was on CPU, runnable (after a wakeup, after a preemption), blocked on a lock, on I/O,
asleep, or blocked otherwise, each nanosecond in exactly one (docs/analysis.md,
"Decomposition"). The decomposition measures each request's window on its thread with
thread_states, the critical path each hop's with thread_brief, the lock chains the holders',
and a handoff the thread it was handed to (handoff.py).

A run's interval sets are built once on one thread axis (intervals.py) and kept on the run
while its streams are the same; overlaps_gap says which windows meet an edge of their
thread the kernel never reported (docs/probes/sched.md, "Unmatched intervals").
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import RUNQ_KINDS, per_run
from .intervals import Axis, IntervalSet, Windows, iv_intersect, iv_union
from .waits import REASONS, has_reasons, reason_codes

REASON_PARTS = {"lock": "lock_wait", "io": "io_wait", "sleep": "sleep"}


# the parts a thread's time in a window splits into (each ns in exactly one)
STATE_PARTS = ["oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "throttled_ns", "lock_wait_ns",
               "io_wait_ns", "sleep_ns", "blocked_ns"]
STATE_COLS = STATE_PARTS + ["offcpu_ns", "overlap_ns", "outside_ns", "closure_err"]
CLOSE_TOL = 0.01  # closure_err at or below this: the window's parts add up to it ("closes")


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def asleep_since_before(run, t0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tid, t_from, t_to) of each thread asleep since before the run began: its first
    run-queue wait is a wakeup's, ending before any switch-out of it was recorded, so the
    switch-out that put it to sleep came before the program attached and no switches row
    holds the sleep. Off CPU from t0 to that wakeup's switch-in (its runnable part then
    lies inside an off-CPU interval, as every other thread's does), not on CPU."""
    none = (np.zeros(0, np.int64),) * 3
    if not run.has("runq") or not run.has("switches"):
        return none
    rq = run.runq
    first = rq.loc[rq.groupby("tid", sort=False)["t_run_ns"].idxmin()]
    first = first[first["kind"].cat.codes.to_numpy() == RUNQ_KINDS.index("wakeup")]
    if not len(first):
        return none
    sw_first = run.switches.groupby("tid", sort=False)["t_off_ns"].min()
    off0 = first["tid"].map(sw_first).fillna(np.iinfo(np.int64).max).to_numpy()
    t_run = first["t_run_ns"].to_numpy(np.int64)
    m = t_run <= off0
    tid = first["tid"].to_numpy(np.int64)[m]
    return tid, np.full(len(tid), t0, np.int64), t_run[m]


class _StateSets:
    """The interval sets of one run on one axis, independent of the windows measured, so a
    run's many thread_states calls (decomposition, each critical-path hop, lock chains)
    build them once: off-CPU (each, and their union), wakeup / preempt runnable, throttled
    (the first throttled_ns of each runnable interval: a CPU quota held it back), runnable ∩
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
            off_s, off_e = s, e
            a_s, a_e, _ = axis.rows(*asleep_since_before(run, axis.t0))
            if len(a_s):   # blocked, for no recorded reason: off CPU, in no reason's set
                order = np.argsort(np.concatenate([s, a_s]), kind="stable")
                off_s, off_e = np.concatenate([s, a_s])[order], np.concatenate([e, a_e])[order]
            self.off = IntervalSet(off_s, off_e)
            ou = (off_s, off_e) if self.off.disjoint else iv_union(off_s, off_e)
            self.off_union = self.off if self.off.disjoint else IntervalSet(*ou, disjoint=True)
        if self.has_rq:
            rq = run.runq
            r_s, r_e, r_rows = axis.rows(*(rq[c].to_numpy()
                                           for c in ("tid", "t_runnable_ns", "t_run_ns")))
            pre = (rq["kind"].cat.codes.to_numpy() == RUNQ_KINDS.index("preempt"))[r_rows]
            thr = (rq["throttled_ns"].to_numpy(np.int64)[r_rows] if "throttled_ns" in rq
                   else np.zeros(len(r_rows), np.int64))
            del r_rows
            # a wait's throttled part is its start (throttle.bpf.h); the rest is runnable
            r_mid = r_s + np.minimum(thr, r_e - r_s)
            t = thr > 0
            self.throttled = IntervalSet(r_s[t], r_mid[t])
            self.preempt = IntervalSet(r_mid[pre], r_e[pre])
            self.wakeup = IntervalSet(r_mid[~pre], r_e[~pre])
            del pre, thr, r_mid, t
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
    rn = st.wakeup.sum(k) + st.preempt.sum(k) + st.throttled.sum(k) if st.has_rq else nan
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
    rq_w, rq_p, thr = ((st.wakeup.sum(k), st.preempt.sum(k), st.throttled.sum(k)) if st.has_rq
                       else (nan, nan, nan))
    rq_in_off = st.rin.sum(k)
    why = {"lock_wait": nan, "io_wait": nan, "sleep": nan}
    for part, (blocked_set, runnable_part) in st.why.items():
        why[part] = blocked_set.sum(k) - runnable_part.sum(k)
    known = sum(np.nan_to_num(v) for v in why.values())
    blocked = off_sum - rq_in_off - known  # NaN without switches

    total = oncpu + np.nan_to_num(rq_w) + np.nan_to_num(rq_p) + np.nan_to_num(thr) + known + blocked
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(total - lat) / lat
    err = np.where(lat == 0, np.where(np.abs(total - lat) == 0, 0.0, np.inf), err)
    overlap = off_sum - (lat - oncpu)                     # NaN without switches
    outside = rq_w + rq_p + thr - rq_in_off               # NaN without runq
    res = {"oncpu_ns": oncpu, "runq_wakeup_ns": rq_w, "runq_preempt_ns": rq_p, "throttled_ns": thr,
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
