"""The live OTLP export of a flight recorder's captures (pipeline.follow_captures and
render/otlp_queue.py): captures listed while the follower runs are sent as they appear; an
endpoint that is down costs counted drops, never a wait of the producer; a full queue drops
its oldest batch, counted. The synthetic run (synth.make_run: 400 requests, four of them
preempted to 6.2-6.4 ms) is each capture, its threshold 5 ms: four requests to send each."""
import json
import threading
import time


import synth
from otlp_receiver import Receiver, attrs
from analyze import pipeline
from analyze.render.otlp_queue import SpanQueue

WALL = "2026-11-28T18:00:00.000001Z"


def recorder(tmp_path):
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "meta.json").write_text(json.dumps({"flight": {"trigger": "latency>5ms"},
                                               "mono_start_ns": synth.T_BASE}))
    return rec


def add_capture(rec, seq: int) -> None:
    """captures/NNNN written, then its line in captures.jsonl, as the recorder does."""
    cap = rec / "captures" / f"{seq:04d}"
    synth.make_run(cap, 400)
    meta = json.loads((cap / "meta.json").read_text())
    meta.update(wall_start=WALL, capture={"seq": seq, "threshold_ns": 5_000_000})
    meta["command"] = [f"capture {seq}"]      # each capture its own ids
    (cap / "meta.json").write_text(json.dumps(meta))
    with open(rec / "captures.jsonl", "a") as f:
        f.write(json.dumps({"dir": f"captures/{seq:04d}", "t_start_ns": synth.T_BASE,
                            "latency_ns": 6_000_000, "worst_ns": 6_400_000,
                            "threshold_ns": 5_000_000, "spans": 400, "bytes": 1,
                            "error": None}) + "\n")


def requests_of(rx) -> list:
    return [sp for _, sp in rx.spans() if not sp.parent_span_id]


def test_captures_are_sent_as_they_are_listed(tmp_path):
    rec = recorder(tmp_path)
    rx = Receiver()
    stop = threading.Event()
    out = {}
    t = threading.Thread(target=lambda: out.update(c=pipeline.follow_captures(
        rec, rx.url, stop=stop)))
    try:
        t.start()
        for seq in (1, 2, 3):
            add_capture(rec, seq)
            end = time.monotonic() + 60
            while len(requests_of(rx)) < 4 * seq and time.monotonic() < end:
                time.sleep(0.05)
            # sent while the follower still runs, before the next capture exists
            assert len(requests_of(rx)) == 4 * seq and t.is_alive()
        stop.set()
        t.join(60)
    finally:
        rx.close()
    c = out["c"]
    assert (c["captures"], c["dropped_spans"], c["finished"]) == (3, 0, True)
    assert c["sent_spans"] == len(rx.spans())
    assert json.loads((rec / "otlp.json").read_text()) == json.loads(json.dumps(c))
    assert sorted(attrs(sp.attributes)["tailtrace.band"] for sp in requests_of(rx)) == \
        ["≥P99"] * 12


def test_an_endpoint_that_is_down_costs_counted_drops_not_waits(tmp_path):
    rec = recorder(tmp_path)
    rx = Receiver()
    rx.close()                                  # nobody listens there now
    for seq in (1, 2):
        add_capture(rec, seq)
    q = SpanQueue(rx.url, retry_s=(0.01, 0.01))
    stop = threading.Event()
    stop.set()                                  # the recorder has gone: what is listed, then out
    t0 = time.monotonic()
    c = pipeline.follow_captures(rec, rx.url, stop=stop, queue=q)
    assert time.monotonic() - t0 < 60
    assert c["captures"] == 2 and c["sent_spans"] == 0
    assert c["dropped_spans"] > 8 and c["retries"] == 2 * c["dropped_batches"]
    assert "refused the spans" in c["last_error"]


def test_a_full_queue_drops_its_oldest_batch_counted_and_put_never_blocks():
    gate = threading.Event()
    rx = Receiver()
    real = rx.httpd.RequestHandlerClass.do_POST

    def slow_post(self):            # the endpoint answers once the test lets it
        gate.wait(30)
        real(self)
    rx.httpd.RequestHandlerClass.do_POST = slow_post
    try:
        q = SpanQueue(rx.url, max_batches=2)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import \
            ExportTraceServiceRequest
        msgs = []
        for i in range(6):
            m = ExportTraceServiceRequest()
            sp = m.resource_spans.add().scope_spans.add().spans.add()
            sp.name, sp.trace_id, sp.span_id = f"s{i}", bytes([i + 1]) * 16, bytes([i + 1]) * 8
            msgs.append(m)
        t0 = time.monotonic()
        q.put(msgs[0], 1)
        time.sleep(0.5)                   # the sender holds s0, waiting on the endpoint
        for m in msgs[1:]:
            q.put(m, 1)
        assert time.monotonic() - t0 < 5  # put never waited on the endpoint
        gate.set()
        c = q.close(30)
    finally:
        rx.close()
    # s0 in flight; of s1..s5 the queue of 2 kept the newest two
    assert sorted(sp.name for _, sp in rx.spans()) == ["s0", "s4", "s5"]
    assert (c["sent_batches"], c["dropped_batches"], c["dropped_spans"]) == (3, 3, 3)
    assert "queue of 2 batches was full" in c["last_error"]
