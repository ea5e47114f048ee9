"""A WSGI service instrumented with the OpenTelemetry SDK (opentelemetry-instrumentation-wsgi),
for tests/probes/test_otel_sdk.py: each request is a server span of its own, a child of the
caller's (its traceparent header), sent to ENDPOINT over OTLP/HTTP as it ends; the handler
sleeps SLEEP_MS, then answers "ok", with the server span's own context in a traceresponse
header (W3C Trace Context Level 2) by the SDK's response propagator, as the Flask, Django,
Falcon, Tornado and ASGI instrumentations send it once set_global_response_propagator is
called. Listens on an ephemeral loopback port, printed as
"port N"; HTTP/1.0, a connection a request (wsgiref). call() is its caller.

  python3 otel_service.py ENDPOINT SLEEP_MS"""
from __future__ import annotations

import sys
import time
from wsgiref.simple_server import WSGIRequestHandler, make_server

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.propagators import (FuncSetter, TraceResponsePropagator,
                                                       get_global_response_propagator,
                                                       set_global_response_propagator)
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

SERVICE = "tt-otel-service"


def call(port: int, n: int, endpoint: str) -> list[tuple[str, str]]:
    """The caller: n requests to the service, each in a client span of its own (the SDK,
    service tt-otel-client, sent to endpoint) whose context goes in its traceparent header:
    (trace id, client span id) of each."""
    import http.client

    from opentelemetry.propagate import inject

    provider = TracerProvider(resource=Resource.create({"service.name": "tt-otel-client"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("tailtrace-test")
    sent = []
    for i in range(n):
        with tracer.start_as_current_span(f"GET /{i}") as sp:
            headers = {}
            inject(headers)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", f"/{i}", headers=headers)
            assert c.getresponse().read() == b"ok"
            c.close()
            ctx = sp.get_span_context()
            sent.append((f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"))
    provider.shutdown()
    return sent


class Quiet(WSGIRequestHandler):
    """No log lines; the answer in one send, as gunicorn, uvicorn, Node and Go send theirs
    (wsgiref's unbuffered writer sends the status line, each header and the body apart, and
    tailtrace reads an answer's headers from its first send)."""
    wbufsize = -1

    def log_message(self, *args):
        pass


def main() -> None:
    endpoint, sleep_s = sys.argv[1], int(sys.argv[2]) / 1000
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    set_global_response_propagator(TraceResponsePropagator())
    append = FuncSetter(lambda headers, name, value: headers.append((name, value)))

    def app(environ, start_response):
        time.sleep(sleep_s)
        headers = [("Content-Type", "text/plain"), ("Content-Length", "2")]
        get_global_response_propagator().inject(headers, setter=append)  # the server span's
        start_response("200 OK", headers)
        return [b"ok"]

    server = make_server("127.0.0.1", 0, OpenTelemetryMiddleware(app, tracer_provider=provider),
                         handler_class=Quiet)
    print(f"port {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
