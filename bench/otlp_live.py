#!/usr/bin/env python3
"""The flight recorder's live OTLP export (tailtrace --otlp URL), checked in a real Jaeger.

Watches a recorder's captures.jsonl while the recorder runs. For each capture it lists, the
trace ids of its triggering requests (latency at or above its threshold: what the follower
sends) are looked up in Jaeger's query API until each is found, explained (its tailtrace.*_ns
parts adding up to its duration), or --timeout passes. Prints one line a capture: its
requests, how many Jaeger holds, and the delay from the capture's line in captures.jsonl to
the last of them found; then the largest delay. Ends when the recorder's meta.json is marked
finished and every capture has been looked up.

Usage: python3 bench/otlp_live.py RECORDER_DIR [--query http://127.0.0.1:16686] [--timeout 60]
Exit status: 0 every request found within the timeout, 1 not, 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyze.explain.decompose import PARTS  # noqa: E402
from analyze.load.captures import new_captures  # noqa: E402
from analyze.pipeline import analyse, load_run  # noqa: E402
from analyze.render import otlp  # noqa: E402

POLL_S = 0.2


def trace_ids(cap: Path, threshold_ns: int) -> list[str]:
    """The hex trace ids of a capture's requests at or above its threshold."""
    run = load_run(cap)
    a = analyse(run)
    spans = otlp.df_request_spans(run, a["decomp"], a["segments"])
    slow = spans[spans["latency_ns"].astype("float64") >= threshold_ns]
    return [t.hex() for t in slow["trace_id"]]


def explained(query: str, trace_id: str) -> str:
    """Does Jaeger hold the trace, its request span's parts adding up to its duration? "" no;
    "root": its request span starts the trace; "child": it sits under another span (the
    caller's, from the request's traceparent; or the service's own)."""
    try:
        with urllib.request.urlopen(f"{query}/api/traces/{trace_id}", timeout=5) as r:
            data = json.load(r).get("data") or []
    except (urllib.error.URLError, OSError, ValueError):
        return ""
    for tr in data:
        for sp in tr.get("spans", []):
            tags = {t["key"]: t["value"] for t in sp.get("tags", [])}
            if "tailtrace.latency_ns" not in tags:
                continue   # a wait's span, or the application's own
            parts = sum(int(tags[f"tailtrace.{p}_ns"]) for p in PARTS
                        if f"tailtrace.{p}_ns" in tags)
            if abs(parts / 1000 - sp["duration"]) > 1 or not tags.get("tailtrace.cause"):
                return ""
            return "child" if sp.get("references") else "root"
    return ""


def finished(d: Path) -> bool:
    try:
        return bool(json.loads((d / "meta.json").read_text()).get("finished"))
    except (OSError, ValueError):
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--query", default="http://127.0.0.1:16686")
    ap.add_argument("--timeout", type=float, default=60.0)
    a = ap.parse_args()
    if not a.run_dir.is_dir():
        print(f"otlp_live: {a.run_dir}: no such directory (give the recorder's --out)",
              file=sys.stderr)
        return 2
    offset, pending, worst, missing = 0, [], 0.0, 0
    while True:
        done = finished(a.run_dir)
        rows, offset = new_captures(a.run_dir / "captures.jsonl", offset)
        for r in rows:
            if r.get("error") is None:
                ids = trace_ids(a.run_dir / r["dir"], r.get("threshold_ns") or 0)
                pending.append((r["dir"], time.monotonic(), set(ids), len(ids), [0]))
        for item in list(pending):
            cap, t_seen, ids, n, under = item
            found = {t: explained(a.query, t) for t in ids}
            ids -= {t for t, how in found.items() if how}
            under[0] += sum(how == "child" for how in found.values())
            late = time.monotonic() - t_seen
            if not ids or late > a.timeout:
                pending.remove(item)
                worst = max(worst, late)
                missing += len(ids)
                print(f"{cap}: {n} requests, {n - len(ids)} in Jaeger, explained "
                      f"({under[0]} under a caller's span), {late:.1f} s after its line in "
                      "captures.jsonl", flush=True)
        if done and not rows and not pending:
            break
        time.sleep(POLL_S)
    print(f"largest delay {worst:.1f} s; {missing} requests not found in {a.timeout:g} s")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
