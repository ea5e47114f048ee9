"""The W3C traceparent a request carried (analyze/load/trace_context.py): parsed exactly,
anything malformed refused (https://www.w3.org/TR/trace-context/#traceparent-header)."""
import numpy as np
import pandas as pd
import pytest

from analyze.load.trace_context import df_request_contexts, parse_traceparent

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
