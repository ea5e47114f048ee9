#!/usr/bin/env python3
"""Summary of an alternating A/B benchmark (bench/overhead.sh's results.jsonl).

Every round runs each mode once, next to a `none` run (the baseline), so a
mode's cost is best read from its per-round ratios rps(mode) / rps(none of
the same round): drift of the shared machine cancels within a round. On
these VMs one run's throughput varies by ~8 % (naive/100), so a single ratio
says little; this prints, per mode:

  median req/s, ratio of medians (the old headline), per-round median,
  geometric mean of the per-round ratios with its 95 % confidence interval
  (Student t on the log ratios), tailtrace's own CPU share (meta.json cost),
  the events it lost, and a verdict against the mode's target:
  met (whole interval >= target), not met (whole interval below) or
  unresolved (the interval straddles the target: more rounds needed).

  bench/ab_stats.py [--baseline MODE] results.jsonl

--baseline MODE reads every ratio against MODE's run of the same round instead of `none`'s
(e.g. --baseline fp: what dwarf costs on top of fp, measured side by side, a tighter
interval than the difference of two ratios to `none`); targets then do not apply.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass

TARGETS = {"flight": 0.93, "default": 0.95, "aggregate": 0.97, "listen": 0.97}
Z975 = 1.959964


def t975(df: int) -> float:
    """Two-sided 95 % Student t quantile: the table up to 4 degrees of
    freedom, then a Cornish-Fisher expansion (within 0.13 % of the table)."""
    if df < 1:
        return math.inf
    if df <= 4:
        return (12.706, 4.303, 3.182, 2.776)[df - 1]
    z = Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


@dataclass
class ModeSummary:
    mode: str
    runs: int
    median_rps: float
    ratio_of_medians: float
    per_round_median: float
    geomean: float
    ci_low: float
    ci_high: float
    cpu_share: float | None
    lost: dict
    target: float | None
    verdict: str
    disk_mb: float | None = None     # median run directory size
    rss_mb: float | None = None      # median loader peak RSS


def geomean_ci(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of positive ratios and its 95 % interval."""
    logs = [math.log(r) for r in ratios]
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(m), 0.0, math.inf
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def verdict(target: float | None, low: float, high: float) -> str:
    if target is None:
        return ""
    if low >= target:
        return "met"
    if high < target:
        return "not met"
    return "unresolved"


def summarize(rows: list[dict], baseline: str = "none") -> list[ModeSummary]:
    """One summary per mode, in first-seen order, each ratio against the baseline mode's
    run of the same round; the baseline must be present."""
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    if baseline not in modes:
        raise ValueError(f"no '{baseline}' runs: every ratio needs the baseline")
    base = {r["round"]: r["rps"] for r in rows if r["mode"] == baseline}
    med_none = statistics.median(base.values())
    out = []
    for m in modes:
        mine = [r for r in rows if r["mode"] == m]
        med = statistics.median(r["rps"] for r in mine)
        ratios = [r["rps"] / base[r["round"]] for r in mine
                  if base.get(r["round"]) and r["rps"] > 0]
        g, lo, hi = geomean_ci(ratios) if ratios else (math.nan, math.nan, math.nan)
        shares = [r["cpu_share"] for r in mine if r.get("cpu_share") is not None]
        disk = [r["disk_bytes"] / 2**20 for r in mine if r.get("disk_bytes")]
        rss = [r["loader_max_rss_kb"] / 1024 for r in mine if r.get("loader_max_rss_kb")]
        lost: dict = {}
        for r in mine:
            for k, v in (r.get("lost") or {}).items():
                lost[k] = lost.get(k, 0) + v
        target = TARGETS.get(m) if baseline == "none" else None
        out.append(ModeSummary(
            mode=m, runs=len(mine), median_rps=med,
            ratio_of_medians=med / med_none if med_none else math.nan,
            per_round_median=statistics.median(ratios) if ratios else math.nan,
            geomean=g, ci_low=lo, ci_high=hi,
            cpu_share=statistics.median(shares) if shares else None,
            lost=lost, target=target,
            verdict="" if m == baseline else verdict(target, lo, hi),
            disk_mb=statistics.median(disk) if disk else None,
            rss_mb=statistics.median(rss) if rss else None))
    return out


def format_table(summaries: list[ModeSummary], baseline: str = "none") -> str:
    lines = [f"{'mode':24} {'runs':>4} {'median req/s':>12} {'ratio':>6} {'per-round':>9} "
             f"{'geomean [95% CI]':>22} {'cpu':>6} {'disk MB':>8} {'RSS MB':>7} {'target':>7} "
             "verdict  lost events"]
    for s in summaries:
        ci = "" if s.mode == baseline else f"{s.geomean:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"
        cpu = "" if s.cpu_share is None else f"{100 * s.cpu_share:.1f}%"
        tgt = f">= {s.target:.2f}" if s.target else ""
        lost = json.dumps(s.lost) if s.lost else "-"
        disk = "" if s.disk_mb is None else f"{s.disk_mb:.1f}"
        rss = "" if s.rss_mb is None else f"{s.rss_mb:.0f}"
        lines.append(f"{s.mode:24} {s.runs:>4} {s.median_rps:>12.1f} {s.ratio_of_medians:>6.3f} "
                     f"{s.per_round_median:>9.3f} {ci:>22} {cpu:>6} {disk:>8} {rss:>7} {tgt:>7} "
                     f"{s.verdict or '-':7}  {lost}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    baseline, args = "none", argv[1:]
    if len(args) == 3 and args[0] == "--baseline":
        baseline, args = args[1], args[2:]
    if len(args) != 1:
        print("usage: bench/ab_stats.py [--baseline MODE] results.jsonl", file=sys.stderr)
        return 2
    try:
        with open(args[0]) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        summaries = summarize(rows, baseline)
    except (OSError, ValueError, KeyError) as e:
        print(f"ab_stats: {args[0]}: {e}", file=sys.stderr)
        return 1
    if baseline != "none":
        print(f"ratios against {baseline}, round by round")
    print(format_table(summaries, baseline))
    errors = sum(r.get("errors", 0) for r in rows)
    if errors:
        print(f"warning: {errors} request errors in total (see {args[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
