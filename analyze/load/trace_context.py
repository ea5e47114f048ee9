"""The W3C trace context a request carried (https://www.w3.org/TR/trace-context/): the
traceparent header tailtrace read from a tcp:PORT request's first bytes
(probes/spans/spans.bpf.c tcp_read, span_contexts.bin), parsed and checked here, never trusted
as it came.

parse_traceparent(value) -> (trace_id, parent_id, flags) as lowercase hex and an int, or None
    for a malformed value: the version not two hex digits or "ff"; version 00 not exactly
    "00-" 32 hex "-" 16 hex "-" 2 hex; a later version shorter, or longer without a "-" after
    the flags; ids of zeros; upper-case hex. The value ends at the line's end; blanks around
    it are not part of it.
df_request_contexts(spans, contexts, rows) -> per request (rows: its span's row of spans.bin)
    columns trace_id, parent_span_id (hex, "" without a valid header), trace_flags (int) and
    trace_context (categorical CONTEXT_STATES: none, ok, malformed).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

CONTEXT_STATES = ["none", "ok", "malformed"]
_HEX = re.compile(r"[0-9a-f]+")


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


def df_request_contexts(contexts: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The trace context of each request whose span is at rows[i] of spans.bin (module doc)."""
    n = len(rows)
    trace, parent = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    flags, state = np.zeros(n, np.int64), np.zeros(n, np.int8)
    if contexts is not None and len(contexts):
        at = pd.Series(np.arange(n), index=np.asarray(rows, np.int64))
        for row, value in zip(contexts["span_row"].to_numpy(), contexts["traceparent"]):
            i = at.get(int(row))
            if i is None:
                continue
            got = parse_traceparent(value)
            if got is None:
                state[i] = CONTEXT_STATES.index("malformed")
                continue
            trace[i], parent[i], flags[i] = got
            state[i] = CONTEXT_STATES.index("ok")
    return pd.DataFrame({"trace_id": trace, "parent_span_id": parent, "trace_flags": flags,
                         "trace_context": pd.Categorical.from_codes(state, CONTEXT_STATES)})
