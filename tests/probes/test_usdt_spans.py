"""Spans between USDT probes (--span usdt:BIN:PROVIDER:NAME) on tailtrace's own workloads,
which mark every request with httpload:request__start(id, conn) / request__done(id, status)
and orders:request__start(conn, bytes) / request__done(conn, status) on 5-byte nops, and at
its end with request__span(id, t_start_ns, status), one mark carrying the start.

Oracles: httpload records each request itself (requests.bin, same clock); the probes sit
right after its t_start and right after its t_end, so on every thread the k-th span is the
k-th request, starting and ending within a millisecond of it, with its HTTP status as the
return value. The async model runs 8 requests at once on one thread, which only pairing by
the request id (the first argument) can untangle. Real BPF: run as root."""
from __future__ import annotations

import json
import socket
import subprocess
import time

import numpy as np
import pytest

from orders_proc import Server
from analyze.load.schema import load_schema, read_records
from test_spans import BUILD, expect_error, spans, tailtrace, tailtrace_bg
from test_tcp_spans import check_trace_contexts, trace_context_head

SERVER = BUILD / "workloads" / "server" / "orders-server"
HTTPLOAD = BUILD / "workloads" / "httpload" / "httpload"
MS = 1_000_000


@pytest.fixture
def server():
    assert SERVER.exists() and HTTPLOAD.exists(), "build the workloads first"
    srv = Server("--workers", "2")
    yield srv, srv.url
    srv.stop()


def load_args(url: str, model: str, n: int) -> list[str]:
    return [str(HTTPLOAD), "--model", model, "--conns", "8", "--requests", str(n), "--url", url]


def spans_and_requests(tmp_path, url, model, name):
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{HTTPLOAD}:httpload:{name}", "--",
                  *load_args(url, model, 400), "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    s = spans(tmp_path)
    req = read_records(tmp_path / "requests.bin", load_schema(tmp_path), "request")
    assert len(req) == len(s) == 400
    assert sorted(s["ret"].tolist()) == sorted(req["status"].tolist())
    assert (s["end_tid"] == s["tid"]).all()
    site = json.loads((tmp_path / "meta.json").read_text())["span_sites"][0]
    return p.stderr, s, req, site


@pytest.mark.parametrize("model", ["pool", "async"])
def test_httpload_usdt_span_pairs_are_its_requests(server, tmp_path, model):
    """request__start,request__done named: the pair of marks, paired by the request id."""
    err, s, req, site = spans_and_requests(tmp_path, server[1], model,
                                           "request__start,request__done")
    assert "USDT request__start" in err and "paired by first argument" in err
    # each span is its request: on the same thread, the marks just after httpload's own clock
    # reads (microseconds; a thread preempted between the two on a busy machine waits a
    # scheduler slice, so the bound for one is 100 ms, and the median's 1 ms)
    d = []
    for tid in np.unique(req["tid"]):
        r = np.sort(req[req["tid"] == tid], order="t_start_ns")
        q = np.sort(s[s["tid"] == tid], order="t_start_ns")
        assert len(q) == len(r)
        d0 = q["t_start_ns"].astype(np.int64) - r["t_start_ns"].astype(np.int64)
        d1 = q["t_end_ns"].astype(np.int64) - r["t_end_ns"].astype(np.int64)
        assert ((d0 >= 0) & (d0 < 100 * MS) & (d1 >= 0) & (d1 < 100 * MS)).all(), (d0.max(),
                                                                                 d1.max())
        d += [d0, d1]
    assert np.median(np.concatenate(d)) < MS
    assert site["exit"] == "usdt" and site["usdt"]["paired_by"] == "argument"
    assert site["entry"]["class"] == "nop5" and site["exits"][0]["class"] == "nop5"


