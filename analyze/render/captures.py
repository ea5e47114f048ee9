"""The flight recorder's captures (tailtrace --flight-recorder, docs/flight-recorder.md).

A recorder run directory holds meta.json ("flight": settings and counters), captures.jsonl
(one line a capture: dir, t_start_ns, latency_ns, worst_ns, threshold_ns, spans, bytes, error)
and captures/NNNN/, each an ordinary run directory of one window. `python3 -m analyze captures
DIR` reports every capture (pipeline.build_captures) and writes DIR/captures.html
(render_index): the captures by time, with each one's latency, the threshold that fired and
its headline, and how many fell into each cause.

The captures' table is load/captures.df_captures; after each capture's report,
pipeline.build_captures adds: cause (the ≥P99 band's largest part, cause_of), headline,
who (the antagonist or the waker the headline names, who_of; '' if none).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..explain.attribute import BANDS, GROUPS
from .fmt import fmt_fixed, fmt_int
from .html import CSS, esc


def cause_of(summary: dict) -> str:
    """The ≥P99 band's largest part (attribute.GROUPS key), '' when unknown."""
    row = (summary.get("attribution") or {}).get(BANDS[3]) or {}
    best, best_ms = "", -1.0
    for g, (cols, _, _) in GROUPS.items():
        vals = [row.get(c.replace("_ns", "_ms")) for c in cols]
        if any(v is None for v in vals):
            continue
        if sum(vals) > best_ms:
            best, best_ms = g, sum(vals)
    return best


def who_of(summary: dict) -> str:
    """Whom the headline blames: the top antagonist of a runnable tail, else the waker."""
    top = ((summary.get("antagonists") or {}).get(BANDS[3]) or {}).get("top") or []
    if cause_of(summary) == "runnable" and top:
        t = top[0]
        return f"{t.get('comm') or '?'}" + (f" (pid {t['pid']})" if t.get("pid") else "")
    cp = (summary.get("critical_path") or {}).get(BANDS[3]) or {}
    return cp.get("who") or ""


def render_index(run_dir: Path, df: pd.DataFrame) -> str:
    meta = json.loads((run_dir / "meta.json").read_text())
    fl = meta.get("flight") or {}
    rows = "".join(
        f"<tr><td>{r.t_s:,.1f}</td><td>{fmt_fixed(r.worst_ns, ',.3f', 1e6)}</td>"
        f"<td>{fmt_fixed(r.threshold_ns, ',.3f', 1e6)}</td>"
        f"<td>{fmt_int(r.spans)}</td><td>{esc(GROUPS[r.cause][2] if r.cause else '–')}</td>"
        f'<td class="t"><a href="{esc(r.dir)}/report.html">{esc(r.dir)}</a>: '
        f"{esc(r.headline)}</td></tr>" for r in df.sort_values("t_start_ns").itertuples())
    by_cause = df[df["cause"] != ""].groupby("cause").size().sort_values(ascending=False)
    causes = ", ".join(f"{GROUPS[c][2]} {n}" for c, n in by_cause.items()) or "none analysed"
    skipped = (f"{fmt_int(fl.get('skipped_rate'))} skipped by --max-captures-per-min, "
               f"{fmt_int(fl.get('skipped_disk'))} by --max-disk-mb, "
               f"{fmt_int(fl.get('coalesced'))} coalesced into another, "
               f"{fmt_int(fl.get('failed'))} failed")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>tailtrace captures · {esc(run_dir.name)}</title><style>{CSS}</style></head>"
            f"<body><main><section><h1>Flight recorder: {len(df)} captures</h1>"
            f"<p>Trigger {esc(fl.get('trigger'))} over {fmt_int(fl.get('spans'))} spans; "
            f"{fmt_int(fl.get('triggers'))} above it; {skipped}. By cause (the largest part "
            f"of the capture's ≥P99 band): {esc(causes)}.</p>"
            '<table class="num"><thead><tr><th>t (s)</th><th>latency ms</th>'
            "<th>threshold ms</th><th>spans</th><th>cause</th><th>headline</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></section></main></body></html>\n")
