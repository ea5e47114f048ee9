"""The W3C trace context a request carried (https://www.w3.org/TR/trace-context/): the
traceparent header tailtrace read from a tcp:PORT request's first bytes
(probes/spans/spans.bpf.c tcp_read, span_contexts.bin) or that a USDT end's argument pointed
to (usdt_emit), and the traceresponse header of its
answer (Trace Context Level 2, https://www.w3.org/TR/trace-context-2/: the server's own span,
sent by tracing that offers it; tcp_answer_read), parsed and checked here, never trusted as
they came.

parse_traceparent(value) -> (trace_id, parent_id, flags) as lowercase hex and an int, or None
    for a malformed value: the version not two hex digits or "ff"; version 00 not exactly
    "00-" 32 hex "-" 16 hex "-" 2 hex; a later version shorter, or longer without a "-" after
    the flags; ids of zeros; upper-case hex. The value ends at the line's end; blanks around
    it are not part of it. A traceresponse has the same form: its parent id is the
    server's span.
parse_tracestate(value) -> the tracestate header's list, its members joined by "," (blanks
    and empty members dropped), or None for a malformed one: a member not key=value with the
    key and value the W3C allows, a key twice, more than 32 members, none. A value the
    kernel cut (TRACESTATE_KEPT bytes, no line end) loses its last member, which may be
    cut: the W3C's own way to shorten a tracestate.
df_request_contexts(contexts, rows, spans) -> per request (rows: its span's row of spans.bin;
    spans: those rows, whose thread, start and end the contexts name)
    columns trace_id, parent_span_id (hex, "" without a valid header), trace_flags (int) and
    trace_context (categorical CONTEXT_STATES: none, ok, malformed): the caller's, from the
    traceparent; trace_state (str, "" without) and trace_state_context (the same
    categories; "none" where the traceparent is not valid: a tracestate is never read
    without one); service_trace_id, service_span_id (hex, "") and service_context (the same
    categories): the server's own span, from the traceresponse.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

CONTEXT_STATES = ["none", "ok", "malformed"]
_HEX = re.compile(r"[0-9a-f]+")
# The bytes of a tracestate value the kernel keeps (probes/spans/spans.h
# SPANS_TRACESTATE_BYTES, less its NUL): one this long may have been cut.
TRACESTATE_KEPT = 511
TRACESTATE_MEMBERS = 32
_KEY_CHARS = r"[a-z0-9_\-*/]"
_TRACESTATE_KEY = re.compile(rf"[a-z]{_KEY_CHARS}{{0,255}}"
                             rf"|[a-z0-9]{_KEY_CHARS}{{0,240}}@[a-z]{_KEY_CHARS}{{0,13}}")
_TRACESTATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}"
                               r"[\x21-\x2b\x2d-\x3c\x3e-\x7e]")


def _hex(s: str, n: int) -> bool:
    return len(s) == n and _HEX.fullmatch(s) is not None


def parse_traceparent(value: bytes | str) -> tuple[str, str, int] | None:
    """(trace_id, parent_id, flags) of a traceparent header's value, or None (module doc)."""
    if isinstance(value, bytes):
        value = value.split(b"\0", 1)[0].decode("ascii", "replace")
    value = re.split(r"[\r\n]", value, maxsplit=1)[0].strip(" \t")
    version = value[:2]
    if not _hex(version, 2) or version == "ff" or value[2:3] != "-":
        return None
    if version == "00" and len(value) != 55:
        return None
    if len(value) < 55 or (len(value) > 55 and value[55] != "-"):
        return None
    trace_id, parent, flags = value[3:35], value[36:52], value[53:55]
    if value[35] != "-" or value[52] != "-" or not (_hex(trace_id, 32) and _hex(parent, 16)
                                                    and _hex(flags, 2)):
        return None
    if trace_id == "0" * 32 or parent == "0" * 16:
        return None
    return trace_id, parent, int(flags, 16)


