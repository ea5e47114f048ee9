"""The W3C traceparent a request carried and the traceresponse its answer carried
(analyze/load/trace_context.py): parsed exactly, anything malformed refused
(https://www.w3.org/TR/trace-context/#traceparent-header); the span under the server's span
when the answer names it, else the caller's (analyze/render/otlp.py)."""
import numpy as np
import pandas as pd
import pytest

from analyze.load.trace_context import (TRACESTATE_KEPT, df_request_contexts,
                                        parse_traceparent, parse_tracestate)

TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"


@pytest.mark.parametrize("raw,want", [
    (VALID.encode() + b"\r\nAccept: */*\r\n", (TRACE, PARENT, 1)),   # ends at the line's end
    (f"  {VALID}\t\r\n".encode(), (TRACE, PARENT, 1)),               # blanks around it
    (f"00-{TRACE}-{PARENT}-00".encode() + b"\0" * 9, (TRACE, PARENT, 0)),  # NUL-padded
    (f"cc-{TRACE}-{PARENT}-01-what-comes-next".encode(), (TRACE, PARENT, 1)),  # a later version
])
def test_a_valid_traceparent_gives_its_ids_and_flags(raw, want):
    assert parse_traceparent(raw) == want


@pytest.mark.parametrize("raw,why", [
    (f"ff-{TRACE}-{PARENT}-01", "version ff is invalid"),
    (f"00-{TRACE.upper()}-{PARENT}-01", "upper-case hex"),
    (f"00-{'0' * 32}-{PARENT}-01", "a trace id of zeros"),
    (f"00-{TRACE}-{'0' * 16}-01", "a parent id of zeros"),
    (f"00-{TRACE}-{PARENT}-01-x", "version 00 is exactly 55 characters"),
    (f"00-{TRACE[:-1]}-{PARENT}-01", "a short trace id"),
    (f"00-{TRACE}-{PARENT}-0", "short flags"),
    (f"00_{TRACE}_{PARENT}_01", "not dash-separated"),
    (f"cc-{TRACE}-{PARENT}-01x", "a later version goes on after a dash only"),
    (f"00-{'g' * 32}-{PARENT}-01", "not hex"),
    ("", "empty"), ("?", "found without a value"),
])
def test_a_malformed_traceparent_is_refused(raw, why):
    assert parse_traceparent(raw.encode()) is None, why


def test_each_request_gets_its_spans_context_by_row():
    """Spans at rows 7, 3, 5 of spans.bin are the requests 0, 1, 2: row 3 carried a valid
    header, row 5 a malformed one, row 7 none; a context of a row no request has is left."""
    ctx = pd.DataFrame({"span_row": [3, 5, 9],
                        "traceparent": [VALID.encode(), b"00-nope", VALID.encode()]})
    d = df_request_contexts(ctx, np.array([7, 3, 5]))
    assert d["trace_context"].astype(str).tolist() == ["none", "ok", "malformed"]
    assert d["trace_id"].tolist() == ["", TRACE, ""]
    assert d["parent_span_id"].tolist() == ["", PARENT, ""]
    assert d["trace_flags"].tolist() == [0, 1, 0]


SERVER = "a3ce929d0e0e4736"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"


def contexts_of_answers() -> pd.DataFrame:
    """Four requests (span rows 0-3): a traceparent and a traceresponse in its trace; a
    traceresponse alone, starting a trace; a traceparent and a malformed traceresponse; a
    traceparent alone."""
    return pd.DataFrame({
        "span_row": [0, 1, 2, 3],
        "traceparent": [VALID.encode(), b"", VALID.encode(), VALID.encode()],
        "traceresponse": [f"00-{TRACE}-{SERVER}-01".encode(),
                          f"00-{OTHER_TRACE}-{SERVER}-00\0\0".encode(), b"00-zz", b""]})


