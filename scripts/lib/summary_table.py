"""The short table run.sh prints after a run or a sweep, read from each run's summary.json.

Columns: run label, throughput (req/s), service-time avg / P99 / max (ms), end-to-end P99 (ms,
includes queue wait), and the runnable share of the >=P99 band (runq_wakeup + runq_preempt share
of that band's mean end-to-end latency: how much of the tail was waiting for a CPU).
"""
import json
import math
import os
import sys

TAIL_BAND = "≥P99"
COLUMNS = [("run", "{}"), ("req/s", "{:.0f}"), ("avg ms", "{:.3f}"), ("P99 ms", "{:.3f}"),
           ("max ms", "{:.3f}"), ("e2e P99 ms", "{:.3f}"), ("runnable ≥P99", "{:.0%}")]


def runnable_share(summary):
    """runq_wakeup_share + runq_preempt_share of the >=P99 band; None without probes."""
    attribution = summary.get("attribution")
    band = attribution.get(TAIL_BAND) if isinstance(attribution, dict) else None
    if not isinstance(band, dict):
        return None
    parts = [band.get("runq_wakeup_share"), band.get("runq_preempt_share")]
    if any(not isinstance(p, (int, float)) or math.isnan(p) for p in parts):
        return None
    return parts[0] + parts[1]


def row_from_summary(label, summary):
    lat = summary.get("latency_ms") or {}
    e2e = summary.get("e2e_ms") or {}
    return [label, summary.get("throughput_rps"), lat.get("avg"), lat.get("p99"), lat.get("max"),
            e2e.get("p99"), runnable_share(summary)]


def rows_from_runs(run_dirs):
    """One row per run directory that has a summary.json (others are reported, not fatal)."""
    rows = []
    for d in run_dirs:
        path = os.path.join(d, "summary.json")
        label = os.path.basename(os.path.normpath(d))
        try:
            with open(path) as f:
                rows.append(row_from_summary(label, json.load(f)))
        except (OSError, ValueError) as e:
            rows.append([label] + [None] * (len(COLUMNS) - 1))
            print(f"summary_table: {path}: {e}", file=sys.stderr)
    return rows


def cell(fmt, v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def format_table(rows):
    cells = [[name for name, _ in COLUMNS]]
    cells += [[cell(fmt, v) for (_, fmt), v in zip(COLUMNS, r)] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = []
    for k, c in enumerate(cells):
        first = c[0].ljust(widths[0])
        rest = [c[i].rjust(widths[i]) for i in range(1, len(COLUMNS))]
        lines.append("  ".join([first] + rest))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
