"""Peer processes: was the server (another traced process) waiting for a CPU?

A client request that is *blocked* waits for something outside its own thread,
often the server's reply. When tailtrace also traced that server
(`tailtrace --also-pid PID`, meta.json `target.also_pids`), its threads' runnable
intervals are in runq.bin with their own pid. For each request,

  peer_runnable_ns = |∪ runnable intervals of peer threads ∩ [t_start, t_end]|

the time during the request when at least one thread of a peer process was
waiting for a CPU, and peer_runnable_all_ns, the time when all of a peer's
threads (those seen in runq.bin) were waiting at once, so it made no progress.
Neither is a part of the closure (the client's parts still sum to its latency):
they explain the client's blocked time one hop away.

Peers of a request are the processes listed in meta.json `target.also_pids`
other than the request's own pid. Without that key (runs written before
--also-pid, or by hand) they are the other pids seen in runq.bin or tasks.bin,
except for a system-wide run (target mode "all"), where "the other processes"
would be the whole machine. No peer traced: NaN.

Vectorised like decompose.py: the peer intervals are merged once into a disjoint
union (iv_union) and measured inside every window with window_sum (prefix sums
and np.searchsorted, exact at the edges). The only loop is over the distinct
pids of the requests (one in practice).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import fold_comm
from .intervals import Axis, iv_union, window_sum

PEER_COLS = ["pid", "comm", "threads", "name"]
_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _also_pids(run) -> list[int] | None:
    """meta.json target.also_pids, or None when the key is absent."""
    tgt = (run.meta or {}).get("target")
    if not isinstance(tgt, dict) or "also_pids" not in tgt:
        return None
    return [int(p) for p in tgt.get("also_pids") or [] if int(p) > 0]


def also_comm(run, pid: int) -> str:
    """meta.json target.also_comms: the name of an --also-pid process when tailtrace ended
    ('' when absent or unknown)."""
    tgt = (run.meta or {}).get("target")
    if not isinstance(tgt, dict):
        return ""
    for p, c in zip(tgt.get("also_pids") or [], tgt.get("also_comms") or []):
        if int(p) == pid and isinstance(c, str):
            return c
    return ""


def peer_pids(run, own_pid: int) -> np.ndarray:
    """Sorted pids of the processes that are peers of a request of process own_pid."""
    also = _also_pids(run)
    if also is not None:
        pids = np.asarray(also, dtype=np.int64)
    else:
        tgt = (run.meta or {}).get("target")
        if isinstance(tgt, dict) and tgt.get("mode") == "all":
            return np.zeros(0, dtype=np.int64)
        pids = np.concatenate([pd.unique(run.runq["pid"]).astype(np.int64),
                               run.tasks["pid"].to_numpy(np.int64)])
    pids = np.unique(pids)
    return pids[(pids != int(own_pid)) & (pids > 0)]


def process_name(pid: int, comms: list[str], main_comm: str | None) -> str:
    """'orders-server (pid 1234)' from the main thread's comm, else the threads' names
    with trailing digits folded: 'pid 1234 (orders-w*)'."""
    if main_comm:
        return f"{main_comm} (pid {pid})"
    pats = sorted({fold_comm(c) for c in comms if c})
    return f"pid {pid} ({', '.join(pats[:3])})" if pats else f"pid {pid}"


def df_peers(run, decomp: pd.DataFrame) -> pd.DataFrame:
    """One row per peer process of the requests' processes.

    Columns: pid, comm (its main thread's comm from tasks.bin, '' when that thread
    was not seen), threads (its threads seen in runq.bin or tasks.bin), name (for
    sentences: 'orders-server (pid 1234)', else 'pid 1234 (orders-w*)').
    """
    own = np.unique(decomp["pid"].to_numpy(np.int64)) if "pid" in decomp else np.zeros(0, int)
    pids = np.unique(np.concatenate([peer_pids(run, p) for p in own] or [np.zeros(0, int)]))
    t = run.tasks
    rows = []
    for pid in pids:   # a handful of processes (--also-pid takes at most 4)
        mine = t[t["pid"].to_numpy(np.int64) == pid]
        main = mine.loc[mine["tid"].to_numpy(np.int64) == pid, "comm"]
        main_comm = str(main.iloc[0]) if len(main) else also_comm(run, int(pid))
        tids = np.union1d(mine["tid"].to_numpy(np.int64),
                          run.runq.loc[run.runq["pid"].to_numpy(np.int64) == pid,
                                       "tid"].to_numpy(np.int64))
        rows.append({"pid": int(pid), "comm": main_comm, "threads": int(len(tids)),
                     "name": process_name(int(pid), [str(c) for c in mine["comm"]], main_comm)})
    return pd.DataFrame(rows, columns=PEER_COLS)


def _peer_union(run, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted union of the runnable intervals of every thread of `pids`."""
    rq = run.runq
    sel = np.isin(rq["pid"].to_numpy(), pids)   # int32 column: no 64-bit copy
    s = rq["t_runnable_ns"].to_numpy(np.int64)[sel]
    e = rq["t_run_ns"].to_numpy(np.int64)[sel]
    ok = e > s
    return iv_union(s[ok], e[ok])