@pytest.mark.parametrize("model", ["pool", "async"])
def test_httpload_one_mark_spans_start_at_its_own_clock(server, tmp_path, model):
    """The base name finds request__span(id, t_start_ns, status), one mark at the end: each
    span starts at exactly the t_start_ns httpload recorded for its request (the argument),
    and ends just after its t_end_ns, on the request's thread."""
    err, s, req, site = spans_and_requests(tmp_path, server[1], model, "request")
    assert "USDT request__span (3 sites, nop5), one mark carrying the start" in err
    for tid in np.unique(req["tid"]):
        r = np.sort(req[req["tid"] == tid], order="t_start_ns")
        q = np.sort(s[s["tid"] == tid], order="t_start_ns")
        assert (q["t_start_ns"] == r["t_start_ns"]).all()
        d1 = q["t_end_ns"].astype(np.int64) - r["t_end_ns"].astype(np.int64)
        assert ((d1 >= 0) & (d1 < 100 * MS)).all(), d1.max()
    assert site["usdt"] == {"provider": "httpload", "start": None, "end": "request__span",
                            "start_sites": 0, "end_sites": 3, "paired_by": "one_mark",
                            "traceparent_arg": None, "tracestate_arg": None}
    assert site["entry"]["class"] == "nop5" and site["exits"] == []


@pytest.mark.parametrize("name,found", [
    ("request__span", "USDT request__span (3 sites, nop5), one mark carrying the start"),
    ("request__start", "USDT request__start (2 sites, nop5) to request__done (3 sites, nop5)"),
    ("request__done", "USDT request__start (2 sites, nop5) to request__done (3 sites, nop5)")])
def test_a_probe_named_as_the_errors_list_it_is_taken(tmp_path, name, found):
    """The one mark by its own name is the one mark; an end of the pair by its name, the
    pair (the error for an unknown NAME lists the probes by these names)."""
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"usdt:{HTTPLOAD}:httpload:{name}",
                  "--", str(HTTPLOAD), "--help")
    assert p.returncode == 0, p.stderr
    assert f"span {name}: {found}" in p.stderr


def test_orders_server_usdt_spans_by_pid(server, tmp_path):
    """The server's own marks, attached by --pid: one span per request it answered, on its
    worker threads, returning the HTTP status httpload saw."""
    srv, url = server
    tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.pid), "--events", "spans",
                            "--span", f"usdt:{SERVER}:orders:request")
    load = subprocess.run(load_args(url, "pool", 300) + ["--out", str(tmp_path / "load")],
                          capture_output=True, text=True, timeout=60)
    assert load.returncode == 0, load.stderr
    tt.terminate()
    _, err = tt.communicate(timeout=60)
    assert tt.returncode == 0, head + err
    s = spans(tmp_path)
    req = read_records(tmp_path / "load" / "requests.bin", load_schema(tmp_path / "load"),
                       "request")
    assert len(s) == len(req) == 300
    assert sorted(s["ret"].tolist()) == sorted(req["status"].tolist())
    assert (s["pid"] == srv.pid).all()
    assert (s["t_end_ns"] >= s["t_start_ns"]).all()


def orders_with_trace_contexts(port: int, n: int) -> list[tuple[str, str, str]]:
    """n GET /health requests to orders-server on one connection with the trace-context
    headers of trace_context_head, each answered (200) before the next: (kind, trace id,
    parent id) of each."""
    sent = []
    with socket.create_connection(("127.0.0.1", port)) as sk:
        for i in range(n):
            kind, trace, parent, head = trace_context_head(i)
            sk.sendall(f"GET /health HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode())
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += sk.recv(65536)
            answer, body = buf.split(b"\r\n\r\n", 1)
            assert answer.startswith(b"HTTP/1.1 200"), answer
            size = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < size:
                body += sk.recv(65536)
            sent.append((kind, trace, parent))
    return sent


# orders-server's end probes and the arguments holding the request's traceparent and
# tracestate values: request__span(conn, t_start_ns, status, traceparent, tracestate), and
# request__done(conn, status, traceparent, tracestate) of the pair
CONTEXT_ARGS = {"request": (3, 4), "request__start,request__done": (2, 3)}


def usdt_context_run(tmp_path, name: str, n: int = 40, timeout: float = 60) -> tuple[list, str]:
    """orders-server traced by pid with --span usdt:...:NAME,traceparent=argN,tracestate=argM
    (CONTEXT_ARGS) while orders_with_trace_contexts sends it n requests: what that returned,
    and what tailtrace said."""
    srv = Server("--workers", "2")
    parent, state = CONTEXT_ARGS[name]
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.pid), "--events", "spans", "--span",
                                f"usdt:{SERVER}:orders:{name},traceparent=arg{parent},"
                                f"tracestate=arg{state}")
        sent = orders_with_trace_contexts(srv.port, n)
        time.sleep(0.2)
        tt.terminate()
        _, err = tt.communicate(timeout=timeout)
        assert tt.returncode == 0, head + err
    finally:
        srv.stop()
    return sent, head + err


