#!/usr/bin/env python3
"""tcp spans in the callers' traces, on a server we did not write: Node's http module
(bench/third_party/node_server.js) under wrk, each request with a traceparent of its own
(bench/traceparent.lua writes what it sent), traced with --span tcp:PORT, exported to a real
Jaeger (bench/jaeger_roundtrip.sh builds it). For every request wrk sent, Jaeger is asked for
its trace: found when it holds a tailtrace span that is a child of the request's parent span,
its tailtrace.*_ns parts adding up to its duration. Prints the counts and the share found.

Usage: python3 bench/traceparent_node.py [--seconds 5] [--conns 20] [--min-share 0.95]
Exit status: 0 when the share found is at least --min-share, 1 not, 2 a tool is missing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOP))
from analyze.explain.decompose import PARTS  # noqa: E402
from analyze.pipeline import export_run  # noqa: E402
import tailtrace_bg  # noqa: E402

JAEGER = Path(os.environ.get("TT_JAEGER_CACHE", "/var/cache/tailtrace/jaeger")) / "jaeger"
TAILTRACE = tailtrace_bg.TAILTRACE
OTLP, QUERY, PORT = "http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:16686", 18530


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def wait_for(what: str, ok, timeout_s: float = 30):
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"traceparent_node.py: {what} did not come up in {timeout_s:.0f} s")


def found(trace: str, parent: str) -> bool:
    """Does Jaeger hold the trace with a tailtrace span under parent, explained?"""
    try:
        data = get(f"{QUERY}/api/traces/{trace}").get("data") or []
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return False
        raise
    for tr in data:
        for sp in tr["spans"]:
            if tr["processes"][sp["processID"]]["serviceName"] != "tailtrace":
                continue
            if not any(r["refType"] == "CHILD_OF" and r["spanID"] == parent
                       for r in sp.get("references") or []):
                continue
            tags = {t["key"]: t["value"] for t in sp["tags"]}
            parts = sum(int(tags[f"tailtrace.{p}_ns"]) for p in PARTS
                        if f"tailtrace.{p}_ns" in tags)
            return abs(parts / 1000 - sp["duration"]) <= 1
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=20)
    ap.add_argument("--min-share", type=float, default=0.95)
    a = ap.parse_args()
    for tool, path in (("node", shutil.which("node")), ("wrk", shutil.which("wrk")),
                       ("Jaeger", JAEGER if JAEGER.exists() else None),
                       ("tailtrace", TAILTRACE if TAILTRACE.exists() else None)):
        if not path:
            print(f"traceparent_node.py: {tool} missing (scripts/install-deps.sh; Jaeger: "
                  "bench/jaeger_roundtrip.sh builds it)", file=sys.stderr)
            return 2
    tmp = Path(tempfile.mkdtemp(prefix="tt-traceparent-"))
    procs = []
    try:
        procs.append(subprocess.Popen([str(JAEGER), "--config", str(TOP / "bench/jaeger.yaml")],
                                      stdout=open(tmp / "jaeger.log", "w"),
                                      stderr=subprocess.STDOUT))
        wait_for("Jaeger", lambda: get(f"{QUERY}/api/services") is not None)
        node = subprocess.Popen(["node", str(TOP / "bench/third_party/node_server.js"),
                                 str(PORT), str(tmp / "audit.log")], stdout=subprocess.PIPE,
                                text=True)
        procs.append(node)
        node.stdout.readline()
        run = tmp / "run"
        tt = tailtrace_bg.start(run, "--pid", str(node.pid), "--span", f"tcp:{PORT}",
                                "--duration", str(a.seconds + 30))
        env = dict(os.environ, TT_TRACEPARENT_LOG=str(tmp / "sent"))
        subprocess.run(["wrk", "-t2", f"-c{a.conns}", f"-d{a.seconds}s", "-s",
                        str(TOP / "bench/traceparent.lua"), f"http://127.0.0.1:{PORT}/"],
                       env=env, check=True, capture_output=True)
        time.sleep(0.5)
        tt.send_signal(2)
        tt.communicate(timeout=120)
        t0 = time.monotonic()
        counts = export_run(run, endpoint=OTLP, service="tailtrace")
        export_s = time.monotonic() - t0
        sent = [line.split() for f in sorted(tmp.glob("sent.*"))
                for line in f.read_text().splitlines()]
        # wrk writes a request it never sent at the end (its connections closed first):
        # the requests sent are the ones the server answered, which the run counts
        summary = json.loads((run / "meta.json").read_text()).get("trace_contexts", {})
        hit = sum(found(t, p) for t, p in sent)
        share = hit / len(sent) if sent else 0.0
        print(f"traceparent_node: wrk wrote {len(sent):,} requests; tailtrace saw "
              f"{summary.get('requests', 0):,} requests, {summary.get('traceparent', 0):,} "
              f"with a traceparent ({summary.get('unread', 0):,} unread); exported "
              f"{counts['requests']:,} spans, {counts['in_callers_traces']:,} in their callers' "
              f"traces, in {export_s:.1f} s; Jaeger holds {hit:,} of the {len(sent):,} under "
              f"their callers' spans, explained: {share:.1%}")
        return 0 if share >= a.min_share else 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
