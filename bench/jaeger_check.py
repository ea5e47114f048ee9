#!/usr/bin/env python3
"""Compare the request spans a Jaeger holds with the run's own decomposition (called by
bench/jaeger_roundtrip.sh after the export).

For every request the export sent (analyze/render/otlp.py df_request_spans: the decomposed
requests, or with --captures each capture's triggering ones): its trace is in Jaeger, the
root span's duration equals the request's enqueue-to-end time to the microsecond, and each
tailtrace.<part>_ns tag equals the request's part and they add up to the duration.
Prints one line of counts; exit 1 when anything is missing or differs.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from analyze.explain.decompose import PARTS  # noqa: E402
from analyze.load.load import load_run  # noqa: E402
from analyze.pipeline import analyse  # noqa: E402
from analyze.render import otlp  # noqa: E402

CHUNK = 5000


def expected(run_dir: Path, threshold_ns=None) -> tuple[dict, str]:
    """({trace id hex: (start Unix µs, e2e ns, {part: ns})}, the service name)."""
    run = load_run(run_dir)
    a = analyse(run)
    spans = otlp.df_request_spans(run, a["decomp"], a["segments"])
    if threshold_ns is not None:
        spans = spans[spans["latency_ns"] >= threshold_ns]
    off = otlp.wall_offset_ns(run.meta)
    want = {}
    for r in spans.itertuples():
        parts = {p: int(getattr(r, f"{p}_ns")) for p in PARTS
                 if getattr(r, f"{p}_ns") == getattr(r, f"{p}_ns")}
        want[r.trace_id.hex()] = ((int(r.t_enqueue_ns) + off) // 1000,
                                  int(r.t_end_ns - r.t_enqueue_ns), parts)
    pid = int(spans["pid"].iloc[0]) if len(spans) else 0
    return want, otlp.service_name(run, pid)


def jaeger_traces(query: str, service: str, want: dict, chunk: int = CHUNK) -> dict:
    """{trace id hex: root span} of the service's traces, asked for in windows of `chunk`
    requests by start time (one search of 200k traces is too big an answer)."""
    starts = sorted(v[0] for v in want.values())
    roots = {}
    for i in range(0, len(starts), chunk):
        t0, t1 = starts[i], starts[min(i + chunk, len(starts)) - 1]
        q = urllib.parse.urlencode({"service": service, "start": t0, "end": t1 + 1,
                                    "limit": 3 * chunk})
        with urllib.request.urlopen(f"{query}/api/traces?{q}", timeout=600) as r:
            data = json.load(r)["data"]
        for tr in data:
            for sp in tr["spans"]:   # the request: no parent (a link is a FOLLOWS_FROM)
                if not any(r["refType"] == "CHILD_OF" for r in sp.get("references") or []):
                    roots[tr["traceID"].rjust(32, "0")] = sp
    return roots


def compare(want: dict, got: dict) -> dict:
    n = {"requests": len(want), "found": 0, "duration_equal": 0, "parts_equal": 0,
         "parts_add_up": 0}
    for tid, (_, e2e_ns, parts) in want.items():
        sp = got.get(tid)
        if sp is None:
            continue
        n["found"] += 1
        tags = {t["key"]: t["value"] for t in sp["tags"]}
        n["duration_equal"] += abs(sp["duration"] - e2e_ns / 1000) < 1
        seen = {p: int(tags.get(f"tailtrace.{p}_ns", -1)) for p in parts}
        n["parts_equal"] += seen == parts
        n["parts_add_up"] += sum(seen.values()) == e2e_ns
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--query", default="http://127.0.0.1:16686")
    ap.add_argument("--service", help="the --service the export used")
    ap.add_argument("--captures", action="store_true",
                    help="RUN_DIR is a flight-recorder run exported with captures --otlp")
    a = ap.parse_args()
    d = Path(a.run_dir)
    dirs = sorted((d / "captures").iterdir()) if a.captures else [d]
    total = {}
    for cdir in dirs:
        if not (cdir / "meta.json").exists():
            continue
        thr = None
        if a.captures:
            thr = json.loads((cdir / "meta.json").read_text())["capture"]["threshold_ns"]
        want, service = expected(cdir, thr)
        if not want:
            continue
        got = jaeger_traces(a.query, a.service or service, want)
        for k, v in compare(want, got).items():
            total[k] = total.get(k, 0) + v
    print("jaeger: " + ", ".join(f"{k} {v:,}" for k, v in total.items()))
    ok = total and len(set(total.values())) == 1 and total["requests"] > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
