"""How a value is written for people: the one place a number, a duration, a share or a
meta value becomes text, for summary.json's sentences (words.py), the CLI text
(__main__.py), report.html (html.py), compare and sweep tables (compare.py, sweep.py) and
captures.html (captures.py).

dur(ms) writes a duration in a sentence ('3.4 ms', '33 µs'); the fmt_* functions write a
table cell, "–" when the value is missing. Request-section durations (fmt_ms, U()) are in ms,
or in µs inside `with request_unit(summary)` for a run whose P99 end to end is under 1 ms.
"""
from __future__ import annotations

import math
import shlex
from contextlib import contextmanager


def dur(ms: float) -> str:
    """A duration given in ms, in the unit that shows it: '3.4 ms', '33 µs', '2.1 µs'."""
    a = abs(ms)
    if a >= 0.9995 or a == 0:
        return f"{ms:.1f} ms"
    us = ms * 1e3
    return f"{us:.0f} µs" if abs(us) >= 9.95 else f"{us:.1f} µs"


def num_or_none(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


# The unit of the request sections (latencies, bands, critical path): ms, or µs when the
# run's P99 end to end is under a millisecond (Redis' commands take about one µs: 0.001 ms
# says nothing). request_unit sets it (render_report); whole-run tables (threads, locks,
# waits) stay in ms.
_REQ_UNIT = {"name": "ms", "scale": 1.0}


def req_unit_for(summary: dict) -> tuple[str, float]:
    """('µs', 1000.0) when the run's P99 end to end is under 1 ms, else ('ms', 1.0)."""
    p99 = num_or_none((summary.get("e2e_ms") or {}).get("p99"))
    return ("µs", 1e3) if p99 is not None and p99 < 1 else ("ms", 1.0)


def U() -> str:
    """The request sections' unit name."""
    return _REQ_UNIT["name"]


@contextmanager
def request_unit(summary: dict):
    """Within it, fmt_ms and U() write the request sections in the run's unit
    (req_unit_for(summary)); ms again after it."""
    _REQ_UNIT["name"], _REQ_UNIT["scale"] = req_unit_for(summary)
    try:
        yield
    finally:
        _REQ_UNIT["name"], _REQ_UNIT["scale"] = "ms", 1.0


def _fmt_num(f: float) -> str:
    return f"{f:,.3f}" if abs(f) < 10 else f"{f:,.1f}" if abs(f) < 1000 else f"{f:,.0f}"


def fmt_ms(v) -> str:
    """A request-section duration given in ms, in the report's unit (U())."""
    f = num_or_none(v)
    return "–" if f is None else _fmt_num(f * _REQ_UNIT["scale"])


def fmt_run_ms(v) -> str:
    """A whole-run duration in ms, always."""
    f = num_or_none(v)
    return "–" if f is None else _fmt_num(f)


def fmt_ns_ms(v) -> str:
    f = num_or_none(v)
    return "–" if f is None else fmt_run_ms(f / 1e6)


def fmt_share(v) -> str:
    f = num_or_none(v)
    return "–" if f is None else f"{f * 100:.0f}%" if abs(f) >= 0.01 or f == 0 else f"{f * 100:.1f}%"


def fmt_fixed(v, spec: str, per: float = 1) -> str:
    """v / per with a format spec ('.2f'; ',.3f' and per=1e6: ns as ms), "–" when missing."""
    f = num_or_none(v)
    return "–" if f is None else format(f / per, spec)


def fmt_int(v) -> str:
    f = num_or_none(v)
    return "–" if f is None else f"{int(round(f)):,}"


def fmt_errors(v) -> str:
    """Error count; None (requests from spans, or none) is 'n/a', never a count."""
    return "n/a" if num_or_none(v) is None else fmt_int(v)


def fmt_text(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def fmt_stack(v) -> list:
    """'a;b;c' frames (leaf first) as a list, for one frame per line."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
        return ["–"]
    return str(v).split(";")


def fmt_us(v) -> str:
    f = num_or_none(v)
    return "–" if f is None else f"{f:,.1f} µs"


def fmt_value(v) -> str:
    """A meta/workload value for people: argv lists shell-quoted, dicts as k=v."""
    if isinstance(v, (list, tuple)):
        return shlex.join(str(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt_value(x)}" for k, x in v.items()
                         if x not in (None, "", [], {}))
    return fmt_text(v)


def fmt_hex(v) -> str:
    f = num_or_none(v)
    return fmt_text(v) if f is None else f"0x{int(f):x}"


def cost_words(c: dict | None) -> str | None:
    """summary.json tailtrace_cost as one line: "4.0 % of the machine: BPF 284.6 ms (1.25 µs an
    event, 2.57 µs a request, statistics on 11 % of the time), loader 44.8 ms CPU; most BPF
    time: sched_switch_btf (tp_btf/sched_switch) 1,037 ns a run (20,655 runs measured), 84 %
    ...": runs measured are those while the statistics were on. None without it."""
    if not c:
        return None
    share = num_or_none(c.get("share_of_machine"))
    head = f"{share * 100:.1f} % of the machine: " if share is not None else ""
    per = [f"{v:,.{2 if v < 100 else 0}f} µs {art} {k}"
           for art, k, v in (("an", "event", num_or_none(c.get("bpf_us_per_event"))),
                             ("a", "request", num_or_none(c.get("bpf_us_per_request"))))
           if v is not None]
    if (sampled := num_or_none(c.get("sampled"))) is not None:
        per.append(f"statistics on {sampled * 100:.0f} % of the time")
    text = (f"{head}BPF {c.get('bpf_ms', 0):.1f} ms" + (f" ({', '.join(per)})" if per else "")
            + f", loader {c.get('loader_cpu_ms', 0):.1f} ms CPU")
    progs = [f"{q['name']} ({q.get('section') or '?'}) {q['ns_per_run']:,.0f} ns a run "
             f"({q['runs']:,} runs measured)"
             + (f", {q['share'] * 100:.0f} %" if q.get("share") is not None else "")
             for q in c.get("programs") or []]
    return text + ("; most BPF time: " + "; ".join(progs) if progs else "")
