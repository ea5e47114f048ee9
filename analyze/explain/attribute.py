"""Where the tail went: percentile bands, the tail's excess over the median (its sentences:
words.py).

Bands are cut at percentiles of one column (latency_ns by default) computed
with numpy's default (linear interpolation):
  ≤P50: x ≤ p50    P50–P90: p50 < x ≤ p90    P90–P99: p90 < x < p99    ≥P99: x ≥ p99
and, when there are at least 10 000 requests, ≥P99.9: x ≥ p99.9 (a subset of ≥P99).
Shares are of the band's mean e2e (queue wait + service time).

Every request with a latency is in its band, whether its parts are known or not: a
request whose thread or window the probes did not cover (a thread of an untraced process, a
capture's window, the trace's edges) has a latency but no parts, and leaving it out would
leave the band's slowest requests out unsaid. Its band counts it (n_unknown, with the
commonest reason, unknown_check, and whether the band's slowest request is one of them),
and the band's means are those of the requests whose parts are known
(decompose.decomposed), so that they add up. Each band also checks itself: parts_share = Σ
part means / mean e2e (1 when its requests close), and counts the requests whose own parts
do not close (not_closing).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .critpath import CP_COLS
from .decompose import CHECK_WHY, CHECKS, CLOSE_TOL, PARTS, decomposed

BANDS = ["≤P50", "P50–P90", "P90–P99", "≥P99"]
BAND_P999 = "≥P99.9"
P999_MIN_REQUESTS = 10_000
MS = 1e6


# Parts grouped the way the headline speaks about them: (columns, label, noun for the excess)
GROUPS = {
    "queue_wait": (["queue_wait_ns"], "waiting in the queue for a worker", "queue wait"),
    "oncpu": (["oncpu_ns"], "on CPU (running)", "on-CPU work"),
    "runnable": (["runq_wakeup_ns", "runq_preempt_ns"], "runnable (waiting for a CPU)",
                 "scheduler delay"),
    "throttled": (["throttled_ns"], "throttled (runnable, held back by a CPU quota)",
                  "CPU-quota throttling"),
    "lock_wait": (["lock_wait_ns"], "waiting for a lock (futex: mutex, condvar)", "lock wait"),
    "io_wait": (["io_wait_ns"], "blocked on I/O (socket, pipe, poll)", "I/O wait"),
    "sleep": (["sleep_ns"], "sleeping (timers)", "sleep"),
    "blocked": (["blocked_ns"], "blocked (other reasons)", "blocked time"),
}


def band_edges(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """Percentile cut points of decomp[by] among all the requests: {"p50", "p90", "p99",
    "p999"}."""
    x = decomp[by].to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {k: np.nan for k in ("p50", "p90", "p99", "p999")}
    p = np.percentile(x, [50, 90, 99, 99.9])
    return dict(zip(("p50", "p90", "p99", "p999"), p))


def band_masks(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """{band: boolean mask over decomp rows}, ≥P99.9 only with ≥ 10k requests; every
    request with a latency is in its band, its parts known or not (known_masks: only those
    whose parts are known)."""
    x = decomp[by].to_numpy(dtype=np.float64)
    e = band_edges(decomp, by)
    m = {BANDS[0]: x <= e["p50"],
         BANDS[1]: (x > e["p50"]) & (x <= e["p90"]),
         BANDS[2]: (x > e["p90"]) & (x < e["p99"]),
         BANDS[3]: x >= e["p99"]}
    if int(np.isfinite(x).sum()) >= P999_MIN_REQUESTS:
        m[BAND_P999] = x >= e["p999"]
    return m


def known_masks(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """band_masks restricted to the requests whose parts are known (decompose.decomposed):
    the ones a band's parts are averaged over."""
    known = decomposed(decomp)
    return {b: m & known for b, m in band_masks(decomp, by).items()}


