"""Lock chains: who held the mutex a request waited for, and what that holder was doing.

Waiting acquisitions are those with the probe's contended flag (lock() took
the futex slow path) or a wait ≥ min_wait_ns (100 µs, for recorders without
the flag: under uprobes even an uncontended lock() takes ~10 µs). For each one
made by a request's thread inside the request's window, the holder is the
last acquisition of the same mutex before the waiter got it, by another
thread, whose hold overlaps the wait (the thread the waiter was waiting for
at the end; in a convoy, earlier holders are not examined). Both calls are
stamped at their probe's entry, before their own atomic operation on the
mutex, so a hold released up to RELEASE_SKEW_NS before the waiter's lock()
entry still overlaps it: the holder's release can land after the waiter
found the mutex held (one uprobe handler each, ~5 µs here, longer under
interrupts); its window inside the wait is then empty. Over the
holder's part of the wait, [max(t_request, holder's t_acquired),
min(waiter's t_acquired, holder's t_released)], the holder thread's state is
measured with the same interval algebra as the decomposition: running,
runnable (lock-holder preemption) or blocked. Verdict = the largest of the
three: "holder preempted" (runnable), "holder blocked", "holder running";
"holder unknown" when no holder acquisition was recorded.
holder_lock_wait_ns is the part of holder_blocked_ns the holder itself spent
waiting for another mutex: the next link of the chain.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .states import blocked_all, thread_states

COLUMNS = ["request_id", "waiter_tid", "mutex", "t_request_ns", "t_acquired_ns", "wait_ns",
           "holder_tid", "holder_window_ns", "holder_running_ns", "holder_runnable_ns",
           "holder_blocked_ns", "holder_lock_wait_ns", "verdict"]
MIN_WAIT_NS = 100_000
RELEASE_SKEW_NS = 50_000


def _waits_in_requests(locks: pd.DataFrame, decomp: pd.DataFrame, min_wait_ns: int) -> pd.DataFrame:
    w = locks[(locks["contended"] | (locks["wait_ns"] >= min_wait_ns)) & (locks["wait_ns"] > 0)]
    w = w.astype({"tid": np.int64}).sort_values("t_request_ns", kind="stable")
    r = decomp[["id", "tid", "t_start_ns", "t_end_ns"]].astype({"tid": np.int64})
    r = r.sort_values("t_start_ns", kind="stable")
    m = pd.merge_asof(w, r.rename(columns={"id": "request_id"}), left_on="t_request_ns",
                      right_on="t_start_ns", by="tid", direction="backward")
    inside = m["request_id"].notna() & (m["t_request_ns"] < m["t_end_ns"])
    m = m[inside].copy()
    m["request_id"] = m["request_id"].astype(np.int64)
    return m


def _holders(waits: pd.DataFrame, locks: pd.DataFrame) -> pd.DataFrame:
    """Each wait's holder: the last acquisition of the mutex before the waiter got it, by
    another thread, whose hold overlaps the wait (RELEASE_SKEW_NS); its window [h_start, h_end]
    inside the wait."""
    h = locks[["mutex", "tid", "t_acquired_ns", "t_released_ns"]].rename(
        columns={"tid": "holder_tid", "t_acquired_ns": "h_acq", "t_released_ns": "h_rel"})
    h = h.sort_values("h_acq", kind="stable")
    w = waits.sort_values("t_acquired_ns", kind="stable")
    m = pd.merge_asof(w, h, left_on="t_acquired_ns", right_on="h_acq", by="mutex",
                      direction="backward", allow_exact_matches=False)
    ok = (m["holder_tid"].notna() & (m["holder_tid"] != m["tid"])
          & ((m["h_rel"] == 0) | (m["h_rel"] > m["t_request_ns"] - RELEASE_SKEW_NS)))
    m["holder_tid"] = np.where(ok, m["holder_tid"].fillna(-1), -1).astype(np.int64)
    req, acq = m["t_request_ns"].to_numpy(), m["t_acquired_ns"].to_numpy()
    rel = m["h_rel"].fillna(0).to_numpy(dtype=np.int64)
    start = np.maximum(req, m["h_acq"].fillna(0).to_numpy(dtype=np.int64))
    end = np.where(rel > 0, np.minimum(rel, acq), acq)
    m["h_start"] = np.where(ok, start, req)
    m["h_end"] = np.where(ok, np.maximum(end, start), req)
    return m.sort_values("t_request_ns", kind="stable")


def df_lock_chains(run, decomp: pd.DataFrame, min_wait_ns: int = MIN_WAIT_NS) -> pd.DataFrame:
    """One row per waiting acquisition inside a request (columns COLUMNS)."""
    if not run.has("locks") or len(run.locks) == 0 or len(decomp) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "verdict" else np.int64)
                             for c in COLUMNS})
    m = _holders(_waits_in_requests(run.locks, decomp, min_wait_ns), run.locks)
    st = thread_states(run, m["holder_tid"].to_numpy(), m["h_start"].to_numpy(),
                       m["h_end"].to_numpy())
    running = st["oncpu_ns"].fillna(0).to_numpy()
    runnable = (st["runq_wakeup_ns"].fillna(0) + st["runq_preempt_ns"].fillna(0)).to_numpy()
    blocked = np.nan_to_num(blocked_all(st))
    known = m["holder_tid"].to_numpy() >= 0
    verdict = np.select([~known, (runnable >= blocked) & (runnable >= running) & (runnable > 0),
                         (blocked >= running) & (blocked > 0)],
                        ["holder unknown", "holder preempted", "holder blocked"], "holder running")
    out = pd.DataFrame({
        "request_id": m["request_id"].to_numpy(), "waiter_tid": m["tid"].to_numpy(),
        "mutex": m["mutex"].to_numpy(dtype=np.uint64), "t_request_ns": m["t_request_ns"].to_numpy(),
        "t_acquired_ns": m["t_acquired_ns"].to_numpy(), "wait_ns": m["wait_ns"].to_numpy(),
        "holder_tid": m["holder_tid"].to_numpy(),
        "holder_window_ns": (m["h_end"] - m["h_start"]).to_numpy(),
        "holder_running_ns": np.where(known, running, 0).astype(np.int64),
        "holder_runnable_ns": np.where(known, runnable, 0).astype(np.int64),
        "holder_blocked_ns": np.where(known, blocked, 0).astype(np.int64),
        "holder_lock_wait_ns": np.where(known, st["lock_wait_ns"].fillna(0), 0).astype(np.int64),
        "verdict": verdict,
    }, columns=COLUMNS)
    return out.reset_index(drop=True)
