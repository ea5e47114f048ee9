"""Split every request's latency into on-CPU / runnable / lock wait / blocked.

For a request served on thread T during [t_start, t_end] every ns of T's time
is in exactly one state (docs/analysis.md, "Decomposition"). Each part comes
from its own evidence, so the closure check can fail when streams disagree:

  oncpu        = window minus the union of T's off-CPU intervals (switches)
  runq_wakeup  = sum of T's runnable intervals of kind wakeup|wakeup_new (runq)
  runq_preempt = sum of T's runnable intervals of kind preempt (runq)
  lock_wait    = |lock-wait ∩ off-CPU ∖ runnable|          (locks × switches × runq)
  blocked      = sum of off-CPU − |runnable ∩ off-CPU| − lock_wait

so sum(parts) − latency = (off-CPU overlaps with each other) + (runnable time
outside off-CPU time): zero when the streams agree, positive otherwise.

Everything is vectorised: threads are laid end to end on one int64 axis
(key = thread index × span + t − t0), interval sets are sorted once, and the
measure of a set inside each window comes from cumulative sums and
np.searchsorted, with the partial intervals at the window edges exact.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from .errors import AnalysisError

PARTS = ["queue_wait", "oncpu", "runq_wakeup", "runq_preempt", "lock_wait", "blocked"]
CLOSE_TOL = 0.01  # closure_err at or below this: the request "closes"


# ---- interval algebra on the thread axis -------------------------------------

class Axis:
    """Maps (tid, t) to one int64 key: each thread owns [g*span, g*span + span)."""

    def __init__(self, tids: np.ndarray, t0: int, t1: int):
        self.tids = np.unique(np.asarray(tids, dtype=np.int64))
        self.t0, self.t1 = int(t0), int(t1)
        self.span = self.t1 - self.t0 + 1
        if self.span <= 0 or (len(self.tids) + 1) * self.span >= 2 ** 62:
            raise AnalysisError(f"time range {self.t0}..{self.t1} over {len(self.tids)} threads "
                                "does not fit one int64 axis: are the timestamps CLOCK_MONOTONIC ns?")

    def index(self, tid) -> tuple[np.ndarray, np.ndarray]:
        """Thread index of each tid and whether the tid is on the axis."""
        tid = np.asarray(tid, dtype=np.int64)
        g = np.searchsorted(self.tids, tid)
        g = np.minimum(g, max(len(self.tids) - 1, 0))
        ok = (self.tids[g] == tid) if len(self.tids) else np.zeros(len(tid), bool)
        return g, ok

    def key(self, g: np.ndarray, t) -> np.ndarray:
        t = np.clip(np.asarray(t, dtype=np.int64), self.t0, self.t1)
        return g * self.span + (t - self.t0)

    def intervals(self, tid, t_s, t_e) -> tuple[np.ndarray, np.ndarray]:
        """Keys of intervals [t_s, t_e] of threads on the axis, clipped to [t0, t1]."""
        g, ok = self.index(tid)
        t_s, t_e = np.asarray(t_s, dtype=np.int64), np.asarray(t_e, dtype=np.int64)
        ok &= (t_e > t_s) & (t_e > self.t0) & (t_s < self.t1)
        g = g[ok]
        return self.key(g, t_s[ok]), self.key(g, t_e[ok])


def iv_union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering the same points as [s, e)."""
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    return s[first], reach[last]


def _low_bit(code: np.ndarray) -> np.ndarray:
    """code & 1 as int8 without an int64 temporary (low byte of each little-endian word)."""
    if sys.byteorder == "little" and code.dtype == np.int64 and code.flags.c_contiguous:
        return (code.view(np.uint8)[::8] & np.uint8(1)).view(np.int8)
    return (code & 1).astype(np.int8)


