"""Interval algebra on the thread axis: the sets of [start, end) intervals the analyses
measure (a thread's off-CPU time, its runnable time, a lock's waits), and the measure of a
set inside many windows at once.

Threads are laid end to end on one int64 axis (Axis: key = thread index × span + t − t0), an
interval set is sorted and merged once (IntervalSet), and the measure of a set inside each window comes
from cumulative sums and np.searchsorted, with the partial intervals at the window edges exact
(window_sum). decompose.py, critpath.py, peer.py, antagonists.py and lockchain.py measure with
these; nothing here knows what a request or a wait is.
"""
from __future__ import annotations

import numpy as np

from ..load.errors import AnalysisError
from .order import Lookup, argsort_unless_sorted, unique_of


class Axis:
    """Maps (tid, t) to one int64 key: each thread owns [g*span, g*span + span)."""

    def __init__(self, tids: np.ndarray, t0: int, t1: int):
        self.tids = unique_of(tids)
        self.t0, self.t1 = int(t0), int(t1)
        self.span = self.t1 - self.t0 + 1
        if self.span <= 0 or (len(self.tids) + 1) * self.span >= 2 ** 62:
            raise AnalysisError(f"time range {self.t0}..{self.t1} over {len(self.tids)} threads "
                                "does not fit one int64 axis: are the timestamps CLOCK_MONOTONIC ns?")
        self._lookup = Lookup(self.tids)

    def index(self, tid) -> tuple[np.ndarray, np.ndarray]:
        """Thread index of each tid and whether the tid is on the axis."""
        return self._lookup(tid)

    def key(self, g: np.ndarray, t) -> np.ndarray:
        t = np.asarray(t)
        if len(t) and (int(t.min()) < self.t0 or int(t.max()) > self.t1):
            t = np.clip(t.astype(np.int64, copy=False), self.t0, self.t1)
        k = np.multiply(g, self.span, dtype=np.int64)
        k += t
        k -= self.t0
        return k

    def intervals(self, tid, t_s, t_e) -> tuple[np.ndarray, np.ndarray]:
        """Keys of intervals [t_s, t_e] of threads on the axis, clipped to [t0, t1]."""
        s, e, _ = self.rows(tid, t_s, t_e, sort=False)
        return s, e

    def rows(self, tid, t_s, t_e, sort: bool = True):
        """(s, e, rows): intervals() with the rows of the input they come from; with sort,
        in the order of their start keys (an input already in that order is not sorted)."""
        g, ok = self.index(tid)
        t_s, t_e = np.asarray(t_s, dtype=np.int64), np.asarray(t_e, dtype=np.int64)
        ok &= (t_e > t_s) & (t_e > self.t0) & (t_s < self.t1)
        if ok.all():                              # every row: no copies of the inputs
            rows = np.arange(len(ok))
            s, e = self.key(g, t_s), self.key(g, t_e)
        else:
            rows = np.flatnonzero(ok)
            g = g[rows]
            s, e = self.key(g, t_s[rows]), self.key(g, t_e[rows])
        del ok
        o = argsort_unless_sorted(s, stable=True) if sort else None
        if o is not None:
            s, e, rows = s[o], e[o], rows[o]
        return s, e, rows


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


