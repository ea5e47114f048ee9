"""Hostile clients for orders-server, run as a separate process by
test_hostile_clients.py: its CPU use and GIL stay out of the measuring
client's latencies, and the sockets it holds are inherited by no one.
The tables of hostile inputs and the replies they must get live here too,
and the test module uses them for its one-connection checks.

    python3 hostile_client.py --port P --mode churn|malformed|oversized|pipeline|mixed
                              [--hold N] [--rate R] [--count N] [--seconds S]

1. Opens N connections and holds them, sending nothing; prints one line
   "held N closed_by_server M" (M: reset or closed by the server within
   0.1 s, e.g. over --max-conns).
2. Then one hostile connection after another, R per second, paced (R = 0:
   as fast as it can), until SIGTERM, --count connections, or S seconds (a
   hard deadline):
     churn      connect and go at once, cycling through three ways: close
                (FIN), send a whole request and close without reading the
                reply, reset (SO_LINGER 0)
     malformed  one MALFORMED input; the reply must have its status, say
                "Connection: close", and be followed by the server's close
     oversized  one OVERSIZED input, checked the same way
     pipeline   PIPELINE_N requests in one send; every reply, in order
     mixed      malformed, oversized, pipeline in turn
3. Resets the held connections and prints one JSON line: held, conns, ok, errors
   (socket errors: refused, reset, timed out), unexpected (up to 5
   descriptions of wrong replies), seconds (from the first hostile
   connection to the stop).
Every socket has a timeout; every loop is bounded by the deadline.
"""
import argparse
import json
import select
import signal
import socket
import struct
import sys
import time

IO_TIMEOUT_S = 5
MAX_BODY_BYTES = 65536  # orders-server's default --max-body-bytes
MAX_HEAD_BYTES = 8192   # HTTP_MAX_HEAD_BYTES


def request(method, path, body=b"", headers=None, version="HTTP/1.1"):
    hdrs = {"Host": "t"}
    if body or method == "POST":
        hdrs["Content-Length"] = str(len(body))
    hdrs.update(headers or {})
    head = f"{method} {path} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    return head.encode() + b"\r\n" + body


ORDER = b'{"item":"widget","qty":1}'