def band_of(decomp: pd.DataFrame, by: str = "latency_ns", masks: dict | None = None) -> pd.Series:
    """Each request's band among BANDS (≥P99.9 requests are labelled ≥P99; a request
    without a latency has none), from band_masks or the masks given."""
    codes = np.full(len(decomp), -1, dtype=np.int8)     # -1: no band (NaN)
    for b, m in (band_masks(decomp, by) if masks is None else masks).items():
        if b in BANDS:
            codes[m] = BANDS.index(b)
    return pd.Series(pd.Categorical.from_codes(codes, categories=BANDS), index=decomp.index,
                     name="band")


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
    known = [row[f"{p}_ms"] for p in PARTS if pd.notna(row[f"{p}_ms"])]
    row["parts_share"] = (sum(known) * MS / e2e if e2e and len(known) > 1 else np.nan)
    row["not_closing"] = (int((d["closure_err"] > CLOSE_TOL).sum())
                          if "closure_err" in d else 0)
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
    parts_share (Σ part means / mean e2e: 1 when the band adds up; NaN when only queue
    wait is known), not_closing (requests whose own parts miss their latency by > 1%),
    blocked_all_ms (blocked for any reason: lock_wait + io_wait + sleep + blocked);
    with a peer_runnable_ns column in decomp (analyze/explain/peer.py) also peer_runnable_ms (mean),
    peer_runnable_all_ms (mean of peer_runnable_all_ns) and peer_runnable_of_blocked (mean
    peer runnable / mean blocked, capped at 1; NaN without a traced peer or without blocked
    time)."""
    masks = band_masks(decomp, by)
    x = decomp[by].to_numpy(dtype=np.float64)
    known = decomposed(decomp)
    chk = decomp["check"].astype(str).to_numpy() if "check" in decomp else None
    rows = {}
    for b, m in masks.items():
        sel = x[m]
        rows[b] = _band_row(decomp[m & known], sel.min() if len(sel) else np.nan,
                            sel.max() if len(sel) else np.nan)
        rows[b].update(_unknown_of(m, known, x, chk))
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "band"
    for c in ("n", "n_unknown", "not_closing"):
        df[c] = df[c].astype(np.int64)
    return df


def _unknown_of(member: np.ndarray, known: np.ndarray, x: np.ndarray, chk) -> dict:
    """A band's requests whose parts are unknown: n (all its requests), n_unknown, the
    commonest check among them (unknown_check) and whether the band's slowest request is
    one of them (slowest_unknown)."""
    unknown = member & ~known
    out = {"n": int(member.sum()), "n_unknown": int(unknown.sum()), "unknown_check": None,
           "slowest_unknown": False}
    if out["n_unknown"] and chk is not None:
        vals, counts = np.unique(chk[unknown], return_counts=True)
        out["unknown_check"] = str(vals[np.argmax(counts)])
        rows = np.flatnonzero(member)
        out["slowest_unknown"] = bool(unknown[rows[np.nanargmax(x[rows])]])
    return out


def adds_up(row) -> bool:
    """Does a band's row (df_bands) add up: its parts within CLOSE_TOL of its mean e2e, no
    part above it? True where the parts are unknown (nothing to check)."""
    ps = row.get("parts_share", np.nan)
    if pd.isna(ps):
        return True
    shares = [row.get(f"{p}_share", np.nan) for p in PARTS] + [row.get("runnable_share")]
    return abs(ps - 1) <= CLOSE_TOL and not any(pd.notna(v) and v > 1 + CLOSE_TOL
                                                 for v in shares)


def tail_excess(decomp: pd.DataFrame, by: str = "latency_ns") -> dict:
    """≥P99 band mean minus ≤P50 band mean, in total (e2e) and split by part.

    {"n_tail", "n_median", "tail_ms", "median_ms", "excess_ms",
     "parts": {part or "runnable": {"ms": excess, "share": excess / total excess}}}
    """
    m = known_masks(decomp, by)
    cols = [c for c in ["e2e_ns"] + [f"{p}_ns" for p in PARTS + ["runnable"]] if c in decomp]
    tail, med = decomp.loc[m[BANDS[3]], cols], decomp.loc[m[BANDS[0]], cols]
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
    x, y = (decomp[c].to_numpy(np.float64) for c in ("runnable_ns", "latency_ns"))
    ok = ~(np.isnan(x) | np.isnan(y))
    if ok.sum() < 3:
        return float("nan")
    (rx, nx), (ry, ny) = _average_ranks(x[ok]), _average_ranks(y[ok])
    if nx < 2 or ny < 2:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _average_ranks(v: np.ndarray) -> tuple[np.ndarray, int]:
    """(1-based ranks of v, ties given their mean rank as pandas' rank(method="average"),
    how many distinct values)."""
    o = np.argsort(v, kind="stable")
    sv = v[o]
    start = np.flatnonzero(np.r_[True, sv[1:] != sv[:-1]])
    end = np.r_[start[1:], len(v)]
    r = np.empty(len(v))
    r[o] = np.repeat((start + end + 1) / 2, end - start)
    return r, len(start)


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


def dominant_blocked(bands: pd.DataFrame, band: str) -> str | None:
    """The blocked part (BLOCKED_GROUPS) with the most time in the band, or None."""
    row = bands.loc[band]
    ms = {g: row.get(f"{g}_ms", np.nan) for g in BLOCKED_GROUPS}
    ms = {g: v for g, v in ms.items() if pd.notna(v) and v > 0}
    return max(ms, key=ms.get) if ms else None


def check_summary(decomp: pd.DataFrame, bands: pd.DataFrame | None = None,
                  n_failed: int = 10) -> dict:
    """summary.json "checks": how many requests were decomposed, how many close, why the
    others did not (by CHECKS), which bands add up (adds_up), and the slowest
    n_failed requests that failed a check, each with its reason in words.

    {"requests", "decomposed", "close", "left_out" (not in any band: parts unknown),
     "by_check": {check: n} (non-zero only), "bands_add_up": {band: bool},
     "failed": [{id, tid, pid, t_start_ns, latency_ms, parts_ms, check, why}]}"""
    chk = decomp["check"] if "check" in decomp else pd.Series(pd.Categorical([], CHECKS))
    counts = chk.value_counts()
    scope = decomposed(decomp)
    known = scope & (chk.cat.codes.to_numpy() <= CHECKS.index("outside")) if len(chk) else scope
    bad = ~chk.isin(["ok", "no_switches"]).to_numpy() if len(chk) else np.zeros(0, bool)
    rows = np.flatnonzero(bad)
    lat = decomp["latency_ns"].to_numpy()
    rows = rows[np.argsort(-lat[rows], kind="stable")][:n_failed]
    failed = []
    for i in rows:
        r = decomp.iloc[i]
        c = str(r["check"])
        parts = (r["latency_ns"] * (1 + r["closure_err"]) if pd.notna(r["closure_err"])
                 else np.nan)
        failed.append({"id": int(r["id"]), "tid": int(r["tid"]), "pid": int(r["pid"]),
                       "t_start_ns": int(r["t_start_ns"]), "latency_ms": r["latency_ns"] / 1e6,
                       "parts_ms": None if pd.isna(parts) else parts / 1e6, "check": c,
                       "why": CHECK_WHY[c]})
    return {"requests": int(len(decomp)), "decomposed": int(known.sum()),
            "close": int((chk == "ok").sum()) if len(chk) else 0,
            "left_out": int((~scope).sum()),
            "by_check": {c: int(counts.get(c, 0)) for c in CHECKS if counts.get(c, 0)},
            "bands_add_up": ({} if bands is None or bands.empty else
                             {b: bool(adds_up(r)) for b, r in bands.iterrows()}),
            "failed": failed}
