"""A request across threads: the waits of a request's thread for another thread of its process
that did the request's work, charged to that thread's states.

A thread-pool server reads a request on the thread that owns its socket (an event loop, an
acceptor) and does the work on another (a pool thread), which wakes the first when the answer
is ready. The request's span is on the first thread, whose own states then say only "waiting
for I/O" (its epoll_wait) while the work ran elsewhere. So a request is decomposed along its
critical path (the model of Perfetto's critical path and of wPerf's wait-for graph): each wait
of its thread T that a thread W of the same process ended (the wakeup, taken at sched_waking
in W's context) is charged to W's states over the same time — on CPU, runnable, lock, I/O,
sleep —, and W's own such waits to their wakers, MAX_HOPS threads deep at most. Each
nanosecond is still charged once, so the parts still add up.

A wait [t0, t1] of T inside the request is a handoff when
  - a task W of T's process, not T itself, ended it (not an interrupt);
  - T waited in I/O (epoll, a pipe, an eventfd: how a loop is told the work is done), for no
    recorded reason, or on a futex that is no mutex (a condition variable, a semaphore, a
    future: FUTEX_WAIT_BITSET, pthread_cond_*wait's op);
  - T and W wake each other in the run (T hands W work, W hands the result back).
A mutex wait stays lock wait: it is contention for a lock, not the request's work elsewhere
(critpath.py follows it to its holder), and so are the waits between threads that wake each
other one way only (a ring, a pipeline stage handing on), and a wait for no recorded reason
whose waker the kernel could only guess (waker_ctx task_guess, before 5.11: most likely an
interrupt that ran over W, ending a page fault's or a disk's read). Where W's states over the
wait are unknown (an edge of W the kernel never reported: a gap), the wait stays T's, its time
is counted in handoff_unknown_ns, and decompose checks the request "gap" (its parts unknown).
Where W was made inside the wait (runnable from its birth, with no switch-out to bound that:
its states there do not add up), the wait stays T's and the request's parts still add up.

df_handoffs(run, decomp) -> the segments followed: request (the decomposition's row), hop
(1: a wait of the request's thread, 2: of the thread that ended it, ...), tid (the thread
charged), from_tid (the thread that waited), t_start_ns, t_end_ns. follow_handoffs(run, decomp)
moves each segment's time from the waiting thread's parts to the charged thread's, and adds
handoff_ns (the request's time charged to other threads), handoff_tid (the thread charged the
most of it, 0: none) and handoff_unknown_ns. df_ran_on(run, decomp, mask) -> which threads the
requests' time ran on, by thread name.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import WAKER_BLAMES_TASK, fold_comm, thread_names
from .states import STATE_PARTS, overlaps_gap, thread_states
from .order import Lookup, unique_of
from .waits import FUTEX_CMD_MASK, FUTEX_WAIT, REASONS, switch_fields, wait_core

MAX_HOPS = 3
SEG_COLS = ["request", "hop", "parent", "tid", "from_tid", "t_start_ns", "t_end_ns"]
_FOLLOWED = (REASONS.index("io"), REASONS.index("other"))


class _Pairs:
    """The pairs of threads of one process that woke each other both ways in the run (a
    handoff and its answer): keyed on a dense index of the threads, so the keys stay small."""

    def __init__(self, run):
        rq = run.runq
        self.keys = np.zeros(0, np.int64)
        self._times = None
        if not len(rq) or "waker_ctx" not in rq:
            return
        w, t = rq["waker_tid"].to_numpy(np.int64), rq["tid"].to_numpy(np.int64)
        m = (rq["waker_ctx"].isin(WAKER_BLAMES_TASK).to_numpy() & (w > 0) & (w != t)
             & (rq["waker_pid"].to_numpy() == rq["pid"].to_numpy()))
        w, t = w[m], t[m]
        self.index = Lookup(unique_of(w, t))
        self.n = max(len(self.index.keys), 1)
        every = self.index(w)[0] * self.n + self.index(t)[0]
        del w, t
        keys = unique_of(every)
        back = (keys % self.n) * self.n + keys // self.n
        self.keys = keys[np.isin(keys, back)]
        if len(self.keys):      # for last_wakeup: the wakeups of these pairs, and when
            mine = np.isin(every, self.keys)
            self._every = every[mine]
            self._at = rq["t_runnable_ns"].to_numpy(np.int64)[np.flatnonzero(m)[mine]]

    def key(self, waker, tid) -> np.ndarray:
        gw, _ = self.index(waker)
        gt, _ = self.index(tid)
        return gw * self.n + gt

    def wakeup_in(self, waker, wakee, lo, hi, last: bool = False) -> np.ndarray:
        """The time of waker's first (last: last) wakeup of wakee in [lo[i], hi[i]]
        (0: none)."""
        if self._times is None:
            self._index_wakeups()
        u, span = self._times, len(self._times) + 1
        if not len(u):
            return np.zeros(len(np.asarray(waker)), np.int64)
        gw, okw = self.index(np.asarray(waker))
        gt, okt = self.index(np.asarray(wakee))
        k = gw * self.n + gt
        r_lo = np.searchsorted(u, np.asarray(lo, np.int64), side="left")
        r_hi = np.searchsorted(u, np.asarray(hi, np.int64), side="right") - 1
        if last:
            j = np.searchsorted(self._keys, k * span + r_hi, side="right") - 1
        else:
            j = np.searchsorted(self._keys, k * span + r_lo, side="left")
        got = self._keys[np.clip(j, 0, len(self._keys) - 1)]
        rank = got % span
        ok = okw & okt & (j >= 0) & (j < len(self._keys)) & (got // span == k) \
            & (rank >= r_lo) & (rank <= r_hi)
        return np.where(ok, u[np.minimum(rank, len(u) - 1)], 0)

    def _index_wakeups(self) -> None:
        """The both-ways pairs' wakeups keyed (pair, rank of its time), sorted once: the
        ranks, not the ns, keep the key inside an int64 whatever the run's length."""
        self._times = np.unique(self._at)
        span = len(self._times) + 1
        self._keys = np.sort(self._every * span + np.searchsorted(self._times, self._at))

    def both_ways(self, waker, tid) -> np.ndarray:
        """Does each (waker, tid) belong to a pair that woke each other both ways?"""
        gw, okw = self.index(waker)
        gt, okt = self.index(tid)
        return okw & okt & np.isin(gw * self.n + gt, self.keys)


