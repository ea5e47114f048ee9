"""Requests seen by the kernel on a server's TCP port (--span tcp[:PORT]): no code of the
target touched, for servers whose handler no uprobe can name.

Oracle: tcp_server.py answers each request DELAY_MS after its last byte, from the thread of
its connection (it prints each one's id and client port); the client here sends each request in
two writes PAUSE_MS apart and times it on CLOCK_MONOTONIC, bpf_ktime_get_ns's clock. So every
request is one span on its connection's thread, starting once the client's first write begins
(loopback delivers inside the send; the bound is loose for a loaded machine), ending before
the client has the answer, and at
least PAUSE_MS + DELAY_MS long: the server's pure ACKs (delayed ACKs come after 40 ms on an
idle connection, DELAY_MS is longer) end none, a large answer's or a two-write answer's end
is its last byte, and
the client's own socket, on an ephemeral port, is not the server's. Real BPF: run as root."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from test_spans import expect_error, spans, tailtrace, tailtrace_bg
from tt_run import needs_root

SERVER = Path(__file__).with_name("tcp_server.py")
DELAY_MS, PAUSE_MS, SIZE, LARGE = 50, 5, 300, 256 * 1024
MS = 1_000_000


class TcpServer:
    def __init__(self, delay_ms: int = DELAY_MS):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, str(SERVER), str(delay_ms), str(SIZE),
                                      str(LARGE)], stdout=subprocess.PIPE, stderr=self.err,
                                     text=True)
        self.port = int(self.proc.stdout.readline().split()[1])
        self.threads: dict[int, int] = {}  # the client's port -> the thread serving it
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("conn-thread "):
                tid, peer = line.split()[1:]
                self.threads[int(peer)] = int(tid)

    def state(self) -> str:
        """The server as a failed client found it: running or its exit status, the
        connections it accepted, what it wrote to stderr."""
        rc = self.proc.poll()
        self.err.seek(0)
        return (f"server {'running' if rc is None else f'exited {rc}'}, accepted (client port:"
                f" thread) {self.threads}, stderr: {self.err.read()[-2000:]!r}")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.err.close()


def recv_answer(sk: socket.socket) -> int:
    buf = b""
    while len(buf) < 8:
        buf += sk.recv(65536)
    n = int.from_bytes(buf[:8], "big")
    while len(buf) < 8 + n:
        buf += sk.recv(65536)
    return n


PATHS = [b"/small", b"/split", b"/large"]


def client(srv: TcpServer, n: int, out: list) -> int:
    """n requests on one connection, by turns a small answer, one in two writes and a large one:
    (t_first_write, t_answer) of each on CLOCK_MONOTONIC into out; returns the connection's
    local port. A socket error names the server's state with it."""
    try:
        return requests(srv.port, n, out)
    except OSError as e:
        raise AssertionError(f"{e!r} after {len(out)} of {n} answers; {srv.state()}") from e


def requests(port: int, n: int, out: list) -> int:
    with socket.create_connection(("127.0.0.1", port)) as sk:
        local = sk.getsockname()[1]
        for i in range(n):
            path = PATHS[i % len(PATHS)]
            t0 = time.monotonic_ns()
            sk.sendall(b"GET " + path + b" HTTP/1.1\r\n")
            time.sleep(PAUSE_MS / 1000)
            sk.sendall(b"\r\n")
            assert recv_answer(sk) == (LARGE if path == b"/large" else SIZE)
            out.append((t0, time.monotonic_ns()))
    return local


