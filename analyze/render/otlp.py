"""OTLP traces of a run: one span per traced request carrying its breakdown, a child span per
wait on its critical path, a link to the request of the thread that woke it. Sent over
OTLP/HTTP (protobuf) to a collector, Jaeger or Tempo, or written as OTLP/JSON lines.
docs/export.md maps each field.

df_request_spans -> one row per decomposed request: trace_id, span_id (16 and 8 bytes, from
                    the run and the request: a re-export sends the same ids; a request that
                    carried a valid W3C traceparent takes its trace id, and its span id as
                    parent_span_id: the span sits in the caller's trace, with the
                    caller's valid tracestate as its trace_state; one whose answer carried
                    a valid traceresponse sits under that span, the server's own:
                    under_service_span, no trace_state), t_start_ns,
                    t_end_ns (the span: enqueue to end, so the parts add up to it), the
                    parts (decompose.PARTS, ns), band, cause (the largest part, in words),
                    antagonist and antagonist_ns (who held the CPU longest while it was
                    runnable), waker and longest_wait_ns (who ended its longest wait;
                    waker_tid and t_wake_ns: that thread and when, for the link).
df_wait_spans    -> one row per wait on a request's critical path (critpath segments):
                    request (row of df_request_spans), parent span, span_id, its times,
                    reason, call, object, frame, waker thread and process, verdict.
request_batches  -> ExportTraceServiceRequest messages of at most `batch` spans.
otlp_json        -> one message as OTLP/JSON (the OTLP specification's JSON encoding).
export_otlp      -> send them (retries with backoff) or write them; returns counts.
"""
from __future__ import annotations

import base64
import hashlib
import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

from ..explain.antagonists import df_request_antagonists, process_table
from ..explain.attribute import GROUPS, band_of
from ..explain.decompose import PARTS, decomposed
from ..explain.waits import caller_of, wait_object
from ..load.errors import AnalysisError, ExportError
from ..load.load import thread_names, wall_start_ns

DEFAULT_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
BATCH_SPANS = 1000
MAX_WAITS = 32            # child spans per request: its longest waits on the critical path
RETRY_S = (0.5, 1.0, 2.0, 4.0)
RETRY_STATUS = {429, 502, 503, 504}
SCOPE = "tailtrace"


def _id(key: str, n: int) -> bytes:
    return hashlib.sha256(key.encode()).digest()[:n]


def run_key(meta: dict) -> str:
    """What makes a run's ids its own: its start on both clocks and its command."""
    return json.dumps([meta.get("wall_start"), meta.get("mono_start_ns"), meta.get("command")])


def wall_offset_ns(meta: dict) -> int:
    """Add to a CLOCK_MONOTONIC time of the run to get Unix time (ns)."""
    wall, mono = wall_start_ns(meta), meta.get("mono_start_ns")
    if not wall or not isinstance(mono, int):
        raise AnalysisError("meta.json lacks wall_start or mono_start_ns: the spans cannot be "
                            "placed in time (re-record with this tailtrace)")
    return wall - mono


def _cause(d: pd.DataFrame) -> np.ndarray:
    """Each request's largest group of parts (attribute.GROUPS), in the headline's words."""
    cols = {g: d[c].fillna(0).sum(axis=1).to_numpy()
            for g, (c, _, _) in GROUPS.items() if all(x in d for x in c)}
    names = list(cols)
    if not names:
        return np.full(len(d), "", dtype=object)
    m = np.vstack([cols[g] for g in names])
    return np.array([GROUPS[g][1] for g in names], dtype=object)[m.argmax(axis=0)]


