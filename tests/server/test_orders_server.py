"""orders-server end to end: spawns build/workloads/server/orders-server on an
ephemeral port and talks raw HTTP/1.1 to it over sockets.

Oracles are known by construction: exact status codes for each bad input,
one connection for N keep-alive requests (the server's own shutdown tally),
replies in request order for pipelined requests, --sleep-us serialising a
single worker, --service-us showing up as the worker's on-CPU time.
"""
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hostile_client import Reader, request  # response reader, request builder

ROOT = Path(__file__).resolve().parents[2]
# ORDERS_SERVER=path tests another build of the binary.
BINARY = Path(os.environ.get("ORDERS_SERVER", ROOT / "build" / "workloads" / "server" / "orders-server"))
READY_RE = re.compile(r"^orders-server: listening on 127\.0\.0\.1:(\d+) workers=(\d+)$")
ORDER = b'{"item":"widget","qty":1}'
IO_TIMEOUT_S = 10


def binary():
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: build first "
                    "(cmake -S . -B build -G Ninja && cmake --build build)")
    return str(BINARY)


class Server:
    """A running orders-server; stop() returns (exit code, stderr, seconds to exit)."""

    def __init__(self, *args, preexec_fn=None):
        self.proc = subprocess.Popen([binary(), "--port", "0", *args], preexec_fn=preexec_fn,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._ready_line()
        m = READY_RE.match(line)
        assert m, f"unexpected ready line {line!r}"
        self.port, self.workers = int(m.group(1)), int(m.group(2))

    def _ready_line(self):
        ready, _, _ = select.select([self.proc.stdout], [], [], IO_TIMEOUT_S)
        if not ready:
            self.proc.kill()
            pytest.fail("orders-server printed no ready line within 10 s")
        line = self.proc.stdout.readline().rstrip("\n")
        if not line:
            err = self.proc.stderr.read()
            self.proc.wait()
            pytest.fail(f"orders-server exited before it was ready: {err.strip()}")
        return line

    def connect(self, rcvbuf=None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(IO_TIMEOUT_S)
        if rcvbuf:  # before connect, so the advertised window stays small
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", self.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self, sig=signal.SIGTERM):
        """Signal, then wait on a pidfd (exact, no polling); kill after 10 s."""
        pidfd = os.pidfd_open(self.proc.pid)
        try:
            t0 = time.monotonic()
            self.proc.send_signal(sig)
            exited = select.select([pidfd], [], [], IO_TIMEOUT_S)[0]
            elapsed_s = time.monotonic() - t0
        finally:
            os.close(pidfd)
        if not exited:
            self.proc.kill()
        rc = self.proc.wait()
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc, err, elapsed_s

    def worker_tids(self):
        """{thread name: tid} of the server's threads."""
        out = {}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            out[(task / "comm").read_text().strip()] = int(task.name)
        return out

    def on_cpu_ns(self, tid):
        """Time the thread has spent running (schedstat, ns)."""
        return int(Path(f"/proc/{self.proc.pid}/task/{tid}/schedstat").read_text().split()[0])


@pytest.fixture
def server():
    srv = Server("--workers", "2")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def exchange(srv, raw, check_close=False):
    """One request on a new connection: (status, headers, body, closed after?)."""
    with srv.connect() as s:
        s.sendall(raw)
        r = Reader(s)
        return (*r.response(), r.closed() if check_close else None)


def order_id(body):
    m = re.fullmatch(rb'\{"order_id":(\d+),"status":"accepted"\}', body)
    assert m, body
    return int(m.group(1))


def test_health_and_orders(server):
    status, headers, body = exchange(server, request("GET", "/health"))[:3]
    assert (status, body) == (200, b'{"status":"ok"}')
    assert headers["content-type"] == "application/json"
    ids = []
    for _ in range(3):
        status, _, body, _ = exchange(server, request("POST", "/orders", ORDER))
        assert status == 200
        ids.append(order_id(body))
    assert ids[1] == ids[0] + 1 and ids[2] == ids[1] + 1
    with server.connect() as s:  # HEAD: the GET headers, no body
        r = Reader(s)
        s.sendall(request("HEAD", "/health") + request("GET", "/health"))
        status, headers, body = r.response(head_only=True)
        assert (status, headers["content-length"], body) == (200, "15", b"")
        assert r.response() == (200, headers, b'{"status":"ok"}')


def test_thread_names(server):
    names = sorted(n for n in server.worker_tids() if n.startswith("orders-w"))
    assert names == ["orders-w0", "orders-w1"]


def test_keep_alive_reuses_one_connection():
    srv = Server("--workers", "1")
    with srv.connect() as s:
        r = Reader(s)
        for i in range(50):
            s.sendall(request("POST", "/orders", ORDER) if i % 2 else request("GET", "/health"))
            assert r.response()[0] == 200
    rc, err, _ = srv.stop()
    assert rc == 0
    assert "1 connections, 50 requests (0 errors)" in err


def test_pipelined_requests_answered_in_order(server):
    reqs = [request("GET", "/health"), request("POST", "/orders", ORDER),
            request("GET", "/nope"), request("POST", "/orders", ORDER),
            request("GET", "/orders"), request("POST", "/orders", ORDER)]
    want = [200, 200, 404, 200, 405, 200]
    raw = b"".join(reqs)
    with server.connect() as s:
        s.sendall(raw)  # all at once
        r = Reader(s)
        got = [r.response() for _ in reqs]
        assert [g[0] for g in got] == want
        ids = [order_id(g[2]) for g in got if g[0] == 200 and b"order_id" in g[2]]
        assert ids == [ids[0], ids[0] + 1, ids[0] + 2]
        # Same batch again in 7-byte pieces: every request split across reads.
        for i in range(0, len(raw), 7):
            s.sendall(raw[i:i + 7])
            time.sleep(0.0005)
        assert [r.response()[0] for _ in reqs] == want


def test_deep_pipeline_with_backpressure():
    """40000 pipelined requests sent while ~5 MB of replies pile up against a
    small receive window: the server must stop reading when its output backs
    up, resume on EPOLLOUT, and answer every request in order."""
    srv = Server("--workers", "1")
    n = 40000
    raw = b"".join(request("POST", "/orders", ORDER) if i % 4 == 0 else request("GET", "/health")
                   for i in range(n))
    try:
        with srv.connect(rcvbuf=8192) as s:
            sender = threading.Thread(target=s.sendall, args=(raw,))
            sender.start()
            time.sleep(0.2)  # let the server's send buffer and our receive buffer fill
            r = Reader(s)
            got = [r.response() for _ in range(n)]
            sender.join()
        assert [g[0] for g in got] == [200] * n
        ids = [order_id(g[2]) for g in got[::4]]
        assert ids == list(range(ids[0], ids[0] + n // 4))
    finally:
        rc, err, _ = srv.stop()
    assert rc == 0 and f"1 connections, {n} requests (0 errors)" in err


def test_large_body_and_expect_continue(server):
    body = b'{"items":"' + b"x" * 40000 + b'"}'
    with server.connect() as s:
        r = Reader(s)
        s.sendall(request("POST", "/orders", body))
        assert r.response()[0] == 200
        # Expect: 100-continue: the server asks for the body, then answers.
        s.sendall(request("POST", "/orders", b"", {"Expect": "100-continue",
                                                    "Content-Length": str(len(ORDER))}))
        assert r.response()[0] == 100
        s.sendall(ORDER)
        status, _, reply = r.response()
        assert status == 200 and order_id(reply) > 0


@pytest.mark.parametrize("raw, status", [
    (b"HELLO\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\nHost t\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\nHost: t\n\n", 400),
    (request("GET", "/health", headers={"X-Pad": "a" * 9000}), 431),
    (request("POST", "/orders", headers={"Content-Length": "1000000"}), 413),
    (request("POST", "/orders", headers={"Transfer-Encoding": "chunked"}), 501),
    (request("GET", "/health", version="HTTP/2.0"), 505),
])
def test_bad_request_gets_status_and_close(server, raw, status):
    with server.connect() as other:  # a connection opened before the bad one
        got, headers, _, closed = exchange(server, raw, check_close=True)
        assert got == status
        assert headers["connection"] == "close"
        assert closed
        # Other connections keep working: the open one and a new one.
        other.sendall(request("GET", "/health"))
        assert Reader(other).response()[0] == 200
    assert exchange(server, request("GET", "/health"))[0] == 200


def test_413_while_the_client_is_still_sending_its_body(server):
    """The 413 goes out right after the head; the server then half-closes and
    drains, so a client still pushing its body neither gets a reset nor loses
    the reply (closing with unread input would send RST)."""
    with server.connect() as s:
        s.sendall(request("POST", "/orders", headers={"Content-Length": "1000000"}))
        s.sendall(b"x" * 600_000)  # raises ConnectionResetError if the server reset
        s.shutdown(socket.SHUT_WR)
        r = Reader(s)
        status, headers, _ = r.response()
        assert (status, headers["connection"]) == (413, "close")
        assert r.closed()


def test_oversized_head_sent_slowly_is_431(server):
    with server.connect() as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Pad: ")
        r = Reader(s)
        for _ in range(10):
            s.sendall(b"a" * 1000)  # never ends the head
            time.sleep(0.002)
        assert r.response()[0] == 431
        assert r.closed()


@pytest.mark.parametrize("raw, status, allow", [
    (request("GET", "/nope"), 404, None),
    (request("GET", "/orders"), 405, "POST"),
    (request("POST", "/health", ORDER), 405, "GET, HEAD"),
    (request("POST", "/orders", b"not json"), 400, None),
])
def test_client_error_keeps_connection(server, raw, status, allow):
    with server.connect() as s:
        r = Reader(s)
        s.sendall(raw)
        got, headers, _ = r.response()
        assert got == status
        assert headers.get("allow") == allow
        assert "connection" not in headers
        s.sendall(request("GET", "/health"))
        assert r.response()[0] == 200


def test_connection_close_and_http10(server):
    status, headers, _, closed = exchange(server, request("GET", "/health",
                                                          headers={"Connection": "close"}),
                                          check_close=True)
    assert (status, headers["connection"], closed) == (200, "close", True)
    status, _, _, closed = exchange(server, b"GET /health HTTP/1.0\r\n\r\n", check_close=True)
    assert (status, closed) == (200, True)
    with server.connect() as s:  # HTTP/1.0 keep-alive: said in the reply, and kept
        r = Reader(s)
        for _ in range(3):
            s.sendall(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, headers, _ = r.response()
            assert (status, headers["connection"]) == (200, "keep-alive")
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        status, headers, _ = r.response()
        assert (status, headers["connection"], r.closed()) == (200, "close", True)


def test_many_connections_get_unique_order_ids(server):
    ids, errors = [], []

    def client():
        try:
            with server.connect() as s:
                r = Reader(s)
                for _ in range(20):
                    s.sendall(request("POST", "/orders", ORDER))
                    status, _, body = r.response()
                    assert status == 200
                    ids.append(order_id(body))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(ids) == 800 and len(set(ids)) == 800


def test_sleep_us_blocks_the_worker():
    srv = Server("--workers", "1", "--sleep-us", "50000")
    try:
        tid = srv.worker_tids()["orders-w0"]
        cpu0 = srv.on_cpu_ns(tid)
        t0 = time.monotonic()
        assert exchange(srv, request("POST", "/orders", ORDER))[0] == 200
        assert time.monotonic() - t0 >= 0.050
        # Two connections at once on one worker: the wait blocks the thread,
        # so the second reply comes a full sleep after the first.
        a, b = srv.connect(), srv.connect()
        t0 = time.monotonic()
        a.sendall(request("POST", "/orders", ORDER))
        b.sendall(request("POST", "/orders", ORDER))
        done = []
        for s in (a, b):
            assert Reader(s).response()[0] == 200
            done.append(time.monotonic() - t0)
            s.close()
        assert max(done) >= 0.100
        # Blocked, not spinning: 150 ms of waiting cost well under 30 ms CPU.
        assert srv.on_cpu_ns(tid) - cpu0 < 30_000_000
        # /health does no downstream call: one that did would take >= 50 ms every time; a
        # single exchange can be that slow on a busy host, so the best of three counts.
        took = []
        for _ in range(3):
            t0 = time.monotonic()
            assert exchange(srv, request("GET", "/health"))[0] == 200
            took.append(time.monotonic() - t0)
        assert min(took) < 0.050, took
    finally:
        assert srv.stop()[0] == 0


def cpu_hog(cpu):
    """A busy process pinned to cpu (the caller kills it)."""
    return subprocess.Popen(["python3", "-c", "while True: pass"],
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def test_service_us_burns_worker_cpu():
    """--service-us is the worker's own CPU time: sharing its CPU with a busy
    process, the worker still gets 20 ms of CPU per order (it takes longer in
    wall time instead), so run-queue delay shows up in request latency."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    srv = Server("--workers", "1", "--service-us", "20000",
                 preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    hog = cpu_hog(cpu)
    try:
        tid = srv.worker_tids()["orders-w0"]
        cpu0 = srv.on_cpu_ns(tid)
        t0 = time.monotonic()
        with srv.connect() as s:
            r = Reader(s)
            for _ in range(5):
                s.sendall(request("POST", "/orders", ORDER))
                assert r.response()[0] == 200
        assert time.monotonic() - t0 >= 0.100
        assert srv.on_cpu_ns(tid) - cpu0 >= 100_000_000  # 5 x 20 ms of its own CPU
    finally:
        hog.kill()
        hog.wait()
        assert srv.stop()[0] == 0


def voluntary_switches(tid: int) -> int:
    status = Path(f"/proc/{tid}/status").read_text()
    return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))


@pytest.mark.parametrize("spin_us", [0, 1000])
def test_spin_us_keeps_the_worker_awake_between_requests(spin_us):
    """One worker, one keep-alive client sending its next request 0.2 ms after the reply
    (well within 1 ms, and long enough for even a sanitizer build's worker to be done:
    sent at once, the next request caught a TSan worker still awake 123-170 times in 300):
    without --spin-us the worker sleeps in epoll_wait after every reply and is woken for
    the next request, one voluntary switch a request (the kernel's own count); with
    --spin-us 1000 it is still polling when the request comes, unless the client itself
    came late (on a busy machine its 0.2 ms sleep can last a neighbour's time slice): those
    rounds, timed by the client, are allowed their sleep."""
    n = 300
    late = 0
    srv = Server("--workers", "1", "--spin-us", str(spin_us))
    try:
        tid = srv.worker_tids()["orders-w0"]
        with srv.connect() as s:
            r = Reader(s)
            s.sendall(request("GET", "/health"))  # connected and served: counts start here
            assert r.response()[0] == 200
            before = voluntary_switches(tid)
            for _ in range(n):
                s.sendall(request("POST", "/orders", ORDER))
                assert r.response()[0] == 200
                t = time.monotonic()
                time.sleep(0.0002)
                late += time.monotonic() - t > 0.0008
            slept = voluntary_switches(tid) - before
    finally:
        assert srv.stop()[0] == 0
    if spin_us:
        assert slept <= n // 10 + late, (slept, late)
        assert late <= n // 2, "the client was late half the time: nothing to check"
    else:
        assert slept >= n // 2, slept


@pytest.mark.parametrize("sig, work", [(signal.SIGTERM, "--sleep-us"), (signal.SIGINT, "--sleep-us"),
                                       (signal.SIGTERM, "--service-us")])
def test_signal_stops_promptly_mid_request(sig, work):
    srv = Server("--workers", "2", work, "5000000")
    idle = srv.connect()  # an idle keep-alive connection
    busy = srv.connect()
    busy.sendall(request("POST", "/orders", ORDER))  # now in 5 s of waiting or CPU work
    time.sleep(0.1)
    rc, err, elapsed_s = srv.stop(sig)
    assert rc == 0, err
    assert elapsed_s < 0.5, f"took {elapsed_s * 1000:.0f} ms to exit"  # vs the 5 s request
    assert "stopped on" in err
    # The order cut short is answered 503 (not a false "accepted"), and the
    # server closed every socket.
    busy.settimeout(1)
    reader = Reader(busy)
    status, headers, _ = reader.response()
    assert (status, headers["connection"]) == (503, "close")
    assert reader.closed()
    idle.settimeout(1)
    assert Reader(idle).closed()
    idle.close()
    busy.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=1)


def test_sigint_stops_a_background_job():
    """Shells start background jobs with SIGINT ignored; the server must still stop on it."""
    srv = Server("--workers", "1", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    rc, err, elapsed_s = srv.stop(signal.SIGINT)
    assert (rc, elapsed_s < 0.5) == (0, True), err
    assert "stopped on Interrupt: 0 connections, 0 requests (0 errors)" in err


def test_port_in_use_and_bad_flags(server):
    p = subprocess.run([binary(), "--port", str(server.port)], capture_output=True, text=True,
                       timeout=IO_TIMEOUT_S)
    assert p.returncode == 1
    assert "Address already in use" in p.stderr and p.stdout == ""
    for args, word in [(["--workers", "0"], "--workers"), (["--bogus"], "--bogus"),
                       (["--port", "70000"], "--port"), (["--sleep-us"], "--sleep-us"),
                       (["--bind", "localhost"], "--bind"), (["stray"], "stray")]:
        p = subprocess.run([binary(), *args], capture_output=True, text=True,
                           timeout=IO_TIMEOUT_S)
        assert p.returncode == 2, args
        assert p.stderr.count("\n") == 1 and word in p.stderr, p.stderr
    p = subprocess.run([binary(), "--help"], capture_output=True, text=True, timeout=IO_TIMEOUT_S)
    assert p.returncode == 0
    for opt, default in [("--port", "8080"), ("--bind", "127.0.0.1"), ("--workers", "CPUs"),
                         ("--service-us", "0"), ("--sleep-us", "0"), ("--backlog", "1024"),
                         ("--max-body-bytes", "65536"), ("--help", "")]:
        line = next(ln for ln in p.stdout.splitlines() if opt + " " in ln or ln.endswith(opt))
        assert f"default {default}" in line or f"default: {default}" in line or not default