@needs_root
@pytest.mark.parametrize("hook", ["tp_btf", "raw_tp"])
def test_each_request_is_one_span_from_its_first_byte_to_the_answer(tmp_path, hook):
    """Both program variants: tp_btf (BTF-typed arguments) and raw_tp (read with helpers)."""
    srv = TcpServer()
    debug = ["--debug", "hook=raw_tp"] if hook == "raw_tp" else []
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.proc.pid), "--events", "spans",
                                "--span", "tcp", "--duration", "30", *debug)
        got, ports = [[], []], [0, 0]

        def one(c):
            ports[c] = client(srv, 12, got[c])

        conns = [threading.Thread(target=one, args=(c,)) for c in range(2)]
        for t in conns:
            t.start()
        for t in conns:
            t.join(timeout=60)
        time.sleep(0.2)
        tt.send_signal(2)
        _, err = tt.communicate(timeout=60)
        assert tt.returncode == 0, head + err
    finally:
        srv.stop()
    assert f"span tcp:{srv.port}: requests on TCP port {srv.port}" in head
    s = spans(tmp_path)
    assert len(s) == 24 and (s["end_tid"] == s["tid"]).all() and (s["pid"] == srv.proc.pid).all()
    # each connection's requests are the spans of the thread that served it (and sent the
    # answers), in order
    for c in range(2):
        mine = np.sort(s[s["tid"] == srv.threads[ports[c]]], order="t_start_ns")
        req = np.array(got[c], dtype=np.int64)
        assert len(mine) == len(req) == 12
        start = mine["t_start_ns"].astype(np.int64)
        end = mine["t_end_ns"].astype(np.int64)
        assert ((start >= req[:, 0]) & (start - req[:, 0] < 100 * MS)).all(), start - req[:, 0]
        assert (end <= req[:, 1]).all(), req[:, 1] - end
        assert (end - start >= (DELAY_MS + PAUSE_MS) * MS).all(), (end - start).min()
        # an answer in two writes: Nagle's algorithm holds the second until the client's
        # delayed ACK (40 ms on Linux); the span ends when the last byte leaves, as the client
        # sees it, not at the first
        split = np.arange(len(req)) % len(PATHS) == PATHS.index(b"/split")
        stall = (DELAY_MS + PAUSE_MS + 30) * MS
        if np.median(req[split, 1] - req[split, 0]) >= stall:
            assert np.median((end - start)[split]) >= stall - 5 * MS, (end - start)[split]
    meta = json.loads((tmp_path / "meta.json").read_text())
    site = meta["span_sites"][0]
    assert site["exit"] == "tcp" and site["tcp"]["ports"] == [srv.port]
    # no answer here is HTTP: each is read and found so (nothing scanned), or counted unread
    # (its first bytes sent from softirq: 0 of 24 in runs here)
    tc = meta["trace_contexts"]
    assert tc["traceresponse"] == 0 and tc["answers_not_http"] + tc["answers_unread"] == 24, tc
    assert tc["answers_not_http"] >= 12, tc


@needs_root
def test_a_port_nothing_answers_on_gives_no_span(tmp_path):
    """tcp:PORT names the port: the server's own port left out, its requests are not spans."""
    srv = TcpServer()
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.proc.pid), "--events", "spans",
                                "--span", f"tcp:{srv.port + 1 if srv.port < 65535 else 1}",
                                "--duration", "30")
        got = []
        client(srv, 3, got)
        tt.send_signal(2)
        _, err = tt.communicate(timeout=60)
        assert tt.returncode == 0, head + err
    finally:
        srv.stop()
    assert len(got) == 3 and len(spans(tmp_path)) == 0


