"""Sort orders that cost nothing when the data is in order already.

Streams come in time order (real runs) or grouped by thread (a writer that flushes per
thread); the analysis wants them by (thread, time). Checking that an array is sorted
reads it once (~10 ms for 10M keys here), an argsort of it costs 1-2 s: so check first.
"""
from __future__ import annotations

import numpy as np


def argsort_unless_sorted(k: np.ndarray, stable: bool = False) -> np.ndarray | None:
    """np.argsort(k), or None when k is sorted already."""
    if len(k) < 2 or bool((k[1:] >= k[:-1]).all()):
        return None
    return np.argsort(k, kind="stable" if stable else None)


def search_in_order(a: np.ndarray, v: np.ndarray, side: str = "left",
                    order: np.ndarray | None = None) -> np.ndarray:
    """np.searchsorted(a, v, side), the queries taken in `order` (by default their sorted
    order, unless they are sorted already). A binary search for each of many queries in
    random order misses the CPU's cache at every level of a large array; in sorted order
    the probes walk it front to back (1.7M queries into 4.9M keys here: 0.86 s in random
    order, 0.15 s sorted, the argsort included). Pass order to share one sort between
    searches whose queries come in nearly the same order."""
    v = np.asarray(v)
    if order is None:
        order = argsort_unless_sorted(v)
        if order is None:
            return np.searchsorted(a, v, side)
    out = np.empty(len(v), dtype=np.intp)
    out[order] = np.searchsorted(a, v[order], side)
    return out


def thread_time_order(tid: np.ndarray, t: np.ndarray) -> np.ndarray | None:
    """The stable order of rows by (tid, t), or None when they are in it already."""
    if len(tid) < 2:
        return None
    tid, t = np.asarray(tid), np.asarray(t)
    same = tid[1:] == tid[:-1]
    if bool(((tid[1:] > tid[:-1]) | (same & (t[1:] >= t[:-1]))).all()):
        return None
    return np.lexsort((t, tid))


class Lookup:
    """Position of each value in a sorted array of unique integers (thread ids, CPUs): a
    table over their range when it is small (one gather a value), else a binary search."""

    def __init__(self, keys: np.ndarray):
        self.keys = np.asarray(keys, dtype=np.int64)
        self._lut = None
        if len(self.keys) and int(self.keys[-1]) - int(self.keys[0]) < 1 << 23:
            # slot 0 and the last: below and above the range of keys
            self._lut = np.full(int(self.keys[-1]) - int(self.keys[0]) + 3, -1, np.int64)
            self._lut[self.keys - self.keys[0] + 1] = np.arange(len(self.keys))

    def __call__(self, values) -> tuple[np.ndarray, np.ndarray]:
        """(position of each value, whether it is one of the keys); position 0 where not."""
        values = np.asarray(values)
        if not len(self.keys):
            return np.zeros(len(values), np.int64), np.zeros(len(values), bool)
        if self._lut is not None:
            off = int(self.keys[0]) - 1          # the value in slot 0
            if values.dtype.kind in "iu" and len(values) and _fits(values.dtype, off) \
                    and off <= int(values.min()) and int(values.max()) < off + len(self._lut):
                i = values - off if off else values      # all inside: no copy, no clip
            else:
                i = values.astype(np.int64)
                i -= off
                np.clip(i, 0, len(self._lut) - 1, out=i)
            g = self._lut[i]
            ok = g >= 0
            return np.maximum(g, 0, out=g), ok
        v = values.astype(np.int64, copy=False)
        g = np.minimum(np.searchsorted(self.keys, v), len(self.keys) - 1)
        ok = self.keys[g] == v
        g[~ok] = 0
        return g, ok


def _fits(dt: np.dtype, v: int) -> bool:
    """Can integers of dtype dt take v (so that values - v computes in dt)?"""
    i = np.iinfo(dt)
    return i.min <= v <= i.max


def row_index(rows: np.ndarray, n: int) -> np.ndarray:
    """Row numbers into an array of n rows, as int32 when they fit (half the memory of a
    large frame's row index)."""
    return rows.astype(np.int32) if n < 1 << 31 else rows


def unique_of(*arrays) -> np.ndarray:
    """The sorted unique values of integer arrays, as int64: from a table of the values
    seen when they are small non-negative ones (thread ids, CPUs: one pass, no hashing)."""
    arrays = [np.asarray(a) for a in arrays if len(a)]
    if not arrays:
        return np.zeros(0, np.int64)
    if all(a.dtype.kind in "iu" for a in arrays) and min(int(a.min()) for a in arrays) >= 0 \
            and (top := max(int(a.max()) for a in arrays)) < 1 << 23:
        seen = np.zeros(top + 1, bool)
        for a in arrays:
            seen[a] = True
        return np.flatnonzero(seen).astype(np.int64)
    parts = [np.unique(a) for a in arrays]
    return np.unique(np.concatenate([p.astype(np.int64) for p in parts]))


def switch_order(run) -> np.ndarray | None:
    """The rows of run.switches by (tid, t_off_ns), stable, or None when they are in that
    order; kept on the run (the waits, the on-CPU slices and the views all want it)."""
    from ..load.load import per_run
    sw = run.switches
    return per_run(run, "_switch_order", (id(sw), len(sw)),
                   lambda: thread_time_order(sw["tid"].to_numpy(), sw["t_off_ns"].to_numpy()))
