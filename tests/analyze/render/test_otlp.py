"""OTLP export (analyze/render/otlp.py): the synthetic pool run's 400 requests, whose parts are
known by construction, sent to a local OTLP/HTTP receiver and decoded with the official
opentelemetry-proto messages; retries, refusals and the file form."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import synth
from otlp_receiver import Receiver, attrs
from analyze import pipeline
from analyze.explain.decompose import PARTS
from analyze.load.errors import ExportError
from analyze.render import otlp

ROOT = Path(__file__).resolve().parents[3]
WALL = "2026-11-28T18:00:00.000001Z"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("otlp") / "run"
    tr = synth.make_run(d, 400)
    meta = json.loads((d / "meta.json").read_text())
    meta["wall_start"] = WALL
    (d / "meta.json").write_text(json.dumps(meta))
    return tr, d


def listing(d: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in d.iterdir()}


def test_each_request_is_one_span_whose_parts_add_up_to_it(pool):
    tr, d = pool
    rx = Receiver()
    try:
        before = listing(d)
        n = pipeline.export_run(d, endpoint=rx.url)
        assert listing(d) == before      # the run directory is left as it was
    finally:
        rx.close()
    assert n["requests"] == 400 and n["batches"] == len(rx.got)
    wall0 = pd.Timestamp(WALL).value - tr.meta["mono_start_ns"]
    truth = tr.decomp.set_index("id")
    requests = [(rs, sp) for rs, sp in rx.spans() if not sp.parent_span_id]
    assert len(requests) == 400
    for rs, sp in requests:
        a = attrs(sp.attributes)
        r = truth.loc[a["tailtrace.request.id"]]
        assert attrs(rs.resource.attributes)["service.name"] == "httpload"
        assert attrs(rs.resource.attributes)["process.pid"] == 100
        assert sp.start_time_unix_nano == r["t_enqueue_ns"] + wall0
        assert sp.end_time_unix_nano == r["t_end_ns"] + wall0
        parts = {p: a[f"tailtrace.{p}_ns"] for p in PARTS if f"tailtrace.{p}_ns" in a}
        assert sum(parts.values()) == sp.end_time_unix_nano - sp.start_time_unix_nano
        for p in ("queue_wait", "oncpu", "runq_wakeup", "runq_preempt", "lock_wait"):
            assert parts[p] == r[f"{p}_ns"], (p, a["tailtrace.request.id"])
        assert a["thread.id"] == r["tid"] and a["http.response.status_code"] == 200
        assert a["tailtrace.check"] == "ok" and a["tailtrace.band"]
    # the slowest requests (i % 100 == 50: preempted 5 ms) are ≥P99 and say so
    slow = [attrs(sp.attributes) for _, sp in requests
            if attrs(sp.attributes)["tailtrace.request.id"] % 100 == 50]
    assert {a["tailtrace.band"] for a in slow} == {"≥P99"}
    assert {a["tailtrace.cause"] for a in slow} == {"runnable (waiting for a CPU)"}


def test_a_second_export_sends_the_same_ids(pool):
    _, d = pool
    ids = []
    for _ in range(2):
        rx = Receiver()
        try:
            pipeline.export_run(d, endpoint=rx.url)
        finally:
            rx.close()
        ids.append(sorted((sp.trace_id, sp.span_id) for _, sp in rx.spans()))
    assert ids[0] == ids[1] and len(set(ids[0])) == len(ids[0])


def test_busy_endpoint_is_retried_and_a_refusal_is_one_line(pool):
    tr, d = pool
    run = pipeline.load_run(d)
    a = pipeline.analyse(run)
    rx = Receiver([503, 429])
    try:
        otlp.export_otlp(run, a["decomp"], a["segments"], endpoint=rx.url, retry_s=(0, 0, 0))
        assert rx.posts == 3 and len(rx.got) == 1
    finally:
        rx.close()
    rx = Receiver([400])
    try:
        with pytest.raises(ExportError, match=r"OTLP endpoint http://127\.0\.0\.1:\d+/v1/traces "
                                              r"refused the spans \(HTTP 400"):
            otlp.export_otlp(run, a["decomp"], a["segments"], endpoint=rx.url, retry_s=(0, 0))
        assert rx.posts == 1                # a 400 is not retried
    finally:
        rx.close()
    url = rx.url                            # nobody listens there now
    r = subprocess.run([sys.executable, "-m", "analyze", "export", "otlp", str(d), "--endpoint",
                        url], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"analyze: OTLP endpoint {url}")


def test_file_form_is_otlp_json_lines(pool, tmp_path):
    _, d = pool
    out = tmp_path / "spans.jsonl"
    r = subprocess.run([sys.executable, "-m", "analyze", "export", "otlp", str(d), "--file",
                        str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    spans = [s for m in lines for rs in m["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    assert sum("parentSpanId" not in s for s in spans) == 400
    assert f"exported 400 requests as {len(spans)} spans" in r.stdout


READER = Path(__file__).resolve().parent / "otlp_json_read"


@pytest.fixture(scope="module")
def otlp_json_read(tmp_path_factory):
    """otlp_json_read/: the OpenTelemetry Collector's own OTLP/JSON decoder (pdata), built with
    Go from the module cache scripts/install-deps.sh fills (9 s here)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists()
                                else None)
    if not go:
        pytest.skip("Go is not installed (scripts/install-deps.sh)")
    v = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    if tuple(map(int, re.findall(r"\d+", v)[:2])) < (1, 26):
        pytest.skip(f"the Collector's decoder (pdata v1.71.0) needs Go 1.26, this is {v}")
    exe = tmp_path_factory.mktemp("otlp-json-read") / "otlp-json-read"
    p = subprocess.run([go, "build", "-o", str(exe), "."], cwd=READER, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, f"otlp_json_read did not build: {p.stderr[-2000:]}"
    return exe


def test_file_form_is_read_back_by_the_collectors_own_decoder(pool, tmp_path, otlp_json_read):
    """The file is OTLP/JSON as the specification defines it (hex ids, integer enums, 64-bit
    integers as strings): the Collector's decoder reads every line back into the very spans
    sent over OTLP/HTTP protobuf."""
    _, d = pool
    out = tmp_path / "spans.jsonl"
    run = pipeline.load_run(d)
    a = pipeline.analyse(run)
    otlp.export_otlp(run, a["decomp"], a["segments"], file=out)
    rx = Receiver()
    try:
        otlp.export_otlp(run, a["decomp"], a["segments"], endpoint=rx.url)
    finally:
        rx.close()
    p = subprocess.run([str(otlp_json_read)], stdin=out.open("rb"), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = {(s["trace_id"], s["span_id"]): s for s in map(json.loads, p.stdout.splitlines())}
    sent = rx.spans()
    assert len(got) == len(sent) > 400
    for rs, sp in sent:
        s = got[(sp.trace_id.hex(), sp.span_id.hex())]
        assert s["parent"] == sp.parent_span_id.hex()
        assert (s["name"], s["kind"]) == (sp.name, sp.kind)
        assert (s["start_unix_nano"], s["end_unix_nano"]) == (sp.start_time_unix_nano,
                                                               sp.end_time_unix_nano)
        assert s["attributes"] == attrs(sp.attributes)
        assert s["resource"] == attrs(rs.resource.attributes) and s["scope"] == "tailtrace"
        assert s["links"] == [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()}
                              for l in sp.links]
    # and the text itself: hex ids, the kind as a number, nanoseconds as a string
    first = json.loads(out.read_text().splitlines()[0])
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]) and span["kind"] == 2
    assert isinstance(span["startTimeUnixNano"], str)


