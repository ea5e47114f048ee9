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


def thread_time_order(tid: np.ndarray, t: np.ndarray) -> np.ndarray | None:
    """The stable order of rows by (tid, t), or None when they are in it already."""
    if len(tid) < 2:
        return None
    tid, t = np.asarray(tid), np.asarray(t)
    same = tid[1:] == tid[:-1]
    if bool(((tid[1:] > tid[:-1]) | (same & (t[1:] >= t[:-1]))).all()):
        return None
    return np.lexsort((t, tid))