def _handoff_waits(run, pairs: _Pairs) -> np.ndarray:
    """The rows of waits.wait_core that are handoffs (module doc)."""
    w = wait_core(run)
    m = w["waker_ctx"].isin(WAKER_BLAMES_TASK).to_numpy()
    rows = np.flatnonzero(m)
    rows = rows[pairs.both_ways(w["waker_tid"].to_numpy()[rows], w["tid"].to_numpy()[rows])]
    if not len(rows):
        return rows
    f = switch_fields(run, w, rows, ("pid", "wait_aux"))
    reason = w["reason"].cat.codes.to_numpy()[rows]
    futex = (reason == REASONS.index("lock")) & \
        ((f["wait_aux"].astype(np.int64) & FUTEX_CMD_MASK) != FUTEX_WAIT)
    # a wait for no recorded reason (a page fault's read, a disk's) that an interrupt most
    # likely ended, on a kernel that names the task it ran over (task_guess), is no handoff
    guessed = (w["waker_ctx"].to_numpy()[rows] == "task_guess") & \
        (reason == REASONS.index("other"))
    keep = ((np.isin(reason, _FOLLOWED) & ~guessed) | futex) & \
        (w["waker_pid"].to_numpy()[rows] == f["pid"])
    return rows[keep]


def _clipped(run, rows: np.ndarray, tid, lo, hi):
    """(window index, wait row, start, end) of the handoff waits (rows of wait_core) of
    thread tid[i] overlapping [lo[i], hi[i]), clipped to it."""
    from .critpath import WaitIndex
    w = wait_core(run)
    idx = WaitIndex(w["tid"].to_numpy(), w["t_off_ns"].to_numpy(), w["t_wake_ns"].to_numpy(),
                    rows=rows)
    qi, wi, a, b = idx.query(tid, lo, hi)
    return qi, rows[wi], a, b


def df_handoffs(run, decomp: pd.DataFrame) -> pd.DataFrame:
    """The segments of the requests' time charged to other threads (module doc)."""
    empty = pd.DataFrame({c: np.zeros(0, np.int64) for c in SEG_COLS})
    if not len(decomp) or not run.has("switches") or not run.has("runq"):
        return empty
    pairs = _Pairs(run)
    if not len(pairs.keys):
        return empty
    rows = _handoff_waits(run, pairs)
    if not len(rows):
        return empty
    waker = wait_core(run)["waker_tid"].to_numpy(np.int64)
    ok = decomp["traced"].to_numpy(bool)
    req = np.flatnonzero(ok)
    tid = decomp["tid"].to_numpy(np.int64)[req]
    lo, hi = (decomp[c].to_numpy(np.int64)[req] for c in ("t_start_ns", "t_end_ns"))
    first = _last_handoffs(run, rows, pairs, req, tid, lo, hi)
    if first is None:
        return empty
    out, base = [first], len(first)
    req, tid = first["request"].to_numpy(), first["tid"].to_numpy()
    lo, hi = first["t_start_ns"].to_numpy(), first["t_end_ns"].to_numpy()
    parent = np.arange(len(first), dtype=np.int64)
    # under the first hop, I/O waits only: a condition variable two workers hand back and
    # forth is more often a lock (Python's GIL) than the request's work
    io = rows[np.isin(wait_core(run)["reason"].cat.codes.to_numpy()[rows], _FOLLOWED)]
    for hop in range(2, MAX_HOPS + 1):
        qi, wr, a, b = _clipped(run, io, tid, lo, hi)
        if not len(qi):
            break
        seg = {"request": req[qi], "hop": np.full(len(qi), hop, np.int8),
               "parent": parent[qi], "tid": waker[wr], "from_tid": tid[qi],
               "t_start_ns": a, "t_end_ns": b}
        out.append(pd.DataFrame(seg))
        # the next hop looks inside these segments, at the waits of the thread charged
        parent = base + np.arange(len(qi), dtype=np.int64)
        base += len(qi)
        req, tid, lo, hi = seg["request"], seg["tid"], a, b
    return pd.concat(out, ignore_index=True)