def _all_runnable(run, pid: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted times when every thread of process pid seen in runq.bin was
    runnable at once (each thread's intervals merged first, on its own lane of an Axis;
    then a sweep over all edges keeps the stretches of depth = number of threads)."""
    rq = run.runq
    sel = rq["pid"].to_numpy() == pid
    tid = rq["tid"].to_numpy(np.int64)[sel]
    s, e = rq["t_runnable_ns"].to_numpy(np.int64)[sel], rq["t_run_ns"].to_numpy(np.int64)[sel]
    ok = e > s
    if not ok.any():
        return _EMPTY
    tid, s, e = tid[ok], s[ok], e[ok]
    axis = Axis(tid, s.min(), e.max())
    k_s, k_e = iv_union(*axis.intervals(tid, s, e))          # per thread: its own lane
    off = (k_s // axis.span) * axis.span - axis.t0
    t = np.concatenate([k_s - off, k_e - off])
    step = np.concatenate([np.ones(len(k_s), np.int64), -np.ones(len(k_e), np.int64)])
    o = np.lexsort((step, t))                                 # ends before starts at a tie
    t, depth = t[o], np.cumsum(step[o])
    i = np.flatnonzero(depth[:-1] == len(axis.tids))
    keep = t[i + 1] > t[i]
    return t[i][keep], t[i + 1][keep]


def df_peer_runnable(run, decomp: pd.DataFrame) -> pd.DataFrame:
    """Per request (same index as decomp):

    peer_runnable_ns      length of the union of the peers' runnable intervals inside
                          [t_start, t_end]: at least one peer thread waited for a CPU;
    peer_runnable_all_ns  time inside the window when ALL threads of a peer process
                          (those seen in runq.bin) were runnable at once: the peer
                          could make no progress at all.

    NaN when the request has no traced peer process, when runq.bin is absent, or when
    the request was not traced (decomp 'traced' false)."""
    n = len(decomp)
    out, out_all = np.full(n, np.nan), np.full(n, np.nan)
    if n and run.has("runq"):
        own = decomp["pid"].to_numpy(np.int64)
        ws, we = decomp["t_start_ns"].to_numpy(np.int64), decomp["t_end_ns"].to_numpy(np.int64)
        for pid in np.unique(own):   # processes, not requests: one in practice
            peers = peer_pids(run, pid)
            if not len(peers):
                continue
            m = own == pid
            s, e = _peer_union(run, peers)
            out[m] = window_sum(s, e, ws[m], we[m], disjoint=True).astype(np.float64)
            sets = [_all_runnable(run, p) for p in peers]    # ≤ 4 processes (--also-pid)
            a_s, a_e = iv_union(np.concatenate([x[0] for x in sets]),
                                np.concatenate([x[1] for x in sets]))
            out_all[m] = window_sum(a_s, a_e, ws[m], we[m], disjoint=True).astype(np.float64)
    if "traced" in decomp:
        traced = decomp["traced"].to_numpy(bool)
        out, out_all = np.where(traced, out, np.nan), np.where(traced, out_all, np.nan)
    return pd.DataFrame({"peer_runnable_ns": out, "peer_runnable_all_ns": out_all},
                        index=decomp.index)
