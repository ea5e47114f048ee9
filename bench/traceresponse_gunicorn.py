#!/usr/bin/env python3
"""tcp spans under the service's own span, on servers we did not write: gunicorn's pre-fork
sync workers serving Flask with OpenTelemetry's Flask instrumentation, its answers carrying a
traceresponse (bench/third_party/flask_orders.py), traced by the gunicorn master's pid with
--span tcp:PORT. Clients here send each request with a traceparent of its own and keep the
traceresponse it answered with: the oracle. The run's OTLP export (to a file) must hold, for
each request, a tailtrace span in that trace whose parent is the server's span the answer
named, its tailtrace.*_ns parts adding up to its duration. Prints the counts and the share.

gunicorn and the instrumentation are not in install-deps.sh; a virtualenv holds them:
  python3 -m venv /tmp/vflask && /tmp/vflask/bin/pip install gunicorn flask \\
      opentelemetry-sdk opentelemetry-instrumentation-flask
Usage: python3 bench/traceresponse_gunicorn.py [--gunicorn /tmp/vflask/bin/gunicorn]
       [--workers 3] [--requests 2000] [--clients 8] [--min-share 0.95]
Exit status: 0 when the share found is at least --min-share, 1 not, 2 a tool is missing.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOP))
from analyze.explain.decompose import PARTS  # noqa: E402
from analyze.load.trace_context import parse_traceparent  # noqa: E402
from analyze.pipeline import export_run  # noqa: E402
import tailtrace_bg  # noqa: E402

TAILTRACE = tailtrace_bg.TAILTRACE
PORT = 18531


def call(n: int, out: list) -> None:
    """n requests, a connection each (gunicorn's sync workers close it): (trace id, the
    caller's span id, the server's span id from the traceresponse) of each into out."""
    for _ in range(n):
        trace, caller = f"{random.getrandbits(128):032x}", f"{random.getrandbits(64):016x}"
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        c.request("GET", f"/order/{random.randrange(10_000)}",
                  headers={"traceparent": f"00-{trace}-{caller}-01"})
        r = c.getresponse()
        r.read()
        got = parse_traceparent(r.getheader("traceresponse") or "")
        c.close()
        out.append((trace, caller, got[1] if got and got[0] == trace else ""))


def exported(path: Path) -> dict[str, list[dict]]:
    """The OTLP/JSON file's request spans (those with tailtrace.*_ns parts) by trace id."""
    by: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    by.setdefault(sp["traceId"], []).append(sp)
    return by


def explained(sp: dict) -> bool:
    attrs = {a["key"]: a["value"] for a in sp.get("attributes", [])}
    parts = sum(int(attrs[f"tailtrace.{p}_ns"]["intValue"]) for p in PARTS
                if f"tailtrace.{p}_ns" in attrs)
    dur = int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])
    return parts > 0 and abs(parts - dur) <= 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gunicorn", default=shutil.which("gunicorn") or "/tmp/vflask/bin/gunicorn")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--min-share", type=float, default=0.95)
    a = ap.parse_args()
    if not Path(a.gunicorn).exists() or not TAILTRACE.exists():
        print(f"traceresponse_gunicorn.py: needs {a.gunicorn} (see --help) and {TAILTRACE}",
              file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="tt-gunicorn-"))
    g = subprocess.Popen([a.gunicorn, "-w", str(a.workers), "-b", f"127.0.0.1:{PORT}",
                          "--chdir", str(TOP / "bench" / "third_party"), "flask_orders:app"],
                         stderr=open(tmp / "gunicorn.log", "w"))
    try:
        for _ in range(100):
            try:
                call(1, [])
                break
            except OSError:
                time.sleep(0.1)
        tt = tailtrace_bg.start(tmp / "run", "--pid", str(g.pid), "--span", f"tcp:{PORT}",
                                "--duration", "600")
        sent: list = []
        threads = [threading.Thread(target=call, args=(a.requests // a.clients, sent))
                   for _ in range(a.clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        secs = time.monotonic() - t0
        time.sleep(0.3)
        tt.send_signal(2)
        err = tt.communicate(timeout=600)[1]
        if tt.returncode:
            print(err, file=sys.stderr)
            return 1
    finally:
        g.terminate()
        g.wait()
    counts = export_run(tmp / "run", file=tmp / "otlp.json")
    by = exported(tmp / "otlp.json")
    named = [s for s in sent if s[2]]
    under = sum(any(sp.get("parentSpanId") == server and explained(sp)
                    for sp in by.get(trace, [])) for trace, _, server in named)
    meta = json.loads((tmp / "run" / "meta.json").read_text())["trace_contexts"]
    share = under / len(sent) if sent else 0.0
    print(f"traceresponse_gunicorn: {len(sent):,} requests in {secs:.1f} s to {a.workers} "
          f"workers, {len(named):,} answered with a traceresponse; tailtrace saw "
          f"{meta['requests']:,} requests, {meta['traceparent']:,} traceparents, "
          f"{meta['traceresponse']:,} traceresponses ({meta['answers_unread']:,} answers "
          f"unread); exported {counts['requests']:,} requests, {counts['under_service_spans']:,}"
          f" under the services' spans; under the server's span, explained: {under:,} of "
          f"{len(sent):,} ({share:.1%}); run in {tmp}")
    return 0 if share >= a.min_share else 1


if __name__ == "__main__":
    sys.exit(main())