def _last_handoffs(run, rows, pairs: "_Pairs", req, tid, lo, hi) -> pd.DataFrame | None:
    """The first hop: per request, the last handoff wait of its thread T that ends inside
    it, ended by W (the thread that finished the request's work: on an event loop serving
    several requests at once, the waits that end earlier are ended by the other requests'
    workers), an I/O wait if T has one (how a loop is told the work is done; a condition
    variable may be a lock, the GIL), charged to W from the moment W took the work (T's first
    wakeup of W since the request began, or, W busy, the last time W woke T before, handing
    back its previous result; else the request's start) to the wait's end. None when no
    request has one."""
    w = wait_core(run)
    qi, wr, a, b = _clipped(run, rows, tid, lo, hi)
    wake = w["t_wake_ns"].to_numpy()[wr]
    inside = wake <= hi[qi]                          # the wait ended before the request did
    qi, wr, a, wake = qi[inside], wr[inside], a[inside], wake[inside]
    if not len(qi):
        return None
    io = np.isin(w["reason"].cat.codes.to_numpy()[wr], _FOLLOWED)
    last = np.lexsort((wake, io, qi))                # a request's I/O waits last, by time
    last = last[np.r_[qi[last][1:] != qi[last][:-1], True]]     # the latest wake a request
    qi, wr, a, wake = qi[last], wr[last], a[last], wake[last]
    worker = w["waker_tid"].to_numpy(np.int64)[wr]
    # T woke an idle W to take the work; or W, busy, took it from a queue once it had handed
    # T its previous result; else W took it as the request arrived
    handed = pairs.wakeup_in(waker=tid[qi], wakee=worker, lo=lo[qi], hi=wake)
    freed = pairs.wakeup_in(waker=worker, wakee=tid[qi], lo=lo[qi], hi=wake - 1, last=True)
    start = np.maximum(np.maximum(handed, freed), lo[qi])
    return pd.DataFrame({"request": req[qi], "hop": np.ones(len(qi), np.int8),
                         "parent": np.full(len(qi), -1, np.int64), "tid": worker,
                         "from_tid": tid[qi], "t_start_ns": start, "t_end_ns": wake})


def follow_handoffs(run, decomp: pd.DataFrame) -> pd.DataFrame:
    """decomp with each handoff's time moved from the waiting thread's parts to the charged
    thread's (module doc), and handoff_ns, handoff_tid, handoff_unknown_ns."""
    seg = df_handoffs(run, decomp)
    n = len(decomp)
    decomp["handoff_ns"] = np.zeros(n, np.int64)
    decomp["handoff_tid"] = np.zeros(n, np.int64)
    decomp["handoff_unknown_ns"] = np.zeros(n, np.int64)
    if not len(seg):
        return decomp
    r = seg["request"].to_numpy(np.int64)
    a, b = seg["t_start_ns"].to_numpy(np.int64), seg["t_end_ns"].to_numpy(np.int64)
    to, frm = seg["tid"].to_numpy(np.int64), seg["from_tid"].to_numpy(np.int64)
    gaps = getattr(run, "gaps", None)
    unknown = (overlaps_gap(gaps, to, a, b) if gaps is not None and len(gaps)
               else np.zeros(len(seg), bool))
    # a segment whose thread's states are unknown is not followed, nor anything under it
    unknown = _with_parents_unknown(seg, unknown)
    lost = unknown & (seg["hop"].to_numpy() == 1)
    np.add.at(decomp["handoff_unknown_ns"].to_numpy(), r[lost], (b - a)[lost])
    # nor one charged to a thread made inside it: runnable from its birth with no
    # switch-out to bound that, its states there do not add up; the time stays the
    # waiting thread's
    unknown |= _with_parents_unknown(seg, _born_inside(run, to, a, b))
    f = ~unknown
    src = thread_states(run, frm[f], a[f], b[f])
    dst = thread_states(run, to[f], a[f], b[f])
    for c in STATE_PARTS:
        delta = np.nan_to_num(dst[c].to_numpy()) - np.nan_to_num(src[c].to_numpy())
        col = decomp[c].to_numpy(np.float64).copy()
        np.add.at(col, r[f], delta)
        decomp[c] = col
    decomp["runnable_ns"] = decomp["runq_wakeup_ns"] + decomp["runq_preempt_ns"]
    decomp["blocked_all_ns"] = (decomp["lock_wait_ns"].fillna(0) + decomp["io_wait_ns"].fillna(0)
                                + decomp["sleep_ns"].fillna(0) + decomp["blocked_ns"])
    first = f & (seg["hop"].to_numpy() == 1)
    hand = np.zeros(n, np.int64)
    np.add.at(hand, r[first], (b - a)[first])
    decomp["handoff_ns"] = hand
    decomp["handoff_tid"] = _top_thread(r[first], to[first], (b - a)[first], n)
    return decomp


