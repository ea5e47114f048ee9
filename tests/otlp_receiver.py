"""An OTLP/HTTP receiver for the tests: decodes what tailtrace's OTLP export posts with the
official opentelemetry-proto messages."""
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver:
    """An OTLP/HTTP receiver on a free port: answers each POST with the next status of
    `statuses` (then 200) and keeps the decoded requests."""

    def __init__(self, statuses=()):
        self.statuses, self.got, self.posts = list(statuses), [], 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts += 1
                code = outer.statuses.pop(0) if outer.statuses else 200
                if code == 200:
                    assert self.headers["Content-Type"] == "application/x-protobuf"
                    m = ExportTraceServiceRequest()
                    m.ParseFromString(body)
                    outer.got.append(m)
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"{}" if code == 200 else b"try later")

            def log_message(self, *a):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1/traces"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans(self) -> list:
        return [(rs, sp) for m in self.got for rs in m.resource_spans
                for ss in rs.scope_spans for sp in ss.spans]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()   # the port refuses connections from now on


def attrs(kvs) -> dict:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in kvs}
