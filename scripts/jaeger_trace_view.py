#!/usr/bin/env python3
"""Screenshot of Jaeger's trace view holding a caller's span, the service's own span under it
and tailtrace's breakdown under that (docs/img/jaeger-trace-view.png): the OpenTelemetry SDK
case of tests/probes/test_otel_sdk.py run once, exported to a Jaeger that serves its UI, and
one of its traces opened in headless Chromium.

Jaeger's UI is the separate jaeger-ui project's npm build, which tailtrace does not ship:
build it (git clone https://github.com/jaegertracing/jaeger-ui; git checkout v1.74.0, the last
release whose package takes Debian's Node 20; npm install; cd packages/jaeger-ui; npm run
build) and give its build directory. Jaeger itself: bench/jaeger_roundtrip.sh builds it.

Usage: python3 scripts/jaeger_trace_view.py --ui JAEGER_UI/packages/jaeger-ui/build
       [--out docs/img/jaeger-trace-view.png] [--size 1400x760]
Exit status: 0 with the screenshot written, 1 when a step failed (said in one line).
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
import urllib.request
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TOP), str(TOP / "tests" / "probes"), str(TOP / "bench")]
from analyze.pipeline import export_run  # noqa: E402
import tailtrace_bg  # noqa: E402

JAEGER = Path(os.environ.get("TT_JAEGER_CACHE", "/var/cache/tailtrace/jaeger")) / "jaeger"
TAILTRACE = tailtrace_bg.TAILTRACE
OTLP, QUERY = "http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:16686"


def fail(why: str) -> None:
    sys.exit(f"jaeger_trace_view.py: {why}")


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def start_jaeger(ui: Path, tmp: Path) -> subprocess.Popen:
    """Jaeger with bench/jaeger.yaml's pipeline, its UI from ui."""
    conf = (TOP / "bench" / "jaeger.yaml").read_text().replace(
        "  jaeger_query:\n", f"  jaeger_query:\n    ui:\n      assets_path: {ui}\n", 1)
    (tmp / "jaeger.yaml").write_text(conf)
    p = subprocess.Popen([str(JAEGER), "--config", str(tmp / "jaeger.yaml")],
                         stdout=open(tmp / "jaeger.log", "w"), stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            get(f"{QUERY}/api/services")
            return p
        except OSError:
            if p.poll() is not None:
                fail(f"Jaeger exited: {(tmp / 'jaeger.log').read_text()[-500:]}")
            time.sleep(0.1)
    fail("Jaeger did not answer in 30 s")


def record(tmp: Path) -> str:
    """The SDK service traced by tailtrace, five calls, exported: the last call's trace id."""
    from otel_service import call
    svc = subprocess.Popen([sys.executable, str(TOP / "tests" / "probes" / "otel_service.py"),
                            OTLP, "5"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(svc.stdout.readline().split()[1])
        tt = tailtrace_bg.start(tmp / "run", "--pid", str(svc.pid), "--span", f"tcp:{port}",
                                "--duration", "120")
        sent = call(port, 5, OTLP)
        time.sleep(0.2)
        tt.send_signal(2)
        if tt.wait(timeout=120):
            fail(f"tailtrace failed: {tt.stderr.read()[-500:]}")
    finally:
        svc.kill()
        svc.wait()
    n = export_run(tmp / "run", endpoint=OTLP, service="tailtrace")
    if n["under_service_spans"] != len(sent):
        fail(f"{n['under_service_spans']} of {len(sent)} spans under the service's: {n}")
    return sent[-1][0]


def wait_for_trace(trace_id: str) -> None:
    for _ in range(100):
        data = get(f"{QUERY}/api/traces/{trace_id}").get("data") or []
        names = {p["serviceName"] for d in data for p in d["processes"].values()}
        if {"tt-otel-client", "tt-otel-service", "tailtrace"} <= names:
            return
        time.sleep(0.1)
    fail(f"trace {trace_id} did not reach Jaeger with its three services")


def screenshot(url: str, out: Path, size: str, tmp: Path) -> None:
    chromium = shutil.which("chromium") or fail("chromium missing: bash scripts/install-deps.sh")
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--no-first-run",
                    f"--user-data-dir={tmp / 'chromium'}", "--virtual-time-budget=15000",
                    f"--window-size={size.replace('x', ',')}", f"--screenshot={out.resolve()}",
                    url], capture_output=True, timeout=120)
    if not out.exists() or not out.stat().st_size:
        fail(f"chromium wrote no {out}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ui", type=Path, required=True, help="jaeger-ui's packages/jaeger-ui/build")
    ap.add_argument("--out", type=Path, default=TOP / "docs" / "img" / "jaeger-trace-view.png")
    ap.add_argument("--size", default="1400x760")
    a = ap.parse_args()
    if not (a.ui / "index.html").exists():
        fail(f"{a.ui} holds no index.html: give jaeger-ui's build directory (see --help)")
    if not JAEGER.exists() or not TAILTRACE.exists():
        fail(f"needs {JAEGER} (bench/jaeger_roundtrip.sh builds it) and {TAILTRACE}")
    tmp = Path(tempfile.mkdtemp(prefix="tt-trace-view-"))
    jaeger = start_jaeger(a.ui.resolve(), tmp)
    try:
        trace_id = record(tmp)
        wait_for_trace(trace_id)
        screenshot(f"{QUERY}/trace/{trace_id}", a.out, a.size, tmp)
    finally:
        jaeger.terminate()
        jaeger.wait(timeout=30)
    print(f"jaeger_trace_view.py: wrote {a.out} (trace {trace_id}; run in {tmp / 'run'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