@pytest.mark.parametrize("name", list(CONTEXT_ARGS))
def test_orders_servers_trace_context_arguments_put_its_spans_in_the_callers_traces(
        tmp_path, name):
    """orders-server passes each request's traceparent and tracestate values (NULL without)
    to its end probes (CONTEXT_ARGS). 40 requests, a quarter each valid, valid with a
    tracestate longer than kept, malformed, and without: the valid ones' spans are in their
    callers' traces with their tracestates, the malformed counted and ignored, no later
    header's bytes in the run's files (the same oracle as the tcp:PORT spans')."""
    sent, said = usdt_context_run(tmp_path, name)
    parent, state = CONTEXT_ARGS[name]
    assert f"the caller's traceparent from arg{parent}, its tracestate from arg{state}" in said
    got = check_trace_contexts(tmp_path, sent)
    assert got == {"requests": 40, "in_callers_traces": 20}
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["trace_contexts"]["requests"] == 40
    usdt = meta["span_sites"][0]["usdt"]
    assert (usdt["traceparent_arg"], usdt["tracestate_arg"]) == (parent, state)


@pytest.mark.parametrize("spec,said", [
    ("request,traceparent=arg12", "expected traceparent=argN or tracestate=argN with N 0..11"),
    ("request,traceparent=3", "expected traceparent=argN or tracestate=argN"),
    ("request,parent=arg3", "'parent=arg3': expected traceparent=argN"),
    ("request,tracestate=arg4", "tracestate=argN needs traceparent=argM beside it"),
    ("request,traceparent=arg3,tracestate=arg3", "name the same argument"),
    ("request,traceparent=arg5", "traceparent=arg5, but request__span has 5 arguments (arg0..arg4)"),
    ("request,traceparent=arg1",
     "arg0..arg2 of request__span are the span's own (request id, start time, return value)"),
    ("request__start,request__done,traceparent=arg1",
     "arg0..arg1 of request__done are the span's own (request id, return value)")])
def test_a_bad_trace_context_argument_is_refused_in_one_line(tmp_path, spec, said):
    p = tailtrace(tmp_path, "--events", "spans", "--span", f"usdt:{SERVER}:orders:{spec}",
                  "--", str(SERVER), "--help")
    expect_error(p, said)


def test_unknown_usdt_names_list_the_providers_probes(tmp_path):
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{HTTPLOAD}:httpload:reqest", "--", str(HTTPLOAD), "--help")
    expect_error(p, "no start or end probe (tried reqest__start", "provider httpload has:",
                 "request__start")
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{HTTPLOAD}:nosuch:request", "--", str(HTTPLOAD), "--help")
    expect_error(p, "has no USDT probes of provider 'nosuch'", "readelf -n")
    p = tailtrace(tmp_path, "--events", "spans", "--span", "usdt:httpload:request")
    expect_error(p, "expected usdt:BIN:PROVIDER:NAME")


TARGET = BUILD / "tests" / "probes" / "span_target"


def test_explicit_start_end_names_and_return_argument(tmp_path):
    """START,END names; work__done's second argument (tt_span_work's 2i+1) is the return."""
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{TARGET}:span_target:work__start,work__done", "--",
                  str(TARGET), "work", "300", "0")
    assert p.returncode == 0, p.stderr
    s = spans(tmp_path)
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(300)]


