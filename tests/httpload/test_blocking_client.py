"""bench/blocking_client (the libcurl-free blocking client bench/cpu_per_request.sh runs
as "block") against a real orders-server, with the server's own counts as the oracle:
T threads open exactly T connections, every reply it counts is one the server served,
error statuses are counted as errors, and a dead port or a bad option fails at once
with one line. Against a scripted server: replies split across writes are framed by
their Content-Length, "Connection: close" opens a new connection, a reply without
Content-Length is an error, and a server that never answers cannot hold the run.
"""
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from orders_proc import BUILD, Server, need as _need  # orders-server as a child

CLIENT = BUILD / "bench" / "blocking_client"


def _client(*args, timeout=30):
    r = subprocess.run([_need(CLIENT), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    m = re.fullmatch(r"requests (\d+) errors (\d+) elapsed_s ([0-9.]+)\n", r.stdout)
    return r, (int(m[1]), int(m[2]), float(m[3])) if m else None


def test_counts_match_the_server():
    srv = Server("--workers", "2")
    try:
        r, got = _client("--port", srv.port, "--threads", 4, "--duration", 1, "--pin")
    finally:
        served = srv.stop_counts()
    assert r.returncode == 0, r.stderr
    requests, errors, elapsed_s = got
    assert requests > 100 and errors == 0
    assert served == (4, requests, 0)  # one keep-alive connection per thread
    assert 1.0 <= elapsed_s < 3.0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pin_uses_only_allowed_cpus():
    """--pin counts round robin over the CPUs it may use, not over CPU numbers 0..N-1:
    confined to the last CPU, all three threads are pinned there."""
    last = max(os.sched_getaffinity(0))
    srv = Server("--workers", "2")
    try:
        client = subprocess.Popen(
            [_need(CLIENT), "--port", str(srv.port), "--threads", "3", "--duration", "2", "--pin"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {last}))
        time.sleep(0.7)
        tasks = Path(f"/proc/{client.pid}/task")
        allowed = {t.name: re.search(r"Cpus_allowed_list:\s*(\S+)", (t / "status").read_text())[1]
                   for t in tasks.iterdir()}
        out, err = client.communicate(timeout=30)
    finally:
        served = srv.stop_counts()
    assert client.returncode == 0, err
    # main + 3 workers (+ a sanitizer's own thread under TSan), every one on `last`
    assert len(allowed) >= 4 and set(allowed.values()) == {str(last)}, allowed
    requests = int(out.split()[1])
    assert requests > 0 and served == (3, requests, 0)


def test_error_statuses_are_counted():
    srv = Server("--workers", "2")
    try:
        r, got = _client("--port", srv.port, "--threads", 2, "--duration", 1, "--path", "/nope")
    finally:
        served = srv.stop_counts()
    assert r.returncode == 1
    requests, errors, _ = got
    assert requests > 0 and errors == requests
    assert served == (2, requests, requests)
    assert r.stderr.strip() == (f"blocking_client: {requests} of {requests} replies were not 2xx "
                                "(the first: 404; check --path)")


def test_dead_port_fails_at_once():
    with socket.socket() as held:  # bound, never listening: refused, and nobody else's
        held.bind(("127.0.0.1", 0))
        t0 = time.monotonic()
        r, got = _client("--port", held.getsockname()[1], "--threads", 3, "--duration", 30)
    assert time.monotonic() - t0 < 5  # not the whole --duration
    assert r.returncode == 1 and got[:2] == (0, 0)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "3 of 3 connections" in lines[0], r.stderr
    assert "in connect: Connection refused" in lines[0] and "listening" in lines[0]


def test_bad_options():
    for args, word in ((["--port", 1, "--threads", 0], "--threads"),
                       (["--threads", 2], "--port is required"),
                       (["--port", 1, "--path", "no-slash"], "--path"),
                       (["--port", 1, "--duration", "x"], "--duration")):
        r, _ = _client(*args)
        assert r.returncode == 2, args
        assert len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, r.stderr


# ---- a scripted server ----------------------------------------------------------------

class Scripted:
    """Accepts on 127.0.0.1, one thread per connection running reply(conn) for each
    request it reads; counts connections and replies sent."""

    def __init__(self, reply):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.reply, self.connections, self.replies = reply, 0, 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: (\d+)", head)[1])
                while len(buf) < length:
                    buf += conn.recv(4096)
                buf = buf[length:]
                with self.lock:  # before sending: the client may exit once it has it
                    self.replies += 1
                if self.reply(conn) is False:
                    return

    def close(self):
        self.sock.close()


def _against(reply, *args):
    """blocking_client *args against a Scripted(reply): (result, parsed stdout, server)."""
    srv = Scripted(reply)
    try:
        r, got = _client("--port", srv.port, *args)
    finally:
        srv.close()
    return r, got, srv


def _split_reply(conn):
    for part in (b"HTTP/1.1 200 OK\r\nContent-", b"Length:  5 \r\nX: y\r\n\r\nhel", b"lo"):
        conn.sendall(part)
        time.sleep(0.001)


def test_reply_split_across_writes_is_framed_by_content_length():
    r, got, srv = _against(_split_reply, "--threads", 2, "--duration", 1)
    assert r.returncode == 0, r.stderr
    assert got[0] > 10 and got[0] == srv.replies and got[1] == 0
    assert srv.connections == 2


def _close_reply(conn):
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
    return False  # and close, as the header says


def test_connection_close_opens_a_new_connection():
    r, got, srv = _against(_close_reply, "--threads", 1, "--duration", 1)
    assert r.returncode == 0, r.stderr
    assert got[0] > 10 and got[0] == srv.replies
    assert srv.connections in (got[0], got[0] + 1)  # one each; maybe one opened at the end


def test_reply_without_content_length_is_an_error():
    r, got, _ = _against(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n"),
                         "--threads", 1, "--duration", 5)
    assert r.returncode == 1 and got[0] == 0
    assert "in recv: Protocol error" in r.stderr, r.stderr


def test_server_that_never_answers_cannot_hold_the_run():
    t0 = time.monotonic()
    r, got, _ = _against(lambda conn: time.sleep(60), "--threads", 2, "--duration", 1)
    took = time.monotonic() - t0
    assert 2.9 < took < 6  # --duration 1, then the 2 s grace
    assert r.returncode == 1 and got[0] == 0
    assert "2 of 2 connections" in r.stderr and "none within the grace" in r.stderr, r.stderr