def _edges(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Interleaved edge codes s0*2+1, e0*2, s1*2+1, ... of a disjoint sorted set."""
    code = np.empty(2 * len(s), dtype=np.int64)
    code[0::2] = s * 2 + 1
    code[1::2] = e * 2
    return code


def iv_intersect(a_s, a_e, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two sets of disjoint, sorted intervals (as iv_union returns)."""
    if len(a_s) == 0 or len(b_s) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    # code = key*2 + is_start: at one key, ends sort before starts (half-open).
    # Each disjoint sorted set interleaves into one sorted run (s0 < e0 <= s1 ...),
    # so a stable sort (timsort) only merges two runs: linear time.
    code = np.concatenate([_edges(a_s, a_e), _edges(b_s, b_e)])
    code.sort(kind="stable")
    depth = np.cumsum(_low_bit(code) * np.int8(2) - np.int8(1), dtype=np.int8)  # 0..2
    i = np.flatnonzero(depth == 2)
    del depth
    s, e = code[i] >> 1, code[i + 1] >> 1
    keep = e > s
    return s[keep], e[keep]


def window_sum(s, e, w_s, w_e, disjoint: bool = False) -> np.ndarray:
    """For each window [w_s, w_e]: sum over intervals of |[s, e] ∩ window|.

    Overlapping intervals count once each. With G(q) = sum |[s,e] ∩ (-inf, q]|
    = q·#(s≤q) − Σ(s≤q) − q·#(e≤q) + Σ(e≤q), the answer is G(w_e) − G(w_s).
    The cumulative sums may wrap around int64; the difference is still exact
    (two's complement arithmetic is exact modulo 2**64 and the result is small).
    disjoint=True: s and e are a disjoint sorted set, so no sorting is needed.
    """
    w_s, w_e = np.asarray(w_s, dtype=np.int64), np.asarray(w_e, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(len(w_s), dtype=np.int64)
    # Disjoint sorted sets (iv_union / iv_intersect output) have sorted starts and ends.
    S, E = (s, e) if disjoint else (np.sort(s), np.sort(e))
    cS = np.concatenate([[0], np.cumsum(S)])
    cE = np.concatenate([[0], np.cumsum(E)])

    def G(q):
        ns = np.searchsorted(S, q, side="right")
        ne = np.searchsorted(E, q, side="right")
        return q * (ns - ne) - cS[ns] + cE[ne]

    with np.errstate(over="ignore"):
        return G(w_e) - G(w_s)


# ---- thread states over windows ----------------------------------------------

STATE_COLS = ["oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "blocked_ns",
              "offcpu_ns", "closure_err"]


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _offcpu(run, axis, k_s, k_e, lat):
    """(Σ off-CPU, on-CPU = window − |∪ off-CPU|, ∪ off-CPU) per window, from switches."""
    sw = run.switches
    o_s, o_e = axis.intervals(sw["tid"].to_numpy(), sw["t_off_ns"].to_numpy(),
                              sw["t_on_ns"].to_numpy())
    off_sum = window_sum(o_s, o_e, k_s, k_e).astype(np.float64)
    ou = iv_union(o_s, o_e)
    del o_s, o_e
    return off_sum, lat - window_sum(*ou, k_s, k_e, disjoint=True), ou


def _runnable(run, axis, k_s, k_e, ou):
    """(wakeup, preempt, |runnable ∩ off-CPU|) per window and the set runnable ∩ off-CPU."""
    rq = run.runq
    pre = (rq["kind"] == "preempt").to_numpy()
    r_t, r_a, r_b = rq["tid"].to_numpy(), rq["t_runnable_ns"].to_numpy(), rq["t_run_ns"].to_numpy()
    p_s, p_e = axis.intervals(r_t[pre], r_a[pre], r_b[pre])
    u_s, u_e = axis.intervals(r_t[~pre], r_a[~pre], r_b[~pre])
    rq_p = window_sum(p_s, p_e, k_s, k_e).astype(np.float64)
    rq_w = window_sum(u_s, u_e, k_s, k_e).astype(np.float64)
    if ou is None:
        return rq_w, rq_p, np.zeros(len(k_s)), _EMPTY
    ru = iv_union(np.concatenate([p_s, u_s]), np.concatenate([p_e, u_e]))
    del p_s, p_e, u_s, u_e
    rin = iv_intersect(*ru, *ou)
    del ru
    return rq_w, rq_p, window_sum(*rin, k_s, k_e, disjoint=True).astype(np.float64), rin


def _lock_wait(run, axis, k_s, k_e, ou, rin):
    """|lock-wait ∩ off-CPU ∖ runnable| per window (rin: runnable ∩ off-CPU)."""
    lk = run.locks
    l_s, l_e = axis.intervals(lk["tid"].to_numpy(), lk["t_request_ns"].to_numpy(),
                              lk["t_acquired_ns"].to_numpy())
    lu = iv_union(l_s, l_e)
    lock = window_sum(*iv_intersect(*lu, *ou), k_s, k_e, disjoint=True).astype(np.float64)
    return lock - window_sum(*iv_intersect(*lu, *rin), k_s, k_e, disjoint=True)


def thread_states(run, tid, w_start, w_end) -> pd.DataFrame:
    """State of thread tid[i] during [w_start[i], w_end[i]], one row per window.

    Columns STATE_COLS (ns; float with NaN where a needed stream is absent or
    the window is invalid). offcpu_ns is the sum of off-CPU intervals (before
    de-duplication). closure_err = |Σ parts − window| / window. Without
    switches only the runnable parts are known; without runq the runnable
    parts are NaN and that time stays in blocked; without locks lock_wait is
    NaN and that time stays in blocked.
    """
    tid = np.asarray(tid, dtype=np.int64)
    ws, we = np.asarray(w_start, dtype=np.int64), np.asarray(w_end, dtype=np.int64)
    n = len(tid)
    valid = (we >= ws) & (ws > 0)
    nan = np.full(n, np.nan)
    if not valid.any():
        return pd.DataFrame({c: nan for c in STATE_COLS})
    axis = Axis(tid[valid], ws[valid].min(), we[valid].max())
    g, _ = axis.index(tid)
    k_s, k_e = axis.key(g, ws), axis.key(g, we)
    lat = (we - ws).astype(np.float64)

    has_sw = run.has("switches")
    off_sum, oncpu, ou = _offcpu(run, axis, k_s, k_e, lat) if has_sw else (nan, nan, None)
    rq_w, rq_p, rq_in_off, rin = (_runnable(run, axis, k_s, k_e, ou) if run.has("runq")
                                  else (nan, nan, np.zeros(n), _EMPTY))
    lock = _lock_wait(run, axis, k_s, k_e, ou, rin) if run.has("locks") and has_sw else nan
    blocked = off_sum - rq_in_off - np.nan_to_num(lock)  # NaN without switches

    total = oncpu + np.nan_to_num(rq_w) + np.nan_to_num(rq_p) + np.nan_to_num(lock) + blocked
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(total - lat) / lat
    err = np.where(lat == 0, np.where(np.abs(total - lat) == 0, 0.0, np.inf), err)
    res = {"oncpu_ns": oncpu, "runq_wakeup_ns": rq_w, "runq_preempt_ns": rq_p,
           "lock_wait_ns": lock, "blocked_ns": blocked, "offcpu_ns": off_sum, "closure_err": err}
    return pd.DataFrame({c: np.where(valid, v, np.nan) for c, v in res.items()})


def _traced(run, req: pd.DataFrame) -> np.ndarray:
    """Requests whose thread and window the probes covered.

    A thread is traced when it appears in any scheduler stream or in tasks.bin
    (tailtrace lists every traced thread there); without tasks.bin every thread
    is assumed traced. The window must lie inside meta's mono_start..mono_end.
    """
    ok = np.ones(len(req), dtype=bool)
    if len(run.tasks):
        tids, inv = np.unique(req["tid"].to_numpy(), return_inverse=True)
        seen = np.zeros(len(tids), dtype=bool)
        for df in (run.tasks, run.switches, run.runq):
            seen |= np.isin(tids, df["tid"].to_numpy())
        ok &= seen[inv.reshape(-1)]
    t0, t1 = run.meta.get("mono_start_ns"), run.meta.get("mono_end_ns")
    if t0:
        ok &= req["t_start_ns"].to_numpy() >= int(t0)
    if t1:
        ok &= req["t_end_ns"].to_numpy() <= int(t1)
    return ok


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
    queue_wait_ns, oncpu_ns, runq_wakeup_ns, runq_preempt_ns, lock_wait_ns,
    blocked_ns, runnable_ns (wakeup + preempt), offcpu_ns, traced (bool),
    closure_err (|Σ parts − latency| / latency), closes (closure_err ≤ 1 %).
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
    traced = _traced(run, out)
    for c in ["oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "blocked_ns"]:
        out[c] = np.where(traced, st[c].to_numpy(), np.nan)
    out["runnable_ns"] = out["runq_wakeup_ns"] + out["runq_preempt_ns"]
    out["offcpu_ns"] = np.where(traced, st["offcpu_ns"].to_numpy(), np.nan)
    out["traced"] = traced
    out["closure_err"] = np.where(traced, st["closure_err"].to_numpy(), np.nan)
    out["closes"] = (out["closure_err"] <= CLOSE_TOL).to_numpy()
    return out
