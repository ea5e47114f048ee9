"""What a sweep (`./run.sh --sweep`) adds to compare: the seed's table and the pool's knee.

df_seed_table(df) -> one row per run of df_compare with its model, connections and workers:
  model, conns, workers, throughput_rps, avg_ms, p99_ms, max_ms (end to end, what a client
  saw); sorted naive, pool, async, then by connections and workers.
seed_table_markdown(df) -> that table as markdown (the seed's comparison: throughput, avg,
  P99, max per model and connection count).
df_knee(df) -> for each connection count with pool runs at >= 3 worker counts: workers,
  throughput_rps, p99_ms, sorted by workers (an empty frame otherwise).
knee_sentences(knee) -> per connection count, the worker count with the lowest P99 and what
  happens past it, e.g. "pool at 100 connections: P99 is lowest with 8 workers (0.90 ms,
  61,000 req/s); past it P99 rises to 3.1 ms at 50 workers".
"""
from __future__ import annotations

import pandas as pd

from .fmt import fmt_fixed, fmt_int

MODELS = ["naive", "pool", "async"]
SEED_COLUMNS = ["model", "conns", "workers", "throughput_rps", "avg_ms", "p99_ms", "max_ms"]
KNEE_MIN_COUNTS = 3


def df_seed_table(df: pd.DataFrame) -> pd.DataFrame:
    """df_compare's rows that know their model, in the seed's order (see module doc)."""
    t = df[df["workload"].isin(MODELS)].rename(columns={"workload": "model"})
    if t.empty:
        return pd.DataFrame(columns=SEED_COLUMNS)
    t = t.assign(_m=t["model"].map(MODELS.index))
    return t.sort_values(["_m", "conns", "workers"], kind="stable")[SEED_COLUMNS] \
        .reset_index(drop=True)


def seed_table_markdown(table: pd.DataFrame) -> str:
    """The seed's comparison as a markdown table (empty string without rows)."""
    if table.empty:
        return ""
    lines = ["| model | connections | workers | throughput (req/s) | avg ms | P99 ms | max ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in table.itertuples():
        lines.append(f"| {r.model} | {fmt_fixed(r.conns, '.0f')} | {fmt_fixed(r.workers, '.0f')} | "
                     f"{fmt_int(r.throughput_rps)} | {fmt_fixed(r.avg_ms, '.2f')} | "
                     f"{fmt_fixed(r.p99_ms, '.2f')} | {fmt_fixed(r.max_ms, '.2f')} |")
    return "\n".join(lines) + "\n"


def df_knee(df: pd.DataFrame) -> pd.DataFrame:
    """Pool runs by worker count, per connection count with >= KNEE_MIN_COUNTS counts."""
    pool = df[(df["workload"] == "pool") & df["workers"].notna()]
    keep = [c for c, g in pool.groupby("conns") if g["workers"].nunique() >= KNEE_MIN_COUNTS]
    out = pool[pool["conns"].isin(keep)][["conns", "workers", "throughput_rps", "p99_ms"]]
    return out.sort_values(["conns", "workers"], kind="stable").reset_index(drop=True)


def knee_sentences(knee: pd.DataFrame) -> list[str]:
    """One sentence per connection count (module doc); [] without a knee table."""
    out = []
    for conns, g in knee.groupby("conns"):
        g = g.dropna(subset=["p99_ms"]).sort_values("workers")
        if g.empty:
            continue
        best = g.loc[g["p99_ms"].idxmin()]
        head = (f"pool at {int(conns)} connections: P99 is lowest with {int(best.workers)} "
                f"workers ({best.p99_ms:.2f} ms, {best.throughput_rps:,.0f} req/s)")
        past = g[g["workers"] > best.workers]
        if past.empty:
            out.append(head + f"; it still falls at {int(best.workers)}, the most tried: "
                       "no knee in this range")
        else:
            last = past.iloc[-1]
            out.append(head + f"; past it P99 rises to {last.p99_ms:.2f} ms at "
                       f"{int(last.workers)} workers (throughput {last.throughput_rps:,.0f})")
    return out
