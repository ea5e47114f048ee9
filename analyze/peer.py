"""Peer processes: was the server (another traced process) waiting for a CPU?

A client request that is *blocked* waits for something outside its own thread,
often the server's reply. When tailtrace also traced that server
(`tailtrace --also-pid PID`, meta.json `target.also_pids`), its threads' runnable
intervals are in runq.bin with their own pid. For each request,

  peer_runnable_ns = |∪ runnable intervals of peer threads ∩ [t_start, t_end]|

the time during the request when at least one thread of a peer process was
waiting for a CPU. It is not a part of the closure (the client's parts still
sum to its latency): it explains the client's blocked time one hop away.

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

import re

import numpy as np
import pandas as pd

from .decompose import iv_union, window_sum

PEER_COLS = ["pid", "comm", "threads", "name"]


def _also_pids(run) -> list[int] | None:
    """meta.json target.also_pids, or None when the key is absent."""
    tgt = (run.meta or {}).get("target")
    if not isinstance(tgt, dict) or "also_pids" not in tgt:
        return None
    return [int(p) for p in tgt.get("also_pids") or [] if int(p) > 0]


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


def _process_name(pid: int, comms: list[str], main_comm: str | None) -> str:
    """'orders-server (pid 1234)' from the main thread's comm, else the threads' names
    with trailing digits folded: 'pid 1234 (orders-w*)'."""
    if main_comm:
        return f"{main_comm} (pid {pid})"
    pats = sorted({re.sub(r"\d+$", "*", c) for c in comms if c})
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
        main_comm = str(main.iloc[0]) if len(main) else ""
        tids = np.union1d(mine["tid"].to_numpy(np.int64),
                          run.runq.loc[run.runq["pid"].to_numpy(np.int64) == pid,
                                       "tid"].to_numpy(np.int64))
        rows.append({"pid": int(pid), "comm": main_comm, "threads": int(len(tids)),
                     "name": _process_name(int(pid), [str(c) for c in mine["comm"]], main_comm)})
    return pd.DataFrame(rows, columns=PEER_COLS)


def _peer_union(run, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted union of the runnable intervals of every thread of `pids`."""
    rq = run.runq
    sel = np.isin(rq["pid"].to_numpy(), pids)   # int32 column: no 64-bit copy
    s = rq["t_runnable_ns"].to_numpy(np.int64)[sel]
    e = rq["t_run_ns"].to_numpy(np.int64)[sel]
    ok = e > s
    return iv_union(s[ok], e[ok])


def df_peer_runnable(run, decomp: pd.DataFrame) -> pd.DataFrame:
    """peer_runnable_ns per request (same index as decomp): the length of the union of
    the peers' runnable intervals inside [t_start, t_end]. NaN when the request has
    no traced peer process, when runq.bin is absent, or when the request was not
    traced (decomp 'traced' false)."""
    n = len(decomp)
    out = np.full(n, np.nan)
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
    if "traced" in decomp:
        out = np.where(decomp["traced"].to_numpy(bool), out, np.nan)
    return pd.DataFrame({"peer_runnable_ns": out}, index=decomp.index)
