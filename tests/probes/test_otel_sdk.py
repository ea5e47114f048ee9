"""A service instrumented with the OpenTelemetry SDK, tailtrace attached by its pid: one trace
in a real Jaeger holds the caller's span, the service's own server span under it and
tailtrace's breakdown of the same request under the service's span.

Oracle by construction: the test is the caller. Each of its 20 requests is a client span of
its own (the SDK, service tt-otel-client) whose context goes in the request's traceparent
header; the service (otel_service.py, opentelemetry-instrumentation-wsgi) sends its server
span, a child of that client span, and names it in its answer's traceresponse header (the
SDK's response propagator); tailtrace (--span tcp) reads the traceparent from the bytes the
service read, the traceresponse from the bytes it sent, and exports its span of the request
under the service's span. So every trace holds the three, tailtrace's parts adding up to its
duration, its first byte in before the service's span and its last byte out after the
handler's sleep, before the span ends.

Needs Jaeger built (bench/jaeger_roundtrip.sh builds it once from the Go module proxy into
$TT_JAEGER_CACHE, default /var/cache/tailtrace/jaeger) and its ports 4318 and 16686 free."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_spans import tailtrace_bg
from tt_run import ROOT, needs_root

JAEGER = Path(os.environ.get("TT_JAEGER_CACHE", "/var/cache/tailtrace/jaeger")) / "jaeger"
SERVICE = Path(__file__).with_name("otel_service.py")
OTLP, QUERY = "http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:16686"
N, SLEEP_MS = 20, 5


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _sdk() -> bool:
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
        import opentelemetry.instrumentation.wsgi  # noqa: F401
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = [
    needs_root,
    pytest.mark.skipif(not JAEGER.exists(), reason=f"Jaeger not built at {JAEGER}: "
                       "bench/jaeger_roundtrip.sh builds it once (needs Go)"),
    pytest.mark.skipif(not _sdk(), reason="the OpenTelemetry SDK is not installed "
                       "(scripts/install-deps.sh installs it)"),
    pytest.mark.skipif(not (_port_free(4318) and _port_free(16686)),
                       reason="ports 4318 or 16686 taken: Jaeger cannot start"),
    pytest.mark.serial,  # Jaeger's ports are the machine's
]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def _start_jaeger(log: Path) -> subprocess.Popen:
    p = subprocess.Popen([str(JAEGER), "--config", str(ROOT / "bench" / "jaeger.yaml")],
                         stdout=open(log, "w"), stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            _get(f"{QUERY}/api/services")
            return p
        except OSError:
            assert p.poll() is None, log.read_text()[-2000:]
            time.sleep(0.1)
    raise AssertionError(f"Jaeger did not answer in 30 s: {log.read_text()[-2000:]}")


def _trace(trace_id: str) -> dict:
    """{service name: [spans]} of a trace in Jaeger, once it holds the three services'."""
    for _ in range(100):
        data = _get(f"{QUERY}/api/traces/{trace_id}").get("data") or []
        if data:
            tr = data[0]
            by = {}
            for sp in tr["spans"]:
                by.setdefault(tr["processes"][sp["processID"]]["serviceName"], []).append(sp)
            if len(by) >= 3:
                return by
        time.sleep(0.1)
    return by if data else {}


def _parent(sp: dict) -> str:
    return next((r["spanID"] for r in sp.get("references") or [] if r["refType"] == "CHILD_OF"),
                "")


def test_one_trace_holds_the_callers_span_the_services_and_tailtraces_under_it(tmp_path):
    from analyze.explain.decompose import PARTS
    from analyze.pipeline import export_run
    from otel_service import call  # the SDK: after the skips

    jaeger = _start_jaeger(tmp_path / "jaeger.log")
    svc = subprocess.Popen([sys.executable, str(SERVICE), OTLP, str(SLEEP_MS)],
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(svc.stdout.readline().split()[1])
        run = tmp_path / "run"
        tt, head = tailtrace_bg(run, "--pid", str(svc.pid), "--span", f"tcp:{port}",
                                "--duration", "120")
        sent = call(port, N, OTLP)
        time.sleep(0.2)
        tt.send_signal(2)
        _, err = tt.communicate(timeout=120)
        assert tt.returncode == 0, head + err
        counts = export_run(run, endpoint=OTLP, service="tailtrace")
        assert counts["in_callers_traces"] == counts["under_service_spans"] == N, counts
        for trace_id, client_span in sent:
            by = _trace(trace_id)
            assert set(by) >= {"tt-otel-client", "tt-otel-service", "tailtrace"}, (trace_id, by)
            (server,) = by["tt-otel-service"]
            assert _parent(server) == client_span, server
            # tailtrace's request span under the service's, its waits under it
            (ours,) = [sp for sp in by["tailtrace"] if _parent(sp) == server["spanID"]]
            assert ours["operationName"] == f"tcp:{port}", ours["operationName"]
            assert all(_parent(sp) not in (client_span, server["spanID"])
                       for sp in by["tailtrace"] if sp is not ours)
            tags = {t["key"]: t["value"] for t in ours["tags"]}
            parts = sum(int(tags[f"tailtrace.{p}_ns"]) for p in PARTS
                        if f"tailtrace.{p}_ns" in tags)
            assert abs(parts / 1000 - ours["duration"]) <= 1, (tags, ours["duration"])
            # the kernel's first byte in comes before the handler's span, the last byte out
            # after its sleep and before the span ends (the SDK ends it once the answer is
            # sent and the response closed): within 1 ms, the clocks' two conversions
            ours_end, server_end = (sp["startTime"] + sp["duration"] for sp in (ours, server))
            assert ours["startTime"] <= server["startTime"] + 1000
            assert server["startTime"] + SLEEP_MS * 1000 - 1000 <= ours_end <= server_end + 1000
    finally:
        svc.kill()
        svc.wait()
        jaeger.terminate()
        jaeger.wait(timeout=30)