def test_captures_send_their_triggering_requests(tmp_path):
    """A recorder directory with one capture (the synthetic run, threshold 5 ms: its four
    preempted requests, 6.2 to 6.4 ms, trigger): captures --otlp sends those four."""
    rec = tmp_path / "rec"
    cap = rec / "captures" / "0001"
    tr = synth.make_run(cap, 400)
    meta = json.loads((cap / "meta.json").read_text())
    meta.update(wall_start=WALL, capture={"seq": 1, "threshold_ns": 5_000_000})
    (cap / "meta.json").write_text(json.dumps(meta))
    (rec / "meta.json").write_text(json.dumps({"flight": {"trigger": "latency>5ms"},
                                                "mono_start_ns": synth.T_BASE}))
    (rec / "captures.jsonl").write_text(json.dumps(
        {"dir": "captures/0001", "t_start_ns": synth.T_BASE, "latency_ns": 6_000_000,
         "worst_ns": 6_400_000, "threshold_ns": 5_000_000, "spans": 400, "bytes": 1,
         "error": None}) + "\n")
    rx = Receiver()
    try:
        df = pipeline.build_captures(rec, plots=False, otlp=rx.url)
    finally:
        rx.close()
    slow = sorted(tr.decomp.loc[tr.decomp["latency_ns"] >= 5_000_000, "id"])
    got = sorted(attrs(sp.attributes)["tailtrace.request.id"] for _, sp in rx.spans()
                 if not sp.parent_span_id)
    assert got == slow and len(slow) == 4
    assert df["otlp_spans"].tolist() == [len(rx.spans())]