@needs_root
def test_tcp_without_a_port_needs_one_the_target_listens_on(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span", "tcp", "--", "/bin/sleep", "1")
    expect_error(p, "--span tcp: pid", "listens on no TCP port (yet); name it: --span tcp:PORT")


@pytest.mark.parametrize("bad", ["tcp:0", "tcp:65536", "tcp:80x"])
def test_a_bad_port_is_refused_in_one_line(tmp_path, bad):
    p = tailtrace(tmp_path, "--events", "spans", "--span", bad, "--", "/bin/true")
    expect_error(p, f"--span '{bad}': expected tcp:PORT with PORT 1..65535")


# ---- the trace context a request carries -----------------------------------------------

# A long tracestate: 14 members of 43 or 44 characters, 607 in all with the commas. The
# kernel keeps 511 of them, which end inside the 12th member: the first 11 are kept.
LONG_STATE = [f"k{j}={'v' * 40}" for j in range(14)]
SECRET = "s3cr3t"  # a header after the trace context's, which no file of the run may hold


def sent_tracestate(kind: str, parent: str) -> str:
    """The tracestate traced_requests sends with a request of kind, as the run should keep it
    (only beside a valid traceparent)."""
    return {"valid": f"congo=t61rcWkgMzE,rojo={parent}",
            "named": ",".join(LONG_STATE[:11])}.get(kind, "")


def trace_context_head(i: int) -> tuple[str, str, str, str]:
    """The i-th request's trace-context headers, by turns: a valid traceparent (its name in
    lower case) after a tracestate, a valid one named "TraceParent" before a tracestate longer
    than the kernel keeps, a malformed one (not hex) with a tracestate, none with a
    tracestate; a header of SECRET after them. Returns (kind, trace id, parent id, the header
    lines), the ids unique to the request (sent_tracestate: its tracestate)."""
    kind = ("valid", "named", "malformed", "none")[i % 4]
    trace, parent = f"{0x4bf92f35 + i:032x}", f"{0xb7ad6b71 + i:016x}"
    state = f"tracestate: congo=t61rcWkgMzE,rojo={parent}\r\n"
    head = {"valid": f"{state}traceparent: 00-{trace}-{parent}-01\r\n",
            "named": f"TraceParent:\t00-{trace}-{parent}-00\r\n"
                     f"TraceState:\t{','.join(LONG_STATE)}\r\n",
            "malformed": f"traceparent: 00-{'g' * 32}-{parent}-01\r\n{state}",
            "none": state}[kind]
    return kind, trace, parent, f"{head}X-Secret: {SECRET}\r\n"


def traced_requests(port: int, n: int) -> list[tuple[str, str, str]]:
    """n requests on one connection with the headers of trace_context_head, each answered
    before the next. Returns (kind, trace id, parent id) of each."""
    sent = []
    with socket.create_connection(("127.0.0.1", port)) as sk:
        for i in range(n):
            kind, trace, parent, head = trace_context_head(i)
            sk.sendall(f"GET /small HTTP/1.1\r\nHost: x\r\nUser-Agent: {'a' * 300}\r\n"
                       f"{head}Accept: */*\r\n\r\n".encode())
            assert recv_answer(sk) == SIZE
            sent.append((kind, trace, parent))
    return sent


def traced_run(tmp_path: Path, n: int, *args: str, send=None) -> tuple[list, str]:
    """tcp_server.py traced with --span tcp while send (traced_requests unless said) sends it
    n requests: what send returned, and what tailtrace said."""
    srv = TcpServer(delay_ms=1)
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.proc.pid), "--events", "spans",
                                "--span", "tcp", "--duration", "120", *args)
        sent = (send or traced_requests)(srv.port, n)
        time.sleep(0.2)
        tt.send_signal(2)
        _, err = tt.communicate(timeout=120)
        assert tt.returncode == 0, head + err
    finally:
        srv.stop()
    return sent, head + err