def iv_intersect(a_s, a_e, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two sets of disjoint, sorted intervals (as iv_union returns): for
    each interval of a, the run of b's intervals that overlap it (two sorted searches),
    clipped to it; the result is disjoint and sorted."""
    if len(a_s) == 0 or len(b_s) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    lo = np.searchsorted(b_e, a_s, side="right")    # the first of b to end after a starts
    hi = np.searchsorted(b_s, a_e, side="left")     # past the last of b to start before a ends
    cnt = np.maximum(hi - lo, 0)
    del hi
    n = int(cnt.sum())
    ai = np.repeat(np.arange(len(a_s)), cnt)
    bi = np.arange(n, dtype=np.int64)
    bi += np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
    del lo, cnt
    s = np.maximum(a_s[ai], b_s[bi])
    e = np.minimum(a_e[ai], b_e[bi])
    keep = e > s
    return s[keep], e[keep]


class IntervalSet:
    """Intervals [s, e] on the thread axis, ready to be measured inside any windows.

    sum(w_s, w_e), for each window: the sum over intervals of |[s, e] ∩ window|
    (overlapping intervals count once each), as G(w_e) − G(w_s) with G(q) = sum
    |[s, e] ∩ (-inf, q]|, from arrays built once that serve every query.

    A disjoint set (no two intervals overlap: a thread's own off-CPU or runnable
    intervals, iv_union / iv_intersect output) is kept as its sorted starts S and the
    prefix sums L of its lengths: with i = #(S ≤ q), G(q) = L[i−1] + min(q − S[i−1],
    length i−1): 16 bytes an interval and one search a bound. Overlapping intervals
    (streams that disagree) keep sorted starts and ends and their cumulative sums:
    G(q) = q·#(s≤q) − Σ(s≤q) − q·#(e≤q) + Σ(e≤q); those sums may wrap around int64, the
    difference is still exact (two's complement is exact modulo 2**64, the result small).
    disjoint=True: s, e are known disjoint and sorted; otherwise that is checked after
    sorting by start (a sorted input is not sorted again).
    """

    def __init__(self, s: np.ndarray, e: np.ndarray, disjoint: bool = False):
        if not disjoint and len(s) > 1:
            o = argsort_unless_sorted(s, stable=True)
            if o is not None:
                s, e = s[o], e[o]
            disjoint = IntervalSet.is_disjoint(s, e)
        self.disjoint = disjoint or len(s) <= 1
        if self.disjoint:
            self.S = s
            self.L = np.zeros(len(s) + 1, dtype=np.int64)
            np.cumsum(e - s, out=self.L[1:])
        else:
            self.S, self.E = np.sort(s), np.sort(e)
            self.cS = np.concatenate([[0], np.cumsum(self.S)])
            self.cE = np.concatenate([[0], np.cumsum(self.E)])

    def __len__(self) -> int:
        return len(self.S)

    @staticmethod
    def is_disjoint(s: np.ndarray, e: np.ndarray) -> bool:
        """Do intervals sorted by start not overlap (each ends at or before the next starts)?"""
        return len(s) <= 1 or bool((s[1:] >= e[:-1]).all())

    def ends(self) -> np.ndarray:
        """The ends of a disjoint set's intervals, in order."""
        return self.S + np.diff(self.L)

    def sum(self, w_s, w_e=None) -> np.ndarray:
        """w_s, w_e: the windows' bounds, or w_s a Windows (the same windows measured in
        many sets: their bounds sorted once)."""
        q = w_s if isinstance(w_s, Windows) else Windows(w_s, w_e)
        if not len(self.S):
            return np.zeros(q.n, dtype=np.int64)
        x = q.sorted
        g = np.empty(2 * q.n, dtype=np.int64)
        if self.disjoint:
            i = np.searchsorted(self.S, x, side="right")
            j = np.maximum(i - 1, 0)
            part = np.minimum(x - self.S[j], self.L[i] - self.L[j])
            g[q.order] = self.L[j] + np.where(i > 0, part, 0)
        else:
            with np.errstate(over="ignore"):
                ns = np.searchsorted(self.S, x, side="right")
                ne = np.searchsorted(self.E, x, side="right")
                g[q.order] = x * (ns - ne) - self.cS[ns] + self.cE[ne]
        return g[q.n:] - g[:q.n]


class Windows:
    """Windows [w_s, w_e] on the thread axis, their 2n bounds sorted once: searches of
    sorted keys walk each set in order (a search per bound in request order jumps across
    the whole array, a cache miss each; on a 30 s busy run the searches were a third of the
    analysis)."""

    def __init__(self, w_s, w_e):
        q = np.concatenate([np.asarray(w_s, dtype=np.int64), np.asarray(w_e, dtype=np.int64)])
        self.n = len(q) // 2
        self.order = np.argsort(q, kind="stable")
        self.sorted = q[self.order]


def window_sum(s, e, w_s, w_e, disjoint: bool = False) -> np.ndarray:
    """For each window [w_s, w_e]: sum over intervals of |[s, e] ∩ window| (see IntervalSet)."""
    return IntervalSet(np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64), disjoint).sum(
        w_s, w_e)