def df_request_spans(run, decomp: pd.DataFrame, segs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per decomposed request (module doc)."""
    d = decomp[decomposed(decomp)].copy()
    key = run_key(run.meta or {})
    ids = [f"{key}/{r.id}/{r.tid}/{r.t_start_ns}" for r in d[["id", "tid", "t_start_ns"]]
           .itertuples(index=False)]
    d["trace_id"] = [_id(k, 16) for k in ids]
    d["span_id"] = [_id(k + "/span", 8) for k in ids]
    d["parent_span_id"], d["trace_state"] = b"", ""
    _join_callers(run, d)
    d["band"] = band_of(decomp).reindex(d.index).astype(object).where(lambda s: s.notna(), "")
    d["cause"] = _cause(d)
    names = thread_names(run)
    d["thread"] = [names.get(int(t), "") for t in d["tid"]]
    d["antagonist"], d["antagonist_ns"] = "", 0
    ant = df_request_antagonists(run, decomp)
    if len(ant):
        ant = ant[ant["win"].isin(d.index) & (ant["pid"] > 0)]
        per = ant.groupby(["win", "pid"], as_index=False)["ns"].sum()
        top = per.sort_values(["win", "ns"], ascending=[True, False]).drop_duplicates("win")
        procs = dict(zip(*(process_table(run)[c].to_numpy() for c in ("pid", "comm"))))
        label = {r.win: f"{procs.get(int(r.pid), '?')} (pid {int(r.pid)})"
                 for r in top.itertuples()}
        d["antagonist"] = [label.get(i, "") for i in d.index]
        d["antagonist_ns"] = top.set_index("win")["ns"].reindex(d.index).fillna(0).astype(np.int64)
    d["ran_on"] = _ran_on(names, d)
    d["waker"], d["longest_wait_ns"], d["waker_tid"], d["t_wake_ns"] = "", 0, 0, 0
    if segs is not None and len(segs):
        own = segs[segs["depth"] == 0].assign(ns=lambda s: s["t_end_ns"] - s["t_start_ns"])
        top = own.sort_values(["request_row", "ns"], ascending=[True, False]) \
            .drop_duplicates("request_row").set_index("request_row")
        top = top.reindex(d.index)
        d["waker"] = [_who(names, w, p, c) if w == w else ""
                      for w, p, c in zip(top["waker_tid"], top["waker_pid"], top["waker_ctx"])]
        d["longest_wait_ns"] = top["ns"].fillna(0).astype(np.int64)
        d["waker_tid"] = top["waker_tid"].fillna(0).astype(np.int64)
        d["t_wake_ns"] = top["t_end_ns"].fillna(0).astype(np.int64)
    return d


def _join_callers(run, d: pd.DataFrame) -> None:
    """Requests that carried a valid traceparent (a tcp:PORT span's, trace_context.py) join
    the caller's trace: its trace id, and the caller's span as their parent. Those whose
    answer carried a valid traceresponse go under the server's own span instead, in its
    trace: the span whose time the breakdown explains. A span in the caller's trace carries
    the caller's tracestate (the W3C's: a child's is its parent's unless its own tracing
    changes it); one under the server's span carries none, the server's being unknown."""
    req = run.requests
    if "trace_context" not in req or not len(d):
        return
    cols = ["trace_id", "parent_span_id", "trace_context"] + \
        (["trace_state"] if "trace_state" in req else [])
    has_service = "service_context" in req
    if has_service:
        cols += ["service_trace_id", "service_span_id", "service_context"]
    ctx = req.set_index("id")[cols].reindex(d["id"])
    service = (ctx["service_context"] == "ok").to_numpy() if has_service \
        else np.zeros(len(d), bool)
    caller = (ctx["trace_context"] == "ok").to_numpy() & ~service
    for ok, trace, parent in ((caller, "trace_id", "parent_span_id"),
                              (service, "service_trace_id", "service_span_id")):
        if not ok.any():
            continue
        rows = d.index[ok]
        d.loc[rows, "trace_id"] = [bytes.fromhex(t) for t in ctx[trace].to_numpy()[ok]]
        d.loc[rows, "parent_span_id"] = [bytes.fromhex(p) for p in ctx[parent].to_numpy()[ok]]
    if "trace_state" in ctx and caller.any():
        d.loc[d.index[caller], "trace_state"] = ctx["trace_state"].to_numpy()[caller]
    d["under_service_span"] = False
    d.loc[d.index[service], "under_service_span"] = True


def _request_span_names(run, spans: pd.DataFrame) -> list[str]:
    """Each request span's name: `request ID` for httpload's requests; for a --span's, the
    span's name as tailtrace said it (meta.json span_sites: `tcp:8080`, `orders_handle`),
    `span` where the run does not say."""
    if run.source == "requests":
        return [f"request {int(i)}" for i in spans["id"]]
    sites = [s.get("name") or "span" for s in (run.meta or {}).get("span_sites") or []]
    conn = run.requests.set_index("id")["conn"].reindex(spans["id"]).fillna(-1).astype(int)
    return [sites[c] if 0 <= c < len(sites) else "span" for c in conn]


def _ran_on(names: dict, d: pd.DataFrame) -> list:
    """Each request's threads when part of its time ran on another thread of its process
    (handoff.py): 'worker-3 (tid 12) 85%, loop (tid 11) 15%'; '' when all of it ran on its
    own."""
    if "handoff_ns" not in d:
        return [""] * len(d)
    out = []
    for tid, lat, hand, to in zip(d["tid"], d["latency_ns"], d["handoff_ns"], d["handoff_tid"]):
        if not hand or not lat:
            out.append("")
            continue
        parts = sorted([(hand / lat, int(to)), (1 - hand / lat, int(tid))], reverse=True)
        out.append(", ".join(f"{names.get(t, '') or 'thread'} (tid {t}) {sh * 100:.0f}%"
                             for sh, t in parts if sh > 0))
    return out


def _who(names: dict, tid, pid, ctx) -> str:
    if ctx in ("hardirq", "softirq"):
        return f"an interrupt ({ctx})"
    tid = int(tid) if tid == tid else 0
    if tid <= 0:
        return "unknown"
    return f"{names.get(tid, '') or 'thread'} (tid {tid}, pid {int(pid)})"


def df_wait_spans(run, spans: pd.DataFrame, segs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per wait on a request's critical path (module doc); the MAX_WAITS longest of
    each request's own waits, and the hops under them."""
    cols = ["request", "parent", "span_id", "tid", "t_start_ns", "t_end_ns", "reason", "call",
            "object", "frame", "waker", "verdict", "depth"]
    if segs is None or not len(segs):
        return pd.DataFrame(columns=cols)
    s = segs[segs["request_row"].isin(spans.index)].copy()
    s["ns"] = s["t_end_ns"] - s["t_start_ns"]
    s["seg"] = s.index
    own = s[s["depth"] == 0].sort_values(["request_row", "ns"], ascending=[True, False])
    own = own.groupby("request_row").head(MAX_WAITS)
    s = s[s["root"].isin(own["seg"])]
    names = thread_names(run)
    req_span = spans["span_id"]
    wait_span = {i: _id(f"{spans.at[r, 'span_id'].hex()}/wait/{i}", 8)
                 for i, r in zip(s["seg"], s["request_row"])}
    s["span_id"] = [wait_span[i] for i in s["seg"]]
    s["parent"] = [req_span[r] if dp == 0 else wait_span.get(root, req_span[r])
                   for r, dp, root in zip(s["request_row"], s["depth"], s["root"])]
    s["request"] = s["request_row"]
    s["object"] = [wait_object(c, a, x) for c, a, x in zip(s["call"], s["wait_addr"],
                                                           s["wait_aux"])]
    s["frame"] = [caller_of(run.stacks.get(("offcpu", int(u)))) if u >= 0 else ""
                  for u in s["ustack_id"]]
    s["waker"] = [_who(names, w, p, c) for w, p, c in zip(s["waker_tid"], s["waker_pid"],
                                                          s["waker_ctx"])]
    return s[cols].reset_index(drop=True)


def _links(spans: pd.DataFrame) -> dict:
    """{request row: (trace_id, span_id) of the traced request that woke its longest wait}:
    the request on the waker thread whose window holds the wakeup."""
    q = spans.loc[spans["waker_tid"] > 0, ["waker_tid", "t_wake_ns"]].rename(
        columns={"waker_tid": "tid"}).rename_axis("request_row").reset_index()
    if not len(q):
        return {}
    by = spans[["tid", "t_start_ns", "t_end_ns", "trace_id", "span_id"]].sort_values("t_start_ns")
    q = q.astype({"tid": by["tid"].dtype}).sort_values("t_wake_ns")
    m = pd.merge_asof(q, by, left_on="t_wake_ns", right_on="t_start_ns", by="tid",
                      direction="backward")
    m = m[m["t_end_ns"].notna() & (m["t_wake_ns"] <= m["t_end_ns"])]
    return {int(r.request_row): (r.trace_id, r.span_id) for r in m.itertuples()}


def _resource_attrs(service: str, pid: int, host: str) -> list:
    return [_kv("service.name", service), _kv("process.pid", int(pid)), _kv("host.name", host)]


def _kv(key: str, value):
    from opentelemetry.proto.common.v1 import common_pb2
    kv = common_pb2.KeyValue(key=key)
    if isinstance(value, (bool, np.bool_)):
        kv.value.bool_value = bool(value)
    elif isinstance(value, (int, np.integer)):
        kv.value.int_value = int(value)
    else:
        kv.value.string_value = str(value)
    return kv


def service_name(run, pid: int) -> str:
    """The traced process's name: its main thread's, else any of its threads'."""
    t = run.tasks
    if t is not None and len(t):
        mine = t[t["pid"] == pid]
        main = mine[mine["tid"] == pid]
        for rows in (main, mine):
            if len(rows) and str(rows["comm"].iloc[0]):
                return str(rows["comm"].iloc[0])
    return f"pid {pid}"


def request_batches(run, decomp: pd.DataFrame, segs: pd.DataFrame | None,
                    service: str | None = None, batch: int = BATCH_SPANS,
                    rows=None) -> tuple[list, dict]:
    """(ExportTraceServiceRequest messages of at most `batch` spans, counts). rows: export
    only these requests (decomp index), e.g. a capture's triggering ones."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    off = wall_offset_ns(run.meta or {})
    spans = df_request_spans(run, decomp, segs)
    if rows is not None:
        spans = spans[spans.index.isin(list(rows))]
    waits = df_wait_spans(run, spans, segs)
    links = _links(spans)
    host = (run.meta or {}).get("hostname") or socket.gethostname()
    msgs, n_spans, by_pid, children = [], 0, {}, {}
    for col in ("trace_id", "trace_state"):
        waits[col] = spans[col].reindex(waits["request"]).to_numpy()
    for w in waits.itertuples():
        sp = trace_pb2.Span(trace_id=w.trace_id, span_id=w.span_id, parent_span_id=w.parent,
                            trace_state=w.trace_state,
                            name=f"wait {w.call or w.reason}",
                            kind=trace_pb2.Span.SPAN_KIND_INTERNAL,
                            start_time_unix_nano=int(w.t_start_ns) + off,
                            end_time_unix_nano=int(w.t_end_ns) + off)
        sp.attributes.extend([_kv("thread.id", int(w.tid)), _kv("tailtrace.reason", w.reason),
                              _kv("tailtrace.call", w.call), _kv("tailtrace.object", w.object),
                              _kv("tailtrace.frame", w.frame), _kv("tailtrace.waker", w.waker),
                              _kv("tailtrace.verdict", w.verdict),
                              _kv("tailtrace.hop", int(w.depth))])
        children.setdefault(w.request, []).append(sp)
    names = _request_span_names(run, spans)
    for r, name in zip(spans.itertuples(), names):
        sp = trace_pb2.Span(trace_id=r.trace_id, span_id=r.span_id,
                            parent_span_id=r.parent_span_id, trace_state=r.trace_state,
                            name=name, kind=trace_pb2.Span.SPAN_KIND_SERVER,
                            start_time_unix_nano=int(r.t_enqueue_ns) + off,
                            end_time_unix_nano=int(r.t_end_ns) + off)
        attrs = [_kv("thread.id", int(r.tid)), _kv("thread.name", r.thread),
                 _kv("tailtrace.request.id", int(r.id)), _kv("tailtrace.latency_ns",
                                                              int(r.latency_ns)),
                 _kv("tailtrace.check", r.check), _kv("tailtrace.band", r.band),
                 _kv("tailtrace.cause", r.cause)]
        if r.ran_on:
            attrs.append(_kv("tailtrace.ran_on", r.ran_on))
        attrs += [_kv(f"tailtrace.{p}_ns", int(getattr(r, f"{p}_ns"))) for p in PARTS
                  if getattr(r, f"{p}_ns") == getattr(r, f"{p}_ns")]
        if run.source == "requests" and int(r.status) > 0:
            attrs.append(_kv("http.response.status_code", int(r.status)))
        if r.antagonist:
            attrs += [_kv("tailtrace.antagonist", r.antagonist),
                      _kv("tailtrace.antagonist_ns", int(r.antagonist_ns))]
        if r.waker:
            attrs += [_kv("tailtrace.waker", r.waker),
                      _kv("tailtrace.longest_wait_ns", int(r.longest_wait_ns))]
        sp.attributes.extend(attrs)
        if r.Index in links:
            sp.links.add(trace_id=links[r.Index][0], span_id=links[r.Index][1]).attributes.append(
                _kv("tailtrace.link", "woke its longest wait"))
        # a trace's spans travel together: its request, then its waits
        by_pid.setdefault(int(r.pid), []).extend([sp, *children.get(r.Index, ())])
    for pid, sps in by_pid.items():
        name = service or service_name(run, pid)
        for i in range(0, len(sps), batch):
            m = trace_service_pb2.ExportTraceServiceRequest()
            rs = m.resource_spans.add()
            rs.resource.attributes.extend(_resource_attrs(name, pid, host))
            ss = rs.scope_spans.add()
            ss.scope.name = SCOPE
            ss.spans.extend(sps[i:i + batch])
            msgs.append(m)
            n_spans += len(sps[i:i + batch])
    joined = int(spans["parent_span_id"].map(len).astype(bool).sum()) if len(spans) else 0
    under = int(spans["under_service_span"].sum()) if "under_service_span" in spans else 0
    return msgs, {"requests": len(spans), "waits": len(waits), "links": len(links),
                  "spans": n_spans, "batches": len(msgs), "in_callers_traces": joined,
                  "under_service_spans": under}


def post_once(endpoint: str, body: bytes, timeout_s: float = 10.0) -> tuple[bool, bool, str]:
    """POST one OTLP/HTTP protobuf body once: (sent, worth retrying, why not in one line).
    Worth retrying: 429/502/503/504 and an endpoint that cannot be reached."""
    req = urllib.request.Request(endpoint, data=body, method="POST",
                                 headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            r.read()
            return True, False, ""
    except urllib.error.HTTPError as e:
        why = f"HTTP {e.code} {e.reason}: {e.read(200).decode(errors='replace').strip()}"
        return False, e.code in RETRY_STATUS, why
    except (urllib.error.URLError, OSError) as e:
        return False, True, str(getattr(e, "reason", e))


def refusal(endpoint: str, why: str,
            fix: str = "start a collector there or give --endpoint URL (or --file OUT)") -> str:
    """The one line that says an endpoint refused the spans, and the fix."""
    return f"OTLP endpoint {endpoint} refused the spans ({why}); {fix}"


def post(endpoint: str, body: bytes, retry_s=RETRY_S, timeout_s: float = 10.0) -> None:
    """POST one OTLP/HTTP protobuf body; retries on 429/502/503/504 and unreachable
    endpoints after each of retry_s; ExportError with one line when it gives up."""
    for i in range(len(retry_s) + 1):
        sent, again, why = post_once(endpoint, body, timeout_s)
        if sent:
            return
        if not again:
            break
        if i < len(retry_s):
            time.sleep(retry_s[i])
    raise ExportError(refusal(endpoint, why))


ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node) -> None:
    """In place: every trace, span and parent span id of node (and below) from protobuf's
    base64 to the lowercase hex OTLP/JSON requires."""
    if isinstance(node, list):
        for x in node:
            _hex_ids(x)
    elif isinstance(node, dict):
        for k, v in node.items():
            if k in ID_KEYS and isinstance(v, str):
                node[k] = base64.b64decode(v).hex()
            else:
                _hex_ids(v)


def otlp_json(m) -> dict:
    """An ExportTraceServiceRequest as the OTLP specification encodes it in JSON: protobuf's
    JSON mapping (lowerCamelCase keys, 64-bit integers as decimal strings, empty fields left
    out) with enums as integers and ids in hex, not protobuf's enum names and base64."""
    from google.protobuf import json_format
    d = json_format.MessageToDict(m, use_integers_for_enums=True)
    _hex_ids(d)
    return d


def export_otlp(run, decomp, segs, endpoint: str | None = None, file: Path | None = None,
                service: str | None = None, rows=None, retry_s=RETRY_S) -> dict:
    """Send (or write as OTLP/JSON lines) the run's request spans; the counts sent."""
    msgs, counts = request_batches(run, decomp, segs, service, rows=rows)
    if file is not None:
        tmp = Path(file).with_name(Path(file).name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for m in msgs:
                f.write(json.dumps(otlp_json(m), separators=(",", ":")) + "\n")
        tmp.replace(file)
    else:
        for m in msgs:
            post(endpoint or DEFAULT_ENDPOINT, m.SerializeToString(), retry_s)
    return counts