def test_an_answers_traceresponse_names_the_servers_span():
    d = df_request_contexts(contexts_of_answers(), np.arange(4))
    assert d["trace_context"].astype(str).tolist() == ["ok", "none", "ok", "ok"]
    assert d["service_context"].astype(str).tolist() == ["ok", "ok", "malformed", "none"]
    assert d["service_trace_id"].tolist() == [TRACE, OTHER_TRACE, "", ""]
    assert d["service_span_id"].tolist() == [SERVER, SERVER, "", ""]


def test_the_span_goes_under_the_servers_span_else_the_callers():
    """The OTLP join: a valid traceresponse wins (its trace, the server's span as parent),
    else a valid traceparent (the caller's span), else the request's own ids stay."""
    from types import SimpleNamespace

    from analyze.render.otlp import _join_callers

    req = df_request_contexts(contexts_of_answers(), np.arange(4)).assign(id=np.arange(4))
    own = [bytes([i]) * 16 for i in range(4)]
    d = pd.DataFrame({"id": np.arange(4), "trace_id": own, "parent_span_id": [b""] * 4})
    _join_callers(SimpleNamespace(requests=req), d)
    assert [t.hex() for t in d["trace_id"]] == [TRACE, OTHER_TRACE, TRACE, TRACE]
    assert [p.hex() for p in d["parent_span_id"]] == [SERVER, SERVER, PARENT, PARENT]
    assert d["under_service_span"].tolist() == [True, True, False, False]


def test_the_summary_counts_each_requests_context_and_the_kernels_unread_and_not_http():
    """summary.json trace_context: the requests' states as loaded, with the kernel's counts
    from meta.json (answers read but not HTTP apart from answers never read)."""
    from types import SimpleNamespace

    from analyze.render.summary import trace_context_summary

    req = pd.DataFrame({"trace_context": pd.Categorical(["ok", "ok", "malformed", "none"]),
                        "service_context": pd.Categorical(["ok", "none", "none", "none"])})
    meta = {"trace_contexts": {"unread": 1, "answers_unread": 2, "answers_not_http": 3}}
    got = trace_context_summary(SimpleNamespace(requests=req, meta=meta))
    assert got == {"ok": 2, "malformed": 1, "none": 1, "unread": 1,
                   "service": {"ok": 1, "malformed": 0, "none": 3, "unread": 2, "not_http": 3}}


def test_a_captures_contexts_find_their_spans_by_thread_start_and_end():
    """A capture's contexts carry the recorder's rows, not the capture's: they are joined by
    (tid, t_start_ns, t_end_ns). Requests 0-2 are spans of threads 11, 12, 11; the contexts
    name request 2 (valid), request 0 (malformed) and a span the capture does not hold."""
    spans = pd.DataFrame({"tid": [11, 12, 11], "t_start_ns": [100, 150, 300],
                          "t_end_ns": [200, 250, 400]})
    ctx = pd.DataFrame({"span_row": [70, 50, 90], "tid": [11, 11, 12],
                        "t_start_ns": [300, 100, 150], "t_end_ns": [400, 200, 999],
                        "traceparent": [VALID.encode(), b"00-nope", VALID.encode()]})
    d = df_request_contexts(ctx, np.array([5, 6, 7]), spans)
    assert d["trace_context"].astype(str).tolist() == ["malformed", "none", "ok"]
    assert d["trace_id"].tolist() == ["", "", TRACE]


# ---- the tracestate beside a traceparent (https://www.w3.org/TR/trace-context/#tracestate-header)

STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


@pytest.mark.parametrize("raw,want", [
    (STATE.encode() + b"\r\nAccept: */*\r\n", STATE),                 # ends at the line's end
    (b" congo=t61rcWkgMzE ,\t, rojo=00f067aa0ba902b7\0\0", STATE),    # blanks, an empty member
    (b"fw529a3039@dt=abc, k/1_-*=a b", "fw529a3039@dt=abc,k/1_-*=a b"),  # tenant@system; a blank
    (",".join(f"k{i}=v" for i in range(32)).encode(), ",".join(f"k{i}=v" for i in range(32))),
])
def test_a_valid_tracestate_gives_its_members(raw, want):
    assert parse_tracestate(raw) == want


