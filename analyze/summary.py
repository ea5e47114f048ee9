"""summary.json: the run's figures in one JSON-ready dict.

Keys: workload, conns, workers, requests, errors, throughput_rps,
latency_ms{avg,p50,p90,p99,p999,max}, e2e_ms{avg,p50,p99,max},
queue_wait_ms{p50,p99,max}, attribution{band:{n, latency_ms, e2e_ms,
<part>_ms, <part>_share}}, headline, sched{runq_p50_us, runq_p99_us,
voluntary, involuntary, migrations}, lost_events{stream:n}, closure_ratio,
plus source, tail_excess, spearman_runnable, warnings.
Percentiles are numpy's default (linear interpolation) over all requests.
NaN becomes null.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .attribute import headline, spearman_runnable, tail_excess
from .decompose import PARTS, valid_requests

MS = 1e6


def _num(x):
    """Plain Python number (None for NaN/inf) so json.dumps writes valid JSON."""
    if x is None:
        return None
    if isinstance(x, (np.integer, int)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    x = float(x)
    return x if math.isfinite(x) else None


def _clean(o):
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, str) or o is None:
        return o
    return _num(o)


def _pcts(ns: pd.Series, keys: dict) -> dict:
    x = ns.to_numpy(dtype=np.float64)
    x = x[np.isfinite(x)]
    out = {}
    for k, q in keys.items():
        if not len(x):
            out[k] = None
        elif q == "avg":
            out[k] = x.mean() / MS
        elif q == "max":
            out[k] = x.max() / MS
        else:
            out[k] = np.percentile(x, q) / MS
    return out


def _failed(status: pd.Series) -> np.ndarray:
    s = status.to_numpy()
    return (s < 200) | (s >= 400)


def _sched(run) -> dict:
    d = run.runq["dur_ns"].to_numpy(dtype=np.float64)
    sw = run.switches
    return {"runq_p50_us": np.percentile(d, 50) / 1e3 if len(d) else None,
            "runq_p99_us": np.percentile(d, 99) / 1e3 if len(d) else None,
            "voluntary": int(sw["voluntary"].sum()),
            "involuntary": int((~sw["voluntary"]).sum()),
            "migrations": int(run.tasks["migrations"].sum())}


def _warnings(run, decomp) -> list:
    w = list(getattr(run, "warnings", []))
    for s, n in run.lost_events.items():
        if n:
            w.append(f"{s}: {n} events lost: parts built from {s} may be short and "
                     "requests may not close (use a bigger --ringbuf-mb)")
    if run.meta.get("incomplete"):
        w.append("the capture was stopped early (meta.json incomplete=true)")
    bad = int((~valid_requests(run.requests)).sum())
    if bad:
        w.append(f"{bad} request records have no valid start/end times (0 < t_enqueue ≤ t_start "
                 "≤ t_end fails): left out of every figure except 'requests' and 'errors'")
    if "traced" in decomp and len(decomp) and not decomp["traced"].all():
        w.append(f"{int((~decomp['traced']).sum())} requests ran on threads or at times "
                 "the probes did not cover: their parts are unknown")
    return w


def summary_dict(run, decomp: pd.DataFrame, bands: pd.DataFrame) -> dict:
    """The dict written as summary.json (see module doc for the keys)."""
    wl = run.workload or {}
    req = run.requests
    ok = req[valid_requests(req)]
    dur_s = (ok["t_end_ns"].max() - ok["t_enqueue_ns"].min()) / 1e9 if len(ok) else 0.0
    attribution = {}
    for b, row in bands.iterrows():
        a = {"n": int(row["n"]), "latency_ms": row["latency_ms"], "e2e_ms": row["e2e_ms"]}
        for p in PARTS + ["runnable"]:
            a[f"{p}_ms"], a[f"{p}_share"] = row[f"{p}_ms"], row[f"{p}_share"]
        attribution[b] = a
    judged = decomp[decomp["closure_err"].notna()] if len(decomp) else decomp
    out = {
        "workload": wl.get("model") or wl.get("workload") or run.source,
        "conns": wl.get("conns", int(req["conn"].nunique())),
        "workers": wl.get("workers", int(req["tid"].nunique())),
        "requests": int(len(req)),
        "errors": int(_failed(req["status"]).sum()),
        "throughput_rps": len(ok) / dur_s if dur_s > 0 else None,
        "latency_ms": _pcts(decomp["latency_ns"], {"avg": "avg", "p50": 50, "p90": 90, "p99": 99,
                                                   "p999": 99.9, "max": "max"}),
        "e2e_ms": _pcts(decomp["e2e_ns"], {"avg": "avg", "p50": 50, "p99": 99, "max": "max"}),
        "queue_wait_ms": _pcts(decomp["queue_wait_ns"], {"p50": 50, "p99": 99, "max": "max"}),
        "attribution": attribution,
        "headline": headline(decomp, bands, run),
        "sched": _sched(run),
        "lost_events": dict(run.lost_events),
        "lost_events_total": int(sum(run.lost_events.values())),
        "closure_ratio": float(judged["closes"].mean()) if len(judged) else None,
        "source": run.source,
        "tail_excess": tail_excess(decomp) if len(decomp) else None,
        "spearman_runnable": spearman_runnable(decomp),
        "warnings": _warnings(run, decomp),
    }
    return _clean(out)
