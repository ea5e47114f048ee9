"""The analysis in words: the headline and the sentences of summary.json and the reports.

Everything here phrases figures already computed (findings.Findings, attribute.py,
critpath.py, antagonists.py): no function computes a figure of its own beyond the
comparison its sentence makes. fmt.dur() is the one way a duration is written.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import fold_comm
from ..explain.attribute import BANDS, BLOCKED_GROUPS, GROUPS, MS, adds_up, dominant_group
from ..explain.critpath import has_wakers
from ..explain.decompose import CHECK_WHY
from .fmt import dur


def _n(k: int, noun: str) -> str:
    """'1 thread', '2 threads', '1,234 migrations'."""
    return f"{k:,} {noun}{'' if k == 1 else 's'}"


PEER_EXPLAINS = 0.5   # peer runnable excess ≥ this share of the blocked excess: say so


def _peer_sentence(f) -> str | None:
    """The peer sentence of the headline, or None.

    A server shared by many clients on few CPUs has *some* thread runnable most of the
    time, tail or not, so the peer's runnable time alone says little. What points at it is
    the contrast with the median: the ≥P99 band's peer runnable time minus the ≤P50 band's,
    against the ≥P99 band's blocked time minus the ≤P50 band's. When the first covers at
    least half of the second, the extra blocking of the tail is explained by the peer
    waiting for a CPU."""
    bands = f.bands
    if f.run is None or "peer_runnable_ms" not in bands or BANDS[0] not in bands.index:
        return None
    row, med = bands.loc[BANDS[3]], bands.loc[BANDS[0]]
    peer_ex = row["peer_runnable_ms"] - med["peer_runnable_ms"]
    blocked_ex = row["blocked_all_ms"] - med["blocked_all_ms"]
    if pd.isna(peer_ex) or pd.isna(blocked_ex) or blocked_ex <= 0:
        return None
    cover = peer_ex / blocked_ex
    if cover < PEER_EXPLAINS:
        return None
    peers = f.peers
    if peers.empty:
        return None
    name = ", ".join(peers["name"]) if len(peers) > 1 else peers["name"].iloc[0]
    short = ", ".join(c or nm for c, nm in zip(peers["comm"], peers["name"]))
    who = f"a thread of {name}" if len(peers) == 1 else f"a thread of one of {name}"
    all_ms = row.get("peer_runnable_all_ms", np.nan)
    every = ("" if pd.isna(all_ms) or all_ms <= 0 else
             f"; all its threads at once during {dur(all_ms)}" if len(peers) == 1 else
             f"; all threads of one of them at once during {dur(all_ms)}")
    return (f"during {dur(row['peer_runnable_ms'])} of their {dur(row['latency_ms'])} "
            f"service time {who} was waiting for a CPU (≤P50 requests: "
            f"{dur(med['peer_runnable_ms'])} of {dur(med['latency_ms'])}), covering "
            f"{min(cover, 1.0) * 100:.0f}% of the {dur(blocked_ex)} by which their blocked "
            f"time exceeds the median band's{every}: the tail is scheduler delay in "
            f"{short}, one hop away.")


def _excess_elsewhere(te: dict, g: str) -> str:
    """When the dominant part explains under half of the tail's excess over the median:
    which part does (' Most of the excess, 0.9 ms, is I/O wait.'), else ''."""
    ex, g_ex = te["excess_ms"], te["parts"].get(g, {}).get("ms", np.nan)
    if not ex or ex <= 0 or pd.isna(g_ex) or g_ex >= 0.5 * ex:
        return ""
    best, best_ms = None, -np.inf
    for k, (cols, _, _) in GROUPS.items():
        ms = sum(te["parts"].get(c.replace("_ns", ""), {}).get("ms", np.nan) for c in cols)
        if pd.notna(ms) and ms > best_ms:
            best, best_ms = k, ms
    if best is None or best == g or best_ms <= 0:
        return ""
    return f" Most of the excess, {dur(best_ms)}, is {GROUPS[best][2]}."


WORKER_LOCK_SHARE = 0.05   # workers' lock wait worth a sentence: ≥ 5% of the queue wait


def _workers_wait(run, decomp: pd.DataFrame, wait_objects: list) -> str:
    """For a queue-wait tail: the longest lock wait of the serving threads over the run (the
    workers that could not take the request), from summary wait_objects, when it is at least
    WORKER_LOCK_SHARE of all requests' queue wait."""
    t = run.tasks if run is not None else pd.DataFrame()
    mine = t[t["tid"].isin(decomp["tid"].unique())] if len(t) else t
    serving = {fold_comm(str(c)) for c in mine["comm"]} if len(mine) else set()
    objs = [o for o in wait_objects if o.get("reason") == "lock"
            and (not serving or any(t in serving for t in str(o.get("threads")).split(", ")))]
    queued = decomp["queue_wait_ns"].sum() / MS
    if not objs or objs[0]["total_ms"] < WORKER_LOCK_SHARE * queued:
        return ""
    o = objs[0]
    sh = o.get("waker_runnable_share") or 0.0
    return (f" Meanwhile the workers' longest lock wait was {o['what']} ({o['total_ms'] / 1e3:,.2f}"
            f" s over {o['waits']:,} waits by {o['threads']}); the threads that released it "
            f"were runnable (waiting for a CPU) {sh * 100:.0f}% of that time.")


def _antagonist_words(f) -> str:
    """' While runnable, they were preempted by …' for a runnable tail, from the findings'
    antagonists (analyze/explain/antagonists.py), or ''."""
    from ..explain.antagonists import sentence
    info = (f.antagonists or {}).get(BANDS[3])
    if not info or f.run is None:
        return ""
    row = f.bands.loc[BANDS[3]]
    pre = row["runq_preempt_ms"] / row["runnable_ms"] if row["runnable_ms"] else 0.0
    d = f.decomp
    words = sentence(f.run, info, set(d["pid"].astype(int)) if "pid" in d else set(), pre)
    return f" While runnable, they {words}." if words else ""


