"""Runs side by side: the table of their summaries, its text and compare.html (the pipeline's
write_compare analyses the runs and writes the files).

Columns of compare_table (one row per run, in the order given):
  run (label), requests, errors (None when unknown: no requests; shown as "n/a"; for
  requests built from spans, the calls that did not return), throughput_rps, avg_ms, p99_ms, max_ms (end to end:
  what a client saw, queue wait included), p99_service_ms, queue_p99_ms,
  p99_runnable_share (share of the ≥P99 band's mean e2e time spent runnable;
  NaN without probes), closure_ratio (share of requests whose parts close;
  NaN without probes), headline, p99_peer_runnable_ms and p99_peer_runnable_of_blocked
  (the ≥P99 band's mean time a traced peer process, tailtrace --also-pid, was runnable,
  and its share of the band's mean blocked time; NaN without a peer; compare.html only),
  workload, conns, workers (from summary.json; None when unknown). A sweep's runs add the
  seed's table (sweep.md) and, with pool runs at >= 3 worker counts, P99 and throughput vs
  workers with the knee named (analyze/render/sweep.py).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..explain.attribute import BANDS
from .fmt import fmt_errors, fmt_int, fmt_share
from .fmt import fmt_run_ms as fmt_ms
from .html import CSS, esc, img_tag
from .summary import run_label
from .sweep import df_knee, knee_sentences

COLUMNS = ["run", "requests", "errors", "throughput_rps", "avg_ms", "p99_ms", "max_ms",
           "p99_service_ms", "queue_p99_ms", "p99_runnable_share", "closure_ratio", "headline",
           "p99_peer_runnable_ms", "p99_peer_runnable_of_blocked", "workload", "conns",
           "workers"]
TAIL = BANDS[3]


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab}#{seen[lab]}")
    return out


def compare_row(label: str, summary: dict) -> dict:
    """One table row from a summary dict (summary.summary_dict's keys)."""
    e2e, lat = summary.get("e2e_ms") or {}, summary.get("latency_ms") or {}
    attr = summary.get("attribution")
    tail = attr.get(TAIL, {}) if isinstance(attr, dict) else {}
    share = tail.get("runnable_share")
    if share is None and "runq_wakeup_share" in tail:
        share = (tail.get("runq_wakeup_share") or 0) + (tail.get("runq_preempt_share") or 0)
    return {"run": label, "requests": summary.get("requests"), "errors": summary.get("errors"),
            "throughput_rps": summary.get("throughput_rps"), "avg_ms": e2e.get("avg"),
            "p99_ms": e2e.get("p99"), "max_ms": e2e.get("max"),
            "p99_service_ms": lat.get("p99"),
            "queue_p99_ms": (summary.get("queue_wait_ms") or {}).get("p99"),
            "p99_runnable_share": np.nan if share is None else share,
            "closure_ratio": np.nan if summary.get("closure_ratio") is None
            else summary["closure_ratio"],
            "headline": summary.get("headline", ""),
            "p99_peer_runnable_ms": _peer(summary, "runnable_ms"),
            "p99_peer_runnable_of_blocked": _peer(summary, "runnable_of_blocked"),
            "workload": summary.get("workload"), "conns": summary.get("conns"),
            "workers": summary.get("workers")}


def _peer(summary: dict, key: str) -> float:
    """summary.json peer[key][≥P99], NaN without a traced peer."""
    peer = summary.get("peer")
    v = (peer.get(key) or {}).get(TAIL) if isinstance(peer, dict) else None
    return np.nan if v is None else v


def compare_table(analysed: list[dict]) -> tuple[pd.DataFrame, dict]:
    """(table, {label: decomposition}) of analysed runs (pipeline.analyse's dicts), in order."""
    labels = _unique([run_label(a["run"]) for a in analysed])
    rows = [compare_row(lab, a["summary"]) for lab, a in zip(labels, analysed)]
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df, {lab: a["decomp"] for lab, a in zip(labels, analysed)}


def _runnable_cell(r) -> str:
    """≥P99 runnable share, or why there is none."""
    if pd.notna(r.p99_runnable_share):
        return fmt_share(r.p99_runnable_share)
    return "no requests" if not r.requests else "needs probes"


def format_table(df: pd.DataFrame) -> str:
    """The plain-text table printed by `python3 -m analyze compare`."""
    heads = ["run", "throughput", "avg ms", "P99 ms", "max ms", "P99 svc ms", "≥P99 runnable",
             "close"]
    rows = [[str(r.run), f"{fmt_int(r.throughput_rps)}/s", fmt_ms(r.avg_ms), fmt_ms(r.p99_ms),
             fmt_ms(r.max_ms), fmt_ms(r.p99_service_ms), _runnable_cell(r),
             f"{r.closure_ratio:.0%}" if pd.notna(r.closure_ratio) else "–"]
            for r in df.itertuples()]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(heads), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _knee_section(knee: pd.DataFrame, png: str | None) -> str:
    if knee.empty:
        return ""
    items = "".join(f"<li>{esc(s)}</li>" for s in knee_sentences(knee))
    img = img_tag(png, "P99 and throughput vs pool workers") if png else ""
    return f'<section><h2>Pool workers: the knee</h2><ul>{items}</ul>{img}</section>'


def render_compare(df: pd.DataFrame, png: str | None, knee_png: str | None = None) -> str:
    """compare.html: the table, the percentile plot (embedded) and each run's headline."""
    heads = ["run", "requests", "errors", "throughput (req/s)", "avg ms", "P99 ms", "max ms",
             "P99 service ms", "queue wait P99 ms", "≥P99 share runnable", "requests closing"]
    peer = df["p99_peer_runnable_ms"].notna().any()
    if peer:
        heads.append("≥P99 peer runnable ms · of blocked")
    body = []
    for r in df.itertuples():
        cells = [str(r.run), fmt_int(r.requests), fmt_errors(r.errors),
                 fmt_int(r.throughput_rps), fmt_ms(r.avg_ms),
                 fmt_ms(r.p99_ms), fmt_ms(r.max_ms), fmt_ms(r.p99_service_ms),
                 fmt_ms(r.queue_p99_ms), _runnable_cell(r),
                 f"{r.closure_ratio:.1%}" if pd.notna(r.closure_ratio) else "–"]
        if peer:
            cells.append(f"{fmt_ms(r.p99_peer_runnable_ms)} · "
                         f"{fmt_share(r.p99_peer_runnable_of_blocked)}"
                         if pd.notna(r.p99_peer_runnable_ms) else "no peer traced")
        body.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    table = ('<table class="num"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in heads)
             + f'</tr></thead><tbody>{"".join(body)}</tbody></table>')
    heads_html = "".join(f"<li><b>{esc(str(r.run))}</b>: {esc(str(r.headline))}</li>"
                         for r in df.itertuples())
    img = img_tag(png, "latency percentiles of all runs") if png else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>tailtrace compare</title><style>{CSS}</style></head><body><main>"
            f"<header><h1>tailtrace compare · {len(df)} runs</h1>"
            "<p>avg, P99 and max are end to end (t_end − t_enqueue: what a client saw, queue "
            "wait included); “≥P99 share runnable” is the share of the ≥P99 band's time spent "
            "runnable (waiting for a CPU); below 99% of requests closing, attributions are "
            "approximate."
            + (" “≥P99 peer runnable” is the ≥P99 band's mean time during a request when a "
               "thread of another traced process (tailtrace --also-pid, e.g. the server) was "
               "waiting for a CPU, and its share of the band's mean blocked time." if peer
               else "") + "</p></header>"
            f'<section><h2>Runs</h2>{table}</section>'
            f'<section><h2>Latency by percentile</h2>{img}</section>'
            + _knee_section(df_knee(df), knee_png) +
            f'<section><h2>Headlines</h2><ul>{heads_html}</ul></section>'
            "</main></body></html>\n")