def test_marks_open_at_once_beyond_the_slot_table_all_pair(tmp_path):
    """20,000 requests open at once (the probe keeps 16,384 slots, the rest in a hash), half
    of them ended by another thread: every start pairs with its own end, by its argument."""
    n = 20_000
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{TARGET}:span_target:work", "--", str(TARGET), "overlap", str(n))
    assert p.returncode == 0, p.stderr
    s = spans(tmp_path)
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(n)]
    assert (s["t_end_ns"] >= s["t_start_ns"]).all()
    cross = s[s["tid"] != s["end_tid"]]
    assert len(cross) == n // 2, len(cross)


def test_more_open_marks_than_the_tables_hold_are_each_written_or_counted(tmp_path):
    """50,000 requests open at once: the slots (16,384, by a hash of the request: some
    collide) and the hash map (16,384) keep at most 32,768; every request is a span written
    or one counted refused in meta.json, none lost unsaid."""
    n = 50_000
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{TARGET}:span_target:work", "--", str(TARGET), "overlap", str(n))
    assert p.returncode == 0, p.stderr
    m = json.loads((tmp_path / "meta.json").read_text())
    written, refused = len(spans(tmp_path)), m["spans_state_full"]
    assert written + refused == n and 16384 <= written <= 32768, (written, refused)
    assert m["map_full"]["open_marks"]["refused"] == refused, m["map_full"]
    assert f"{refused} spans not recorded" in p.stderr
    assert m["lost_events"]["spans"] == 0


def test_one_mark_spans_take_their_start_from_the_argument(tmp_path):
    """once__span(i, t_start_ns, 2i+1) after each 300 us call: 200 spans of >= 300 us returning
    2i+1; 2 x 30 marks whose start is 0 or in the future are dropped and said to be."""
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{TARGET}:span_target:once", "--", str(TARGET), "once", "200", "300", "30")
    assert p.returncode == 0, p.stderr
    assert "one mark carrying the start" in p.stderr
    assert "60 one-mark spans dropped" in p.stderr
    s = spans(tmp_path)
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(200)]
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert (dur >= 300_000).all() and np.median(dur) < 100 * MS


def test_trace_context_arguments_null_or_unreadable_are_counted(tmp_path):
    """60 marks context__span(i, t_start_ns, 2i+1, traceparent, tracestate), by turns with
    the i-th trace context, NULL and pointers to no memory: 60 spans; the 20 valid ones in
    the i-th trace under parent 2i+1 with tracestate k=vi; the 20 unreadable counted unread,
    the 20 NULL ones without a context, like a request without the header."""
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{TARGET}:span_target:context,traceparent=arg3,tracestate=arg4",
                  "--", str(TARGET), "context", "60")
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "meta.json").read_text())["trace_contexts"]
    assert meta == {"requests": 60, "traceparent": 20, "tracestate": 20, "unread": 20,
                    "traceresponse": 0, "answers_unread": 0, "answers_not_http": 0,
                    "written": 20}, meta
    from analyze.load.load import load_run
    req = load_run(tmp_path).requests.sort_values("ret")
    assert sorted(req["ret"].tolist()) == [2 * i + 1 for i in range(60)]
    ok = req[req["trace_context"] == "ok"]
    assert [int(r, 16) for r in ok["trace_id"]] == [i + 1 for i in range(0, 60, 3)]
    assert [int(r, 16) for r in ok["parent_span_id"]] == [2 * i + 1 for i in range(0, 60, 3)]
    assert ok["trace_state"].tolist() == [f"k=v{i}" for i in range(0, 60, 3)]
    assert (req["trace_context"] != "malformed").all()


def test_probes_without_arguments_pair_by_thread(tmp_path):
    """spin_begin/spin_end carry no argument: each begin pairs with the next end of its
    thread, and each span lasts at least the 200 us the call spins."""
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{TARGET}:span_target:spin", "--", str(TARGET), "spin", "50", "200")
    assert p.returncode == 0, p.stderr
    assert "paired by thread" in p.stderr
    s = spans(tmp_path)
    assert len(s) == 50 and (s["ret"] == 0).all()
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert (dur >= 200_000).all() and (dur < 200 * MS).all()