def _not_adding_up(row, decomp: pd.DataFrame, mask: np.ndarray) -> str:
    """The headline's end for a ≥P99 band whose parts do not add up: no share, the check
    that failed and why (decompose.CHECK_WHY of the band's commonest failure)."""
    chk = decomp["check"][mask] if "check" in decomp else pd.Series(dtype="category")
    bad = chk[~chk.isin(["ok", "no_switches"])].astype(str).value_counts()
    why = (f"; {bad.iloc[0]:,} {CHECK_WHY[bad.index[0]]}" if len(bad) else "")
    return (f": their parts add up to {row['parts_share'] * 100:.0f}% of their time, not "
            f"100%, so no share is given ({int(row['not_closing']):,} of them fail the "
            f"decomposition check{why}; summary.json checks lists them).")


def headline(f) -> str:
    """One plain sentence naming the dominant part of the ≥P99 band of the findings
    (findings.Findings), with figures; when it is a blocked part and the wakers were
    recorded, what was waited for and who ended it (the critical path, critpath.py)."""
    decomp, bands, run = f.decomp, f.bands, f.run
    if len(decomp) == 0 or BANDS[3] not in bands.index:
        return "No requests in this run: nothing to attribute."
    row = bands.loc[BANDS[3]]
    g, ms, share = dominant_group(bands)
    head = f"≥P99 requests (n={int(row['n'])}, mean {dur(row['e2e_ms'])})"
    if g is None:
        return head + ": no part could be measured."
    if pd.isna(row.get("oncpu_ms", np.nan)) and decomp["oncpu_ns"].notna().any():
        # queue wait alone is known for requests the probes did not cover
        return (head + ": no part could be measured: they ran on threads or at times the "
                "probes did not cover (an edge the kernel never reported, or outside the "
                "trace).")
    if not adds_up(row):
        return head + _not_adding_up(row, decomp, f.masks[BANDS[3]])
    _, label, noun = GROUPS[g]
    te = f.tail_excess
    ex = te["excess_ms"]
    g_ex = te["parts"][g]["ms"]
    s = (f"{head} spent {share * 100:.0f}% of their time {label}: "
         f"{dur(g_ex)} of the {dur(ex)} excess over the median is {noun}.")
    rc = f.root_cause(BANDS[3], g) if g in BLOCKED_GROUPS else None
    peer = _peer_sentence(f) if g in BLOCKED_GROUPS else None
    if rc and rc["verdict"] == "unknown" and (peer or not has_wakers(run)):
        rc = None      # nothing learnt from the wakers: the peer sentence or the plain one
    if rc and g == "io_wait" and rc.get("ended_by_task_share", 0) >= 0.5:
        # the syscall was I/O, but another task ended it: a wait for that task
        label = "waiting for other tasks (blocked in I/O syscalls that tasks, not devices, ended)"
    if rc:
        what = f", {rc['what_phrase']}" if rc["what_phrase"] else ""
        s = (f"{head} spent {share * 100:.0f}% of their time {label}{what}; {rc['sentence']}. "
             f"{dur(g_ex)} of the {dur(ex)} excess over the median is {noun}.")
    elif peer:
        s = f"{head} spent {share * 100:.0f}% of their time {label}; {peer}"
    s += _excess_elsewhere(te, g)
    if g == "queue_wait" and f.wait_objects:
        s += _workers_wait(run, decomp, f.wait_objects)
    if g == "runnable":
        s += _antagonist_words(f)
        s += (f" (Mean per request: {dur(row['runq_wakeup_ms'])} runnable after wakeups, "
              f"{dur(row['runq_preempt_ms'])} after preemption.)")
    if decomp["oncpu_ns"].isna().all():
        s += " No scheduler events were recorded: on-CPU, runnable and blocked time are unknown."
    caveats = []
    if run is not None:
        lost = {k: v for k, v in (getattr(run, "lost_events", {}) or {}).items() if v}
        if lost:
            caveats.append("events were lost (" + ", ".join(f"{k}: {v}" for k, v in lost.items())
                           + ")")
    # the traced requests' two columns this needs, not the whole frame
    traced = (decomp[["oncpu_ns", "closes"]][decomp["traced"].to_numpy(bool)]
              if "traced" in decomp else decomp)
    if len(traced) and traced["oncpu_ns"].notna().any():
        closes = traced["closes"].mean()
        if closes < 0.99:
            caveats.append(f"only {closes * 100:.0f}% of requests close")
    if caveats:
        s += " Caution: " + "; ".join(caveats) + "."
    return s


def no_requests_headline(run, sched: dict, threads: int) -> str:
    """The headline of a run without requests: what the scheduler figures say."""
    why = {"none": "No requests in this run (no --span)",
           "spans": "No call of the --span function completed while tracing",
           }.get(run.source, "requests.bin holds no complete request")
    s = f"{why}: scheduler view of {_n(threads, 'thread')}"
    facts = []
    if run.has("runq") and sched["runq_p50_us"] is not None:
        facts.append(f"run-queue latency P50 {sched['runq_p50_us']:,.1f} µs, "
                     f"P99 {sched['runq_p99_us']:,.1f} µs")
    if run.has("switches"):
        facts.append(f"{sched['voluntary']:,} voluntary and {sched['involuntary']:,} "
                     f"involuntary switches, {_n(sched['migrations'], 'migration')}")
    return s + (" — " + "; ".join(facts) if facts else "") + "."
