"""Where the tail went: percentile bands, the tail's excess over the median, headline.

Bands are cut at percentiles of one column (latency_ns by default) computed
with numpy's default (linear interpolation):
  ≤P50: x ≤ p50    P50–P90: p50 < x ≤ p90    P90–P99: p90 < x < p99    ≥P99: x ≥ p99
and, when there are at least 10 000 requests, ≥P99.9: x ≥ p99.9 (a subset of ≥P99).
Shares are of the band's mean e2e (queue wait + service time).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .critpath import CP_COLS, has_wakers
from .decompose import PARTS
from .load import fold_comm

BANDS = ["≤P50", "P50–P90", "P90–P99", "≥P99"]
BAND_P999 = "≥P99.9"
P999_MIN_REQUESTS = 10_000
MS = 1e6


def dur(ms: float) -> str:
    """A duration given in ms, in the unit that shows it: '3.4 ms', '33 µs', '2.1 µs'."""
    a = abs(ms)
    if a >= 0.9995 or a == 0:
        return f"{ms:.1f} ms"
    us = ms * 1e3
    return f"{us:.0f} µs" if abs(us) >= 9.95 else f"{us:.1f} µs"

# Parts grouped the way the headline speaks about them: (columns, label, noun for the excess)
GROUPS = {
    "queue_wait": (["queue_wait_ns"], "waiting in the queue for a worker", "queue wait"),
    "oncpu": (["oncpu_ns"], "on CPU (running)", "on-CPU work"),
    "runnable": (["runq_wakeup_ns", "runq_preempt_ns"], "runnable (waiting for a CPU)",
                 "scheduler delay"),
    "lock_wait": (["lock_wait_ns"], "waiting for a lock (futex: mutex, condvar)", "lock wait"),
    "io_wait": (["io_wait_ns"], "blocked on I/O (socket, pipe, poll)", "I/O wait"),
    "sleep": (["sleep_ns"], "sleeping (timers)", "sleep"),
    "blocked": (["blocked_ns"], "blocked (other reasons)", "blocked time"),
}


def band_edges(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """Percentile cut points of decomp[by]: {"p50", "p90", "p99", "p999"}."""
    x = decomp[by].to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {k: np.nan for k in ("p50", "p90", "p99", "p999")}
    p = np.percentile(x, [50, 90, 99, 99.9])
    return dict(zip(("p50", "p90", "p99", "p999"), p))


def band_masks(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """{band: boolean mask over decomp rows}, ≥P99.9 only with ≥ 10k requests."""
    x = decomp[by].to_numpy(dtype=np.float64)
    e = band_edges(decomp, by)
    m = {BANDS[0]: x <= e["p50"],
         BANDS[1]: (x > e["p50"]) & (x <= e["p90"]),
         BANDS[2]: (x > e["p90"]) & (x < e["p99"]),
         BANDS[3]: x >= e["p99"]}
    if len(decomp) >= P999_MIN_REQUESTS:
        m[BAND_P999] = x >= e["p999"]
    return m


def band_of(decomp: pd.DataFrame, by: str = "latency_ns") -> pd.Series:
    """Each request's band among BANDS (≥P99.9 requests are labelled ≥P99)."""
    lab = np.full(len(decomp), None, dtype=object)
    for b, m in band_masks(decomp, by).items():
        if b in BANDS:
            lab[m] = b
    return pd.Series(pd.Categorical(lab, categories=BANDS), index=decomp.index, name="band")


def _mean(d: pd.DataFrame, col: str) -> float:
    """Mean of a column; NaN when the column is absent (a part that was not measured)."""
    return d[col].mean() if col in d else np.nan


def _band_row(d: pd.DataFrame, lo: float, hi: float) -> dict:
    row = {"n": len(d), "lo_ms": lo / MS, "hi_ms": hi / MS,
           "latency_ms": d["latency_ns"].mean() / MS, "e2e_ms": d["e2e_ns"].mean() / MS}
    e2e = d["e2e_ns"].mean()
    for p in PARTS:
        m = _mean(d, f"{p}_ns")
        row[f"{p}_ms"] = m / MS
        row[f"{p}_share"] = m / e2e if e2e else np.nan
    run_ns = d["runq_wakeup_ns"].mean() + d["runq_preempt_ns"].mean()
    row["runnable_ms"], row["runnable_share"] = run_ns / MS, (run_ns / e2e if e2e else np.nan)
    row["closes_share"] = d["closes"].mean() if len(d) else np.nan
    blocked = (d["blocked_all_ns"] if "blocked_all_ns" in d else d["blocked_ns"]).mean()
    row["blocked_all_ms"] = blocked / MS
    for c in CP_COLS:
        if c in d:
            row[c.replace("_ns", "_ms")] = d[c].mean() / MS
    if "peer_runnable_ns" in d:
        peer = d["peer_runnable_ns"].mean()
        row["peer_runnable_ms"] = peer / MS
        row["peer_runnable_all_ms"] = (d["peer_runnable_all_ns"].mean() / MS
                                       if "peer_runnable_all_ns" in d else np.nan)
        row["peer_runnable_of_blocked"] = (min(peer / blocked, 1.0) if blocked > 0
                                           else np.nan)
    return row