def check_trace_contexts(run_dir: Path, sent: list) -> dict:
    """The requests' trace contexts as sent (oracle: traced_requests), in the loaded run and
    in its OTLP export: the valid ones' spans in the callers' traces, children of their spans,
    with their tracestates; no other header's bytes in the run's files."""
    from analyze.load.load import load_run
    from analyze.pipeline import export_run

    run = load_run(run_dir)
    req = run.requests.sort_values("t_start_ns")
    assert len(req) == len(sent), (len(req), len(sent))
    want = {"valid": "ok", "named": "ok", "malformed": "malformed", "none": "none"}
    assert req["trace_context"].astype(str).tolist() == [want[k] for k, _, _ in sent]
    ok = [(t, p) for k, t, p in sent if k in ("valid", "named")]
    got = req[req["trace_context"] == "ok"]
    assert list(zip(got["trace_id"], got["parent_span_id"])) == ok
    states = [sent_tracestate(k, p) for k, _, p in sent]
    assert req["trace_state"].tolist() == states
    assert SECRET.encode() not in (run_dir / "span_contexts.bin").read_bytes()
    meta = json.loads((run_dir / "meta.json").read_text())["trace_contexts"]
    # the kernel counts every header it found, the malformed among them; a tracestate only
    # beside a traceparent
    found = sum(k != "none" for k, _, _ in sent)
    assert meta["traceparent"] == found and meta["unread"] == 0, meta
    assert meta["tracestate"] == found, meta
    out = run_dir / "otlp.json"
    counts = export_run(run_dir, file=out)
    assert counts["in_callers_traces"] == len(ok), counts
    spans = [s for line in out.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    joined = sorted((s["traceId"], s["parentSpanId"]) for s in spans if s.get("parentSpanId"))
    assert joined == sorted(ok)
    # each request's tracestate goes with its span and its waits' spans
    by_trace = {t: sent_tracestate(k, p) for k, t, p in sent if k in ("valid", "named")}
    assert {(s["traceId"], s.get("traceState", "")) for s in spans
            if s["traceId"] in by_trace} == set(by_trace.items())
    return {"requests": len(sent), "in_callers_traces": len(ok)}


@needs_root
@pytest.mark.parametrize("hook", ["tp_btf", "raw_tp"])
def test_a_requests_traceparent_puts_its_span_in_the_callers_trace(tmp_path, hook):
    """40 requests, each with headers of some 350 bytes: the 20 with a valid traceparent (its
    name in any case) carry their trace and parent ids into the run and into the OTLP spans;
    the 10 malformed are counted and keep ids of their own, as do the 10 without one."""
    debug = ["--debug", "hook=raw_tp"] if hook == "raw_tp" else []
    sent, _ = traced_run(tmp_path, 40, *debug)
    check_trace_contexts(tmp_path, sent)


ANSWER_KINDS = ("under", "vector", "started", "malformed", "plain")


def recv_http(sk: socket.socket) -> bytes:
    """One HTTP/1.1 answer of tcp_server.py: its headers, after its SIZE bytes of body came."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sk.recv(65536)
    head, body = buf.split(b"\r\n\r\n", 1)
    while len(body) < SIZE:
        body += sk.recv(65536)
    assert len(body) == SIZE
    return head


def answered_requests(port: int, n: int) -> list[tuple[str, str, str]]:
    """n HTTP requests on one connection, by turns (ANSWER_KINDS) of what the answer says of
    the server's own span: a valid traceresponse in the caller's trace, sent in one send
    ("under") or in a two-buffer sendmsg ("vector"); a valid one starting a trace, the request
    carrying no traceparent ("started"); a malformed one; none. Returns (kind, the trace id
    and the parent the request's span should have): the server's span when its traceresponse
    is valid, else the caller's."""
    want = []
    with socket.create_connection(("127.0.0.1", port)) as sk:
        for i in range(n):
            kind = ANSWER_KINDS[i % len(ANSWER_KINDS)]
            trace, caller = f"{0x5bf92f35 + i:032x}", f"{0xc7ad6b71 + i:016x}"
            server = f"{0xd1e55e00 + i:016x}"
            head = f"traceparent: 00-{trace}-{caller}-01\r\n" if kind != "started" else ""
            echo = {"malformed": f"00-{trace}-{'z' * 16}-01", "plain": None}.get(
                kind, f"00-{trace}-{server}-01")
            if echo:
                head += f"echo-traceresponse: {echo}\r\n"
            path = "/http-vector" if kind == "vector" else "/http"
            sk.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{head}Accept: */*\r\n\r\n".encode())
            got = recv_http(sk)
            assert (b"traceresponse: " in got) == bool(echo), got
            under = kind in ("under", "vector", "started")
            want.append((kind, trace, server if under else caller))
    return want


def check_answer_contexts(run_dir: Path, want: list) -> dict:
    """The answers' traceresponse headers as sent (oracle: answered_requests), in the loaded
    run and in its OTLP export: the valid ones' requests under the server's span."""
    from analyze.load.load import load_run
    from analyze.pipeline import export_run

    states = {"under": "ok", "vector": "ok", "started": "ok", "malformed": "malformed",
              "plain": "none"}
    meta = json.loads((run_dir / "meta.json").read_text())["trace_contexts"]
    sent = sum(k != "plain" for k, _, _ in want)
    assert meta["traceresponse"] == sent and meta["answers_unread"] == 0, meta
    req = load_run(run_dir).requests.sort_values("t_start_ns")
    assert req["service_context"].astype(str).tolist() == [states[k] for k, _, _ in want]
    ok = req[req["service_context"] == "ok"]
    under = [(t, p) for k, t, p in want if states[k] == "ok"]
    assert list(zip(ok["service_trace_id"], ok["service_span_id"])) == under
    out = run_dir / "otlp.json"
    counts = export_run(run_dir, file=out)
    assert counts["under_service_spans"] == len(under), counts
    assert counts["in_callers_traces"] == len(want), counts
    spans = [s for line in out.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"] if s.get("parentSpanId")]
    assert sorted((s["traceId"], s["parentSpanId"]) for s in spans) == \
        sorted((t, p) for _, t, p in want)
    return {"requests": len(want), "under_service_spans": len(under)}


@needs_root
@pytest.mark.parametrize("hook", ["tp_btf", "raw_tp"])
def test_an_answers_traceresponse_puts_the_span_under_the_servers_own(tmp_path, hook):
    """30 HTTP requests whose answers say, by turns, the server's own span (traceresponse,
    W3C Trace Context Level 2) or not: the 18 valid ones, in one send or a two-buffer
    sendmsg, and for a request without a traceparent too, put the request's span under the
    server's span in its trace; the 6 malformed are counted and leave it under the caller's,
    as do the 6 answers without one. Oracle: the ids answered_requests sent."""
    debug = ["--debug", "hook=raw_tp"] if hook == "raw_tp" else []
    want, _ = traced_run(tmp_path, 30, *debug, send=answered_requests)
    got = check_answer_contexts(tmp_path, want)
    assert got["under_service_spans"] == 18
