#!/usr/bin/env python3
"""Evaluate one bench/flight_stalls.sh variant directory: DIR/stalls.txt (the injected
stalls), DIR/run (the recorder's run: captures.jsonl, captures/*, thresholds.jsonl,
requests.bin from httpload, meta.json). Prints one block of figures; exit 0."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analyze.explain.decompose import df_decompose  # noqa: E402
from analyze.load.load import load_run  # noqa: E402
from analyze.load.schema import load_schema, read_records  # noqa: E402

CAUSE = {"cpu": "tt-stall", "lock": "orders-ledger"}


def stalls(path: Path, t_after: int) -> list[tuple[int, int]]:
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == "stall" and int(f[1]) >= t_after:
            out.append((int(f[1]), int(f[2])))
    return out


def captures(run: Path) -> list[dict]:
    caps = []
    for line in (run / "captures.jsonl").read_text().splitlines():
        c = json.loads(line)
        if c.get("error"):
            continue
        d = run / c["dir"]
        m = json.loads((d / "meta.json").read_text())["capture"]
        s = json.loads((d / "summary.json").read_text())
        caps.append({"dir": d, "t0": m["t0_ns"], "t1": m["t1_ns"], "span": m["span"],
                     "headline": s.get("headline") or ""})
    return caps


def closure(cap: dict) -> float:
    """The triggering request's parts over its latency (1.0: they add up)."""
    run = load_run(cap["dir"])
    d = df_decompose(run)
    sp = cap["span"]
    row = d[(d["tid"] == sp["tid"]) & (d["t_start_ns"] == sp["t_start_ns"])]
    if row.empty or not bool(row["traced"].iloc[0]):
        return float("nan")
    r = row.iloc[0]
    parts = ["oncpu_ns", "runq_wakeup_ns", "runq_preempt_ns", "lock_wait_ns", "io_wait_ns",
             "sleep_ns", "blocked_ns"]
    return float(sum(r[p] for p in parts if p in r and np.isfinite(r[p])) / r["latency_ns"])


def threshold_errors(run: Path) -> list[float]:
    """Live threshold / true P99.9 of the requests that ended in the minute before each
    sample taken after the first full minute (httpload's own requests.bin)."""
    req = read_records(run / "requests.bin", load_schema(run), "request")
    end = req["t_end_ns"].astype(np.int64)
    lat = (req["t_end_ns"] - req["t_start_ns"]).astype(np.int64)
    order = np.argsort(end)
    end, lat = end[order], lat[order]
    out = []
    first = int(end[0]) if len(end) else 0
    for line in (run / "thresholds.jsonl").read_text().splitlines():
        s = json.loads(line)
        t = int(s["t_ns"])
        if t - first < 60e9 or not s["threshold_ns"]:
            continue
        w = lat[(end > t - 60e9) & (end <= t)]
        if len(w) < 1000:
            continue
        true = float(np.quantile(w, 0.999, method="inverted_cdf"))
        out.append(s["threshold_ns"] / true - 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--variant", choices=sorted(CAUSE), required=True)
    ap.add_argument("--warmup-s", type=float, default=20)
    a = ap.parse_args()
    d = Path(a.dir)
    run = d / "run"
    meta = json.loads((run / "meta.json").read_text())
    st = stalls(d / "stalls.txt", int(meta["mono_start_ns"] + a.warmup_s * 1e9 - 1e9))
    caps = captures(run)
    hit = [[c for c in caps if c["t0"] <= b and c["t1"] >= s] for s, b in st]
    caught = sum(bool(h) for h in hit)
    named = sum(any(CAUSE[a.variant] in c["headline"] for c in h) for h in hit)
    cl = [closure(c) for h in hit for c in h[:1]]
    cl_ok = sum(1 for x in cl if np.isfinite(x) and abs(x - 1) <= 0.01)
    errs = threshold_errors(run)
    fl, cost = meta["flight"], meta.get("cost") or {}
    n = max(len(st), 1)
    print(f"{a.variant}: {len(st)} stalls after the warm-up, {caught} captured "
          f"({100 * caught / n:.1f}%), {named} with the cause named "
          f"({CAUSE[a.variant]}: {100 * named / n:.1f}%); {len(caps)} captures in all")
    print(f"{a.variant}: captured requests whose parts add up to within 1%: {cl_ok} of {len(cl)}")
    if errs:
        print(f"{a.variant}: live threshold vs true P99.9 of the last minute, {len(errs)} samples: "
              f"worst {100 * max(errs, key=abs):+.1f}%, median {100 * float(np.median(errs)):+.1f}%")
    print(f"{a.variant}: recorder: {fl['spans']} spans, {fl['triggers']} triggers, "
          f"{fl['captures']} captures ({fl['coalesced']} coalesced, {fl['skipped_rate']} skipped "
          f"by the budget), {fl['disk_bytes'] / 2**20:.1f} MB on disk, memory peak "
          f"{fl['memory_peak_bytes'] / 2**20:.0f} MB, loader RSS "
          f"{(cost.get('loader_max_rss_kb') or 0) / 1024:.0f} MB, lost {meta['lost_events']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
