"""A WSGI service instrumented with the OpenTelemetry SDK (opentelemetry-instrumentation-wsgi),
for tests/probes/test_otel_sdk.py: each request is a server span of its own, a child of the
caller's (its traceparent header), sent to ENDPOINT over OTLP/HTTP as it ends; the handler
sleeps SLEEP_MS, then answers "ok". Listens on an ephemeral loopback port, printed as
"port N"; HTTP/1.0, a connection a request (wsgiref).

  python3 otel_service.py ENDPOINT SLEEP_MS"""
from __future__ import annotations

import sys
import time
from wsgiref.simple_server import WSGIRequestHandler, make_server

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

SERVICE = "tt-otel-service"


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def main() -> None:
    endpoint, sleep_s = sys.argv[1], int(sys.argv[2]) / 1000
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))

    def app(environ, start_response):
        time.sleep(sleep_s)
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    server = make_server("127.0.0.1", 0, OpenTelemetryMiddleware(app, tracer_provider=provider),
                         handler_class=Quiet)
    print(f"port {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