# (name, bytes sent, status the server must answer, then close)
MALFORMED = [
    ("garbage", bytes(range(256)) * 4, 400),
    ("tls_client_hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\xaa" * 64, 400),
    ("no_version", b"GET /health\r\n\r\n", 400),
    ("bad_method_char", b"GE(T /health HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("double_space", b"GET  /health HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("lowercase_version", b"GET /health http/1.1\r\nHost: t\r\n\r\n", 400),
    ("relative_target", b"GET health HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("http2_version", b"GET /health HTTP/2.0\r\nHost: t\r\n\r\n", 505),
    ("http2_preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    ("lf_only", b"GET /health HTTP/1.1\nHost: t\n\n", 400),
    ("lf_only_headers", b"GET /health HTTP/1.1\r\nHost: t\n\n", 400),
    ("bare_cr", b"GET /health HTTP/1.1\rHost: t\r\n\r\n", 400),
    ("nul_in_target", b"GET /hea\x00lth HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("nul_in_header_value", b"GET /health HTTP/1.1\r\nHost: t\r\nX: a\x00b\r\n\r\n", 400),
    ("nul_in_header_name", b"GET /health HTTP/1.1\r\nHost: t\r\nX\x00Y: 1\r\n\r\n", 400),
    ("header_no_colon", b"GET /health HTTP/1.1\r\nHost t\r\n\r\n", 400),
    ("header_space_before_colon", b"GET /health HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    ("obs_fold", b"GET /health HTTP/1.1\r\nHost: t\r\n folded\r\n\r\n", 400),
    ("missing_host", b"GET /health HTTP/1.1\r\n\r\n", 400),
    ("cl_not_a_number", request("POST", "/orders", headers={"Content-Length": "abc"}), 400),
    ("cl_negative", request("POST", "/orders", headers={"Content-Length": "-1"}), 400),
    ("cl_plus_sign", request("POST", "/orders", headers={"Content-Length": "+5"}), 400),
    ("cl_empty", request("POST", "/orders", headers={"Content-Length": ""}), 400),
    ("cl_list", request("POST", "/orders", headers={"Content-Length": "5, 5"}), 400),
    ("cl_conflicting", b"POST /orders HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
                       b"Content-Length: 3\r\n\r\n{}", 400),
    ("cl_overflow_u64", request("POST", "/orders", headers={"Content-Length": "18446744073709551616"}),
     413),
    ("cl_100_digits", request("POST", "/orders", headers={"Content-Length": "9" * 100}), 413),
    ("transfer_encoding_chunked", request("POST", "/orders", headers={"Transfer-Encoding": "chunked"})
     + b"5\r\n{\"a\"}\r\n0\r\n\r\n", 501),
    ("te_and_cl", request("POST", "/orders", ORDER, headers={"Transfer-Encoding": "chunked"}), 501),
]

# (name, bytes sent, status): over HTTP_MAX_HEAD_BYTES or --max-body-bytes.
OVERSIZED = [
    ("request_line_9k", request("GET", "/" + "a" * 9000), 431),
    ("request_line_64k", request("GET", "/" + "a" * 65536), 431),
    ("request_line_64k_no_end", b"GET /" + b"a" * 65536, 431),
    ("one_header_9k", request("GET", "/health", headers={"X-Pad": "a" * 9000}), 431),
    ("200_headers_10k", request("GET", "/health",
                                headers={f"X-H{i:03d}": "v" * 40 for i in range(200)}), 431),
    ("body_max_plus_1", request("POST", "/orders", headers={"Content-Length": str(MAX_BODY_BYTES + 1)})
     + b"x" * 4096, 413),
    ("body_1g_declared", request("POST", "/orders", headers={"Content-Length": str(1 << 30)})
     + b"x" * 4096, 413),
    ("body_1t_100_continue", request("POST", "/orders", headers={"Content-Length": str(1 << 40),
                                                                  "Expect": "100-continue"}), 413),
]

PIPELINE_N = 50
PIPELINE = [(request("GET", "/health"), 200), (request("POST", "/orders", ORDER), 200),
            (request("GET", "/nope"), 404), (request("GET", "/orders"), 405),
            (request("POST", "/orders", b"[1]"), 400)]


def pipeline_batch(n=PIPELINE_N):
    """n requests cycling through PIPELINE: (bytes, [statuses])."""
    reqs = [PIPELINE[i % len(PIPELINE)] for i in range(n)]
    return b"".join(r for r, _ in reqs), [s for _, s in reqs]


class Reader:
    """HTTP responses (Content-Length framed) off one socket."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("closed by the server")
        self.buf += chunk

    def response(self, head_only=False):
        """(status, {lower-case header: value}, body); head_only: a HEAD reply, no body."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        n = 0 if head_only else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def closed(self):
        """True if the server closes with nothing more sent (a reset counts)."""
        if self.buf:
            return False
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def error_exchange(port, name, raw, status):
    """Send one bad input; None if it got `status`, Connection: close and a
    close, else what went wrong."""
    with connect(port) as s:
        s.sendall(raw)
        r = Reader(s)
        got, headers, _ = r.response()
        if got != status or headers.get("connection") != "close":
            return f"{name}: {got} {headers.get('connection')}, want {status} close"
        if not r.closed():
            return f"{name}: {status} but the connection stayed open"
    return None


def pipeline_exchange(port):
    raw, want = pipeline_batch()
    with connect(port) as s:
        s.sendall(raw)
        r = Reader(s)
        got = [r.response()[0] for _ in want]
    return None if got == want else f"pipeline: {got} want {want}"


def reset_close(sock):
    """Close with a reset (SO_LINGER 0): no FIN exchange, no TIME_WAIT left
    to expire later, so tearing an attack down does not disturb what follows."""
    if sock.fileno() != -1:  # not closed already
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def churn_exchange(port, kind):
    s = connect(port)
    try:
        if kind == 1:
            s.sendall(request("GET", "/health"))
        elif kind == 2:
            reset_close(s)
    finally:
        s.close()
    return None


def one(port, mode, i):
    """The i-th hostile connection of mode: None or a description of a wrong reply."""
    if mode == "churn":
        return churn_exchange(port, i % 3)
    if mode == "pipeline":
        return pipeline_exchange(port)
    if mode == "mixed":  # malformed, oversized, pipeline in turn
        mode, i = ("malformed", "oversized", "pipeline")[i % 3], i // 3
        if mode == "pipeline":
            return pipeline_exchange(port)
    table = MALFORMED if mode == "malformed" else OVERSIZED
    return error_exchange(port, *table[i % len(table)])


def hold(port, n, deadline):
    """n idle connections; how many the server closed or reset within 0.1 s."""
    held = []
    for _ in range(n):
        if time.monotonic() > deadline:
            break
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S))
        except OSError:
            break  # backlog full or out of ports: hold what we have
    poller = select.poll()
    for s in held:
        poller.register(s, select.POLLIN)
    return held, len(poller.poll(100))


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=["churn", "malformed", "oversized", "pipeline", "mixed"],
                    default="churn")
    ap.add_argument("--hold", type=int, default=0)
    ap.add_argument("--rate", type=float, default=1000.0, help="connections/s; 0: flat out")
    ap.add_argument("--count", type=int, default=0, help="stop after this many; 0: no limit")
    ap.add_argument("--seconds", type=float, default=20.0, help="hard deadline")
    return ap.parse_args()


def attack(args, deadline, stop):
    """Hostile connections until stopped: (conns, ok, errors, unexpected)."""
    period_s = 1.0 / args.rate if args.rate > 0 else 0.0
    conns = ok = errors = 0
    unexpected = []
    t_next = t_start = time.monotonic()
    while not stop and (not args.count or conns < args.count):
        now = time.monotonic()
        if now > deadline:
            break
        if t_next > now:
            time.sleep(t_next - now)
        elif now - t_next > 0.05:  # fell behind (descheduled): no catch-up burst
            t_next = now
        t_next += period_s
        try:
            wrong = one(args.port, args.mode, conns)
        except (OSError, EOFError, ValueError, IndexError) as e:
            wrong, errors = None, errors + 1
            if len(unexpected) < 5:
                unexpected.append(f"{args.mode} #{conns}: {e!r}")
        else:
            ok += wrong is None
            if wrong and len(unexpected) < 5:
                unexpected.append(wrong)
        conns += 1
    return conns, ok, errors, unexpected, time.monotonic() - t_start


def main():
    args = parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    deadline = time.monotonic() + args.seconds
    held, closed = hold(args.port, args.hold, deadline)
    print(f"held {len(held)} closed_by_server {closed}", flush=True)
    conns, ok, errors, unexpected, seconds = attack(args, deadline, stop)
    for s in held:
        reset_close(s)
    print(json.dumps({"held": len(held), "conns": conns, "ok": ok, "errors": errors,
                      "unexpected": unexpected, "seconds": round(seconds, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