def _born_inside(run, tid: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Was thread tid[i] made (its wakeup_new) inside [a[i], b[i])?"""
    rq = run.runq
    born = rq[rq["kind"] == "wakeup_new"] if len(rq) else rq
    if not len(born):
        return np.zeros(len(tid), bool)
    first = born.groupby("tid")["t_runnable_ns"].min()
    t = pd.Series(tid).map(first).to_numpy(dtype="float64")
    return (t >= a) & (t < b)


def _with_parents_unknown(seg: pd.DataFrame, unknown: np.ndarray) -> np.ndarray:
    """unknown, spread to the segments of later hops inside an unknown one (segments come
    hop by hop, each after its parent)."""
    out = unknown.copy()
    parent = seg["parent"].to_numpy()
    for hop in range(2, MAX_HOPS + 1):
        at = np.flatnonzero(seg["hop"].to_numpy() == hop)
        out[at] |= out[parent[at]]
    return out


def _top_thread(req: np.ndarray, tid: np.ndarray, ns: np.ndarray, n: int) -> np.ndarray:
    """Per request (0..n-1): the thread its segments charge the most time to (0: none)."""
    out = np.zeros(n, np.int64)
    if not len(req):
        return out
    g = pd.DataFrame({"r": req, "t": tid, "ns": ns}).groupby(["r", "t"], sort=False)["ns"].sum()
    g = g.reset_index().sort_values(["r", "ns"], ascending=[True, False]).drop_duplicates("r")
    out[g["r"].to_numpy()] = g["t"].to_numpy()
    return out


def df_ran_on(run, decomp: pd.DataFrame, mask=None) -> pd.DataFrame:
    """Which threads the requests' time ran on (those in mask; all by default): own (the
    requests' own threads, for what they kept) or not (the threads charged the most for their
    handoff_ns), by thread name (load.fold_comm: a pool's threads as one), with the threads
    counted, ns and share, largest first. Empty without handoff columns or requests."""
    cols = ["own", "thread", "threads", "ns", "share"]
    if "handoff_ns" not in decomp or not len(decomp):
        return pd.DataFrame(columns=cols)
    m = decomp["traced"].to_numpy(bool)
    if mask is not None:
        m = m & np.asarray(mask, bool)
    if not m.any():
        return pd.DataFrame(columns=cols)
    tid, lat = decomp["tid"].to_numpy(np.int64)[m], decomp["latency_ns"].to_numpy(np.int64)[m]
    hand, to = (decomp[c].to_numpy(np.int64)[m] for c in ("handoff_ns", "handoff_tid"))
    h = hand > 0
    # by thread id first (a few distinct values in many rows), then by name
    parts = []
    for own, t, ns in ((True, tid, lat - hand), (False, to[h], hand[h])):
        by = pd.Series(ns, index=t)
        by = by[by > 0].groupby(level=0).sum()
        parts.append(pd.DataFrame({"own": own, "tid": by.index, "ns": by.to_numpy()}))
    per = pd.concat(parts, ignore_index=True)
    names = thread_names(run) if run is not None else {}
    per["thread"] = [fold_comm(names.get(int(t), "") or f"tid {int(t)}") for t in per["tid"]]
    g = per.groupby(["own", "thread"])
    out = pd.DataFrame({"threads": g["tid"].nunique(), "ns": g["ns"].sum()}).reset_index()
    out["share"] = out["ns"] / max(out["ns"].sum(), 1)
    return out.sort_values("ns", ascending=False, kind="stable").reset_index(drop=True)[cols]