@pytest.mark.parametrize("raw,why", [
    ("congo", "no ="), ("Congo=1", "an upper-case key"), ("1congo=1", "a key starts a-z"),
    ("congo=a,b", "a member without ="), ("congo=1,congo=2", "a key twice"),
    ("congo=a=b", "= in a value"), ("congo=1 ", "a value ends in a blank: taken off, fine"),
    (",".join(f"k{i}=v" for i in range(33)), "33 members"), ("", "empty"), (" , ", "no member"),
    ("congo=" + "x" * 257, "a value of 257 characters"),
])
def test_a_malformed_tracestate_is_refused(raw, why):
    if why.endswith("fine"):
        assert parse_tracestate(raw) == "congo=1"
    else:
        assert parse_tracestate(raw) is None, why


def test_a_tracestate_the_kernel_cut_loses_its_last_member():
    """The kernel keeps TRACESTATE_KEPT bytes: a longer value ends mid-member, and that member
    goes, as the W3C shortens a tracestate; one that ended within them keeps all of its own."""
    members = [f"k{i}={'v' * 40}" for i in range(14)]   # 43 or 44 characters each
    whole = ",".join(members)
    assert len(whole) > TRACESTATE_KEPT
    kept = whole[:TRACESTATE_KEPT].encode()
    assert parse_tracestate(kept) == ",".join(members[:11])  # the 12th starts at 486
    assert parse_tracestate(",".join(members[:11]).encode() + b"\r\n") == ",".join(members[:11])


def test_a_tracestate_counts_only_beside_a_valid_traceparent():
    """Rows 0-3: a valid traceparent with a valid tracestate, with a malformed one, with none;
    a malformed traceparent with a valid tracestate, which is never read (the W3C: no
    tracestate without a traceparent)."""
    ctx = pd.DataFrame({"span_row": [0, 1, 2, 3],
                        "traceparent": [VALID.encode()] * 3 + [b"00-nope"],
                        "tracestate": [STATE.encode(), b"Bad", b"", STATE.encode()]})
    d = df_request_contexts(ctx, np.arange(4))
    assert d["trace_state_context"].astype(str).tolist() == ["ok", "malformed", "none", "none"]
    assert d["trace_state"].tolist() == [STATE, "", "", ""]


def test_a_span_in_the_callers_trace_carries_its_tracestate_under_the_servers_none():
    """The OTLP join: the caller's tracestate goes with a span in the caller's trace, not
    with one under the server's own span (whose tracestate the answer does not say)."""
    from types import SimpleNamespace

    from analyze.render.otlp import _join_callers

    ctx = contexts_of_answers().assign(tracestate=[STATE.encode()] * 4)
    req = df_request_contexts(ctx, np.arange(4)).assign(id=np.arange(4))
    d = pd.DataFrame({"id": np.arange(4), "trace_id": [bytes([i]) * 16 for i in range(4)],
                      "parent_span_id": [b""] * 4, "trace_state": [""] * 4})
    _join_callers(SimpleNamespace(requests=req), d)
    assert d["trace_state"].tolist() == ["", "", STATE, STATE]


def test_the_summary_counts_the_tracestates_beside_valid_traceparents():
    from types import SimpleNamespace

    from analyze.render.summary import trace_context_summary

    req = pd.DataFrame({"trace_context": pd.Categorical(["ok", "ok", "ok", "malformed"]),
                        "trace_state_context": pd.Categorical(["ok", "malformed", "none",
                                                               "none"])})
    meta = {"trace_contexts": {"tracestate": 3}}
    got = trace_context_summary(SimpleNamespace(requests=req, meta=meta))
    assert got["tracestate"] == {"ok": 1, "malformed": 1, "read": 3}