def df_bands(decomp: pd.DataFrame, by: str = "latency_ns") -> pd.DataFrame:
    """Index = band; columns n, lo_ms/hi_ms (band's range of `by`), latency_ms, e2e_ms,
    {part}_ms and {part}_share for every part in PARTS, runnable_ms/_share, closes_share,
    blocked_all_ms (blocked for any reason: lock_wait + io_wait + sleep + blocked);
    with a peer_runnable_ns column in decomp (analyze/peer.py) also peer_runnable_ms (mean),
    peer_runnable_all_ms (mean of peer_runnable_all_ns) and peer_runnable_of_blocked (mean
    peer runnable / mean blocked, capped at 1; NaN without a traced peer or without blocked
    time)."""
    masks = band_masks(decomp, by)
    x = decomp[by].to_numpy(dtype=np.float64)
    rows = {}
    for b, m in masks.items():
        sel = x[m]
        rows[b] = _band_row(decomp[m], sel.min() if len(sel) else np.nan,
                            sel.max() if len(sel) else np.nan)
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "band"
    df["n"] = df["n"].astype(np.int64)
    return df


def tail_excess(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """≥P99 band mean minus ≤P50 band mean, in total (e2e) and split by part.

    {"n_tail", "n_median", "tail_ms", "median_ms", "excess_ms",
     "parts": {part or "runnable": {"ms": excess, "share": excess / total excess}}}
    """
    m = band_masks(decomp, by)
    tail, med = decomp[m[BANDS[3]]], decomp[m[BANDS[0]]]
    ex = (tail["e2e_ns"].mean() - med["e2e_ns"].mean()) / MS
    out = {"n_tail": int(len(tail)), "n_median": int(len(med)),
           "tail_ms": tail["e2e_ns"].mean() / MS, "median_ms": med["e2e_ns"].mean() / MS,
           "excess_ms": ex, "parts": {}}
    for p in PARTS + ["runnable"]:
        d = (_mean(tail, f"{p}_ns") - _mean(med, f"{p}_ns")) / MS
        out["parts"][p] = {"ms": d, "share": d / ex if ex else np.nan}
    return out


def spearman_runnable(decomp: pd.DataFrame) -> float:
    """Spearman rank correlation of runnable_ns with latency_ns (NaN if undefined)."""
    d = decomp[["runnable_ns", "latency_ns"]].dropna()
    if len(d) < 3 or d["runnable_ns"].nunique() < 2 or d["latency_ns"].nunique() < 2:
        return float("nan")
    r = d.rank(method="average")
    return float(np.corrcoef(r["runnable_ns"], r["latency_ns"])[0, 1])


def dominant_group(bands: pd.DataFrame, band: str = BANDS[3]) -> tuple[str, float, float]:
    """(group, mean ms, share) of the largest group in `band`; NaN groups are skipped."""
    row = bands.loc[band]
    best = (None, np.nan, -1.0)
    for g, (cols, _, _) in GROUPS.items():
        parts = [row[c.replace("_ns", "_ms")] for c in cols]
        if any(pd.isna(v) for v in parts):
            continue
        ms = float(sum(parts))
        share = ms / row["e2e_ms"] if row["e2e_ms"] else 0.0
        if share > best[2]:
            best = (g, ms, share)
    return best


BLOCKED_GROUPS = ("lock_wait", "io_wait", "sleep", "blocked")
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


def dominant_blocked(bands: pd.DataFrame, band: str) -> str | None:
    """The blocked part (BLOCKED_GROUPS) with the most time in the band, or None."""
    row = bands.loc[band]
    ms = {g: row.get(f"{g}_ms", np.nan) for g in BLOCKED_GROUPS}
    ms = {g: v for g, v in ms.items() if pd.notna(v) and v > 0}
    return max(ms, key=ms.get) if ms else None


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
    antagonists (analyze/antagonists.py), or ''."""
    from .antagonists import sentence
    info = (f.antagonists or {}).get(BANDS[3])
    if not info or f.run is None:
        return ""
    row = f.bands.loc[BANDS[3]]
    pre = row["runq_preempt_ms"] / row["runnable_ms"] if row["runnable_ms"] else 0.0
    d = f.decomp
    words = sentence(f.run, info, set(d["pid"].astype(int)) if "pid" in d else set(), pre)
    return f" While runnable, they {words}." if words else ""


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
    traced = decomp[decomp["traced"]] if "traced" in decomp else decomp
    if len(traced) and traced["oncpu_ns"].notna().any():
        closes = traced["closes"].mean()
        if closes < 0.99:
            caveats.append(f"only {closes * 100:.0f}% of requests close")
    if caveats:
        s += " Caution: " + "; ".join(caveats) + "."
    return s