def parse_tracestate(value: bytes | str) -> str | None:
    """The tracestate list, or None for a malformed one (module doc)."""
    if isinstance(value, bytes):
        value = value.split(b"\0", 1)[0].decode("latin-1")
    text = re.split(r"[\r\n]", value, maxsplit=1)[0]
    members = text.split(",")
    if len(text) >= TRACESTATE_KEPT:
        members = members[:-1]  # cut by the kernel: its last member may be part of one
    kept, keys = [], set()
    for m in members:
        m = m.strip(" \t")
        if not m:
            continue
        key, eq, val = m.partition("=")
        if not eq or not _TRACESTATE_KEY.fullmatch(key) or \
                not _TRACESTATE_VALUE.fullmatch(val) or key in keys:
            return None
        keys.add(key)
        kept.append(m)
    if not kept or len(kept) > TRACESTATE_MEMBERS:
        return None
    return ",".join(kept)


def _parse_states(values, pos: np.ndarray, caller_ok: np.ndarray):
    """Each request's tracestate (str) and its state, read only where its traceparent is
    valid (caller_ok)."""
    n = len(caller_ok)
    state, code = np.full(n, "", dtype=object), np.zeros(n, np.int8)
    for i, value in zip(pos, values):
        if i < 0 or not caller_ok[i] or not value.split(b"\0", 1)[0]:
            continue
        got = parse_tracestate(value)
        code[i] = CONTEXT_STATES.index("malformed" if got is None else "ok")
        state[i] = got or ""
    return state, pd.Categorical.from_codes(code, CONTEXT_STATES)


def _parse_column(values, pos: np.ndarray, n: int):
    """Each request's (trace id, span id, flags, state) from one header column (pos[k]: the
    request of its k-th value, -1 none): "" and "none" where its span has no value,
    "malformed" where parse_traceparent refuses it."""
    trace, span = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    flags, state = np.zeros(n, np.int64), np.zeros(n, np.int8)
    for i, value in zip(pos, values):
        if i < 0 or not value.split(b"\0", 1)[0]:
            continue
        got = parse_traceparent(value)
        if got is None:
            state[i] = CONTEXT_STATES.index("malformed")
            continue
        trace[i], span[i], flags[i] = got
        state[i] = CONTEXT_STATES.index("ok")
    return trace, span, flags, pd.Categorical.from_codes(state, CONTEXT_STATES)


def _request_of(contexts: pd.DataFrame, rows: np.ndarray, spans: pd.DataFrame | None):
    """For each context, the request (its position in rows) whose span it names: by the
    span's thread, start and end where the contexts say them (a flight-recorder capture
    keeps some of the recorder's spans, so its rows are not the recorder's), else by row."""
    if spans is not None and "t_end_ns" in contexts and bool((contexts["t_end_ns"] > 0).all()):
        key = ["tid", "t_start_ns", "t_end_ns"]
        at = pd.DataFrame({k: spans[k].to_numpy(np.int64) for k in key})
        at["pos"] = np.arange(len(at), dtype=np.int64)
        at = at.drop_duplicates(key, keep="last")  # one span a key: the last, as written
        want = pd.DataFrame({k: contexts[k].to_numpy(np.int64) for k in key})
        return want.merge(at, how="left", on=key)["pos"].fillna(-1).to_numpy(np.int64)
    at = pd.Series(np.arange(len(rows)), index=np.asarray(rows, np.int64))
    return at.reindex(contexts["span_row"].to_numpy(np.int64)).fillna(-1).to_numpy(np.int64)


def df_request_contexts(contexts: pd.DataFrame, rows: np.ndarray,
                        spans: pd.DataFrame | None = None) -> pd.DataFrame:
    """The trace context of each request whose span is at rows[i] of spans.bin (spans: those
    spans' rows, with tid, t_start_ns, t_end_ns) (module doc)."""
    n = len(rows)
    empty = contexts is None or not len(contexts)
    pos = np.zeros(0, np.int64) if empty else _request_of(contexts, rows, spans)
    cols = {}
    for header, names in (("traceparent", ("trace_id", "parent_span_id", "trace_flags",
                                           "trace_context")),
                          ("traceresponse", ("service_trace_id", "service_span_id", None,
                                             "service_context"))):
        values = [] if empty or header not in contexts else contexts[header]
        for name, col in zip(names, _parse_column(values, pos, n)):
            if name:
                cols[name] = col
    values = [] if empty or "tracestate" not in contexts else contexts["tracestate"]
    cols["trace_state"], cols["trace_state_context"] = _parse_states(
        values, pos, np.asarray(cols["trace_context"] == "ok", bool))
    return pd.DataFrame(cols)
