"""Runs whose requests are not HTTP requests, or that have none.

- span-sourced requests (tailtrace --span): the status is the function's raw return value, so
  errors count only the calls that did not return (an exception or a longjmp left them); ret
  and how each call ended are kept.
- scheduler-only runs (tailtrace --pid without --span): the report is still written, with the
  scheduler figures, and says how to get requests. Only a run with no stream at all is an error.
- tailtrace's uprobe-rate warning (meta.json uprobe_hits_per_s) reaches summary.json and the page.
Every expected figure below is computed by hand from the inline records.
"""
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fixtures import MS, T0, US, lk, make_run, off, rq, span, task, write_run
from analyze import pipeline
from analyze.render import compare
from analyze.explain.attribute import df_bands
from analyze.explain.decompose import df_decompose
from analyze.load.errors import MissingStreamError
from analyze.load.schema import load_schema
from analyze.render.summary import (NO_REQUESTS_NOTE, SPAN_ERRORS_NOTE, TCP_SPANS_NOTE,
                                    span_notes, summary_dict)
from analyze.explain.findings import Findings

ROOT = Path(__file__).resolve().parents[2]
UPROBE_WARNING = ("locks: 27,600 uprobe hits/s on the target; uprobes cost ~10-30 us each on a "
                  "VM, so lock-heavy code ran slower while traced — compare with "
                  "--events runq,switch,offcpu,cpu")
# with meta.json uprobe_cost: 27,600 hits/s at 0.5 us each for 2 s = 27.6 ms of 2 s: 1.4% of a
# CPU (no warning); at 15 us each 41% (a warning with the figures)
COST_WARNING = ("locks: 27,600 uprobe hits/s on the target at ~15.0 us each (measured here) took "
                "~41% of a CPU, so lock-heavy code ran slower while traced — compare with "
                "--events runq,switch,offcpu,cpu")


@pytest.fixture(scope="module")
def schema():
    return load_schema()


# ---- span-sourced requests: errors are calls that did not return ---------------------------

# Three outer calls: two return CURLE_OK (0), one returns -1 read as an unsigned register
# (what a void function or an int -1 leaves in rax); one nested call (depth 1) is no request.
SPANS = [span(1, 0, 10 * MS, ret=0), span(1, 2 * MS, 3 * MS, ret=5, depth=1),
         span(2, 1 * MS, 21 * MS, ret=0), span(2, 22 * MS, 26 * MS, ret=4294967295)]


def test_span_requests_count_only_unreturned_calls_as_errors_and_keep_ret():
    run = make_run(spans=SPANS, switches=[], runq=[])
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert run.source == "spans" and s["source"] == "spans"
    # the old rule (status < 200 or >= 400) would have counted all 3 as errors
    assert s["requests"] == 3 and s["errors"] == 0
    assert s["span_ends"] == {"return": 3, "exception": 0, "longjmp": 0, "tailcall": 0}
    assert SPAN_ERRORS_NOTE in s["warnings"]
    assert d["ret"].tolist() == [0, 0, 4294967295]
    assert s["latency_ms"]["max"] == pytest.approx(20)
    json.dumps(s, allow_nan=False)


TCP_SITE = {"symbol": "tcp:8080", "name": "tcp:8080", "exit": "tcp",
            "tcp": {"ports": [8080], "netns": 1, "start": "tcp_probe", "end": "net_dev_queue"}}
CALL_SITE = {"symbol": "handle", "name": "handle", "exit": "uretprobe"}


@pytest.mark.parametrize("sites, ids, want", [
    ([TCP_SITE], [0], [TCP_SPANS_NOTE.format(ports="tcp:8080")]),
    ([CALL_SITE, TCP_SITE], [1], [TCP_SPANS_NOTE.format(ports="tcp:8080")]),
    ([CALL_SITE, TCP_SITE], [0, 1], [SPAN_ERRORS_NOTE, TCP_SPANS_NOTE.format(ports="tcp:8080")]),
    ([CALL_SITE], [0], [SPAN_ERRORS_NOTE]),
])
def test_tcp_spans_are_said_to_be_the_kernels_view_not_return_values(sites, ids, want):
    """Requests of --span tcp carry no return value: the return-value note is for calls only,
    and the TCP note names the port whenever one of its requests is in the run."""
    run = make_run(spans=[span(1, i * 10 * MS, (i * 10 + 5) * MS, span_id=k)
                          for i, k in enumerate(ids)], switches=[], runq=[],
                   meta={"span_sites": sites})
    assert span_notes(run) == want
    d = df_decompose(run)
    assert [w for w in summary_dict(Findings(run, d, df_bands(d)))["warnings"]
            if w in (SPAN_ERRORS_NOTE, *want)] == want


def test_calls_left_by_an_exception_or_longjmp_are_the_errors():
    spans = [span(1, 0, 10 * MS, ret=0), span(1, 11 * MS, 12 * MS, end=1),
             span(2, 1 * MS, 21 * MS, end=2), span(2, 22 * MS, 26 * MS, ret=7)]
    run = make_run(spans=spans, switches=[], runq=[])
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["requests"] == 4 and s["errors"] == 2
    assert s["span_ends"] == {"return": 2, "exception": 1, "longjmp": 1, "tailcall": 0}
    assert run.requests["end"].astype(str).tolist() == ["return", "longjmp", "exception",
                                                        "return"]


def test_goroutine_spans_say_what_the_thread_split_means():
    spans = [span(1, 0, 10 * MS, goroutine=0xc000001000, end_tid=2),
             span(1, 11 * MS, 12 * MS, goroutine=0xc000002000),
             span(2, 1 * MS, 21 * MS, goroutine=0xc000001000)]
    run = make_run(spans=spans, switches=[], runq=[])
    d = df_decompose(run)
    w = summary_dict(Findings(run, d, df_bands(d)))["warnings"]
    note = [x for x in w if "Go goroutines" in x]
    assert len(note) == 1 and note[0].startswith("3 requests are spans of Go goroutines")
    assert "2 goroutines served them" in note[0]
    plain = make_run(spans=SPANS, switches=[], runq=[])
    d = df_decompose(plain)
    assert not [x for x in summary_dict(Findings(plain, d, df_bands(d)))["warnings"] if "Go" in x]


def test_span_run_report_and_compare_count_unreturned_calls(schema, tmp_path):
    spans = SPANS + [span(2, 30 * MS, 31 * MS, end=1)]
    d = write_run(tmp_path / "spans", schema, meta={"label": "curl"}, spans=spans, switches=[],
                  runq=[], tasks=[task(1, "python3"), task(2, "python3")])
    s = pipeline.build_report(d, plots=False)
    assert s["errors"] == 1 and s["requests"] == 4
    assert json.loads((d / "summary.json").read_text())["errors"] == 1
    page = (d / "report.html").read_text()
    assert '<div class="v">1</div><div class="k">errors</div>' in page        # header tile
    assert "<tr><th>errors</th><td>1</td></tr>" in page                     # summary table
    assert "Span return values are not HTTP statuses" in page
    trace = json.loads((d / "trace.json").read_text())
    req = [e for e in trace["traceEvents"] if e.get("cat") == "request"]
    assert sorted(e["args"]["ret"] for e in req) == [0, 0, 0, 4294967295]
    assert not any("status" in e["args"] for e in req)
    df, _ = pipeline.write_compare([d], tmp_path / "cmp", plots=False)
    assert df.loc[0, "errors"] == 1
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert "<th>errors</th>" in page and "<td>curl</td><td>4</td><td>1</td>" in page


# ---- scheduler-only runs ------------------------------------------------------------------

def sched_only(schema, path, **over):
    """Two threads of a third-party process, no requests, no spans.

    tid 11 "busy":   preempted 1.0–1.5 ms (runnable 500 µs), blocks 4.0–5.1 ms (woken at
                     5.0, runs at 5.1: runnable 100 µs), holds mutex 0xabc 2–3 ms.
    tid 12 "sleepy": blocks 1.0–2.2 ms (runnable 2.0–2.2: 200 µs) and 6–11 ms (runnable
                     8–11: 3000 µs), migrating from CPU 1 to CPU 0 on the second wakeup.
    Runnable intervals 100, 200, 500, 3000 µs: P50 350 µs, P99 500 + 0.97·2500 = 2925 µs.
    """
    streams = dict(
        runq=[rq(11, 1 * MS, 1500 * US, "preempt", cpu=0), rq(11, 5 * MS, 5100 * US, cpu=1),
              rq(12, 2 * MS, 2200 * US, cpu=1), rq(12, 8 * MS, 11 * MS, cpu=0)],
        switches=[off(11, 1 * MS, 1500 * US, voluntary=False, cpu_off=0, cpu_on=0),
                  off(11, 4 * MS, 5100 * US, cpu_off=0, cpu_on=1),
                  off(12, 1 * MS, 2200 * US, cpu_off=1, cpu_on=1),
                  off(12, 6 * MS, 11 * MS, cpu_off=1, cpu_on=0)],
        locks=[lk(11, 0xabc, 2 * MS, 2 * MS, 3 * MS)],
        tasks=[task(11, "busy", migrations=2), task(12, "sleepy", migrations=1)])
    streams.update(over)
    meta = {"target": {"mode": "pid", "pid": 100}, "mono_start_ns": T0, "mono_end_ns": T0 + 12 * MS,
            "lost_events": {"runq": 0, "switch": 0, "locks": 0}, "label": "sleepy-pid100"}
    return write_run(path, schema, meta=meta, **streams)


@pytest.fixture(scope="module")
def sched_report(schema, tmp_path_factory):
    d = sched_only(schema, tmp_path_factory.mktemp("sched") / "run")
    return d, pipeline.build_report(d)


def test_sched_only_summary_figures(sched_report):
    d, s = sched_report
    assert json.loads((d / "summary.json").read_text()) == json.loads(json.dumps(s))
    assert (s["source"], s["requests"], s["errors"], s["throughput_rps"]) == ("none", 0, None, None)
    assert set(s["latency_ms"].values()) == {None} and set(s["e2e_ms"].values()) == {None}
    assert s["closure_ratio"] is None and s["tail_excess"] is None
    assert s["attribution"].startswith("needs requests or --span")
    assert s["sched"] == {"runq_p50_us": pytest.approx(350), "runq_p99_us": pytest.approx(2925),
                          "voluntary": 3, "involuntary": 1, "migrations": 3}
    assert s["threads"] == 2 and s["lost_events"] == {"runq": 0, "switch": 0, "locks": 0}
    assert s["note"] == NO_REQUESTS_NOTE.format(examples="")     # no stacks: nothing to suggest
    assert s["headline"] == ("No requests in this run (no --span): scheduler view of 2 threads — "
                             "run-queue latency P50 350.0 µs, P99 2,925.0 µs; 3 voluntary and 1 "
                             "involuntary switches, 3 migrations.")
    assert s["outputs"] == ["summary.json", "threads.csv", "locks.csv", "trace.json",
                            "trace.perfetto-trace", "profiles/offcpu.pb.gz", "profiles/locks.pb.gz", "runq-hist.png",
                            "cpu-placement.png", "report.html"]


def test_jit_runtime_is_told_what_names_its_requests(schema, tmp_path):
    """The same run, its stacks holding JIT frames (named from a perf map): the note names the
    ways that work for JIT code instead of a function a uprobe cannot take."""
    jit = ["clock_nanosleep+0x23 (libc.so.6)", "JS:*handleRequest /srv/app.js:7+0x1c (perf-100.map)",
           "main+0x9 (node)"]
    d = sched_only(schema, tmp_path / "run")
    (d / "stacks.jsonl").write_text(json.dumps({"stream": "offcpu", "id": 1, "kind": "user",
                                                "frames": jit}) + "\n"
                                    + json.dumps({"stream": "offcpu", "id": 2, "kind": "user",
                                                  "frames": ["main+0x9 (node)"]}) + "\n")
    s = pipeline.build_report(d)
    assert s["note"].startswith("Without --span there are no requests to decompose")
    assert "1 stacks hold frames named from the runtime's perf map" in s["note"]
    assert "NAME__span(id, t_start_ns, status)" in s["note"]
    assert "Parser::on_headers_complete" in s["note"]


def _with_stacks(schema, path, *frames_lists):
    d = sched_only(schema, path)
    (d / "stacks.jsonl").write_text("".join(
        json.dumps({"stream": "offcpu", "id": i, "kind": "user", "frames": f}) + "\n"
        for i, f in enumerate(frames_lists)))
    return d


def test_the_note_suggests_the_programs_own_functions(schema, tmp_path):
    """A server's stacks pass through its own functions under libc's: those are suggested
    (most stacks first), not nginx's or curl's, and not main or a thread's start."""
    d = _with_stacks(schema, tmp_path / "run",
                     ["__futex_abstimed_wait_common+0xc6 (libc.so.6)", "net_flush+0x23 (mariadbd)",
                      "do_command(THD*, bool)+0x13f (mariadbd)", "main+0x1 (mariadbd)",
                      "start_thread+0x305 (libc.so.6)"],
                     ["__libc_recv+0x1 (libc.so.6)", "my_net_read+0x9 (mariadbd)",
                      "do_command(THD*, bool)+0x5 (mariadbd)", "start_thread+0x305 (libc.so.6)"])
    s = pipeline.build_report(d)
    assert s["note"] == NO_REQUESTS_NOTE.format(examples=(
        " (of this program's own functions its threads blocked under: --span "
        "mariadbd:do_command, --span mariadbd:my_net_read, --span mariadbd:net_flush)"))
    assert "nginx" not in s["note"] and "curl" not in s["note"]


def test_an_interpreted_program_is_told_what_works_for_it(schema, tmp_path):
    """Debian's python3: the interpreter's own functions serve every call alike, so the note
    names --span tcp and USDT marks, not _PyEval_EvalFrameDefault."""
    d = _with_stacks(schema, tmp_path / "run",
                     ["__futex_abstimed_wait_common+0xc6 (libc.so.6)",
                      "take_gil.lto_priv.0+0x232 (python3.11)",
                      "_PyEval_EvalFrameDefault+0x45ef (python3.11)"])
    s = pipeline.build_report(d)
    assert "They run Python code" in s["note"] and "--span tcp" in s["note"]
    assert "_PyEval_EvalFrameDefault" not in s["note"]


def test_sched_only_tables_and_trace(sched_report):
    d, _ = sched_report
    th = pd.read_csv(d / "threads.csv").set_index("tid")
    ns = ["runq_ns", "offcpu_ns", "oncpu_ns"]
    assert th.loc[11, ns].tolist() == [600_000, 1_600_000, 2_500_000]
    assert th.loc[12, ns].tolist() == [3_200_000, 6_200_000, 3_800_000]
    assert th.loc[11, ["voluntary", "involuntary", "migrations"]].tolist() == [1, 1, 2]
    assert th.loc[12, ["voluntary", "involuntary", "migrations"]].tolist() == [2, 0, 1]
    assert th.loc[12, "cpus"] == "0,1" and th.loc[11, "comm"] == "busy"
    locks = pd.read_csv(d / "locks.csv")
    assert locks["acquisitions"].tolist() == [1] and locks["hold_p50_ns"].tolist() == [1_000_000]
    trace = json.loads((d / "trace.json").read_text())
    x = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in x} == {"state"}                       # thread-state tracks only
    runnable_12 = sum(e["dur"] for e in x if e["name"] == "Runnable" and e["tid"] % (1 << 22) == 12)
    assert runnable_12 == pytest.approx(3200)                        # µs: 200 + 3000


def test_sched_only_page_says_how_to_get_requests(sched_report):
    d, s = sched_report
    page = (d / "report.html").read_text()
    note = page.index(f'<div class="note">{html.escape(s["note"])}</div>')
    assert note < page.index('<div class="headline">')              # the first thing read
    assert "--span BIN:SYMBOL" in NO_REQUESTS_NOTE and "Attribution needs requests" in page
    assert '<div class="v">2</div><div class="k">threads</div>' in page
    assert "Threads (top 2 of 2 by time runnable)" in page and "sleepy" in page
    assert page.count("data:image/png;base64,") == 2                # runq-hist + cpu-placement
    assert not (d / "percentiles.png").exists() and not (d / "timeline.png").exists()


def test_sched_only_cli_exit_0_and_prints_the_scheduler_lines(schema, tmp_path):
    d = sched_only(schema, tmp_path / "run")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "analyze", "report", str(d), "--no-plots"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("No requests in this run (no --span): scheduler view of 2 threads")
    assert ("threads: 2; run-queue latency P50 350.0 µs, P99 2,925.0 µs; switches: 3 voluntary, "
            "1 involuntary; migrations: 3") in r.stdout
    assert (d / "report.html").exists() and (d / "threads.csv").exists()


def test_sched_only_run_in_compare_says_no_requests(schema, tmp_path):
    d = sched_only(schema, tmp_path / "run")
    df, files = pipeline.write_compare([d], tmp_path / "cmp")
    row = compare.format_table(df).splitlines()[2]
    assert row.startswith("sleepy-pid100") and "no requests" in row and "needs probes" not in row
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert "<td>sleepy-pid100</td><td>0</td><td>n/a</td>" in page


def test_only_a_run_without_any_stream_is_an_error(schema, tmp_path):
    d = write_run(tmp_path / "empty", schema, meta={})
    with pytest.raises(MissingStreamError, match=r"requests\.bin is missing"):
        pipeline.build_report(d)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "analyze", "report", str(d)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "requests.bin is missing" in r.stderr


# ---- the observer-effect warning -------------------------------------------------------------

@pytest.mark.parametrize("rate, warned", [(27_600.0, True), (4_999.0, False)])
def test_uprobe_rate_warning_in_summary_and_page(schema, tmp_path, rate, warned):
    d = sched_only(schema, tmp_path / "run")
    meta = json.loads((d / "meta.json").read_text())
    meta.update(uprobe_hits={"locks": int(rate * 2)}, uprobe_hits_per_s={"locks": rate})
    (d / "meta.json").write_text(json.dumps(meta))
    s = pipeline.build_report(d, plots=False)
    page = (d / "report.html").read_text()
    warns = re.findall(r'<div class="warn">⚠ (.*?)</div>', page)
    assert f"<tr><th>uprobe hits</th><td>locks: {int(rate * 2):,} ({rate:,.0f}/s)</td></tr>" in page
    if warned:
        assert UPROBE_WARNING in s["warnings"]
        assert html.escape(UPROBE_WARNING) in warns
    else:
        assert not any("uprobe" in w for w in s["warnings"] + warns)


@pytest.mark.parametrize("per_hit_ns, warned", [(15_000, True), (500, False)])
def test_uprobe_warning_weighs_hits_by_their_measured_cost(schema, tmp_path, per_hit_ns, warned):
    d = sched_only(schema, tmp_path / "run")
    meta = json.loads((d / "meta.json").read_text())
    hits = 55_200                                   # 27,600/s over 2 s
    ns = hits * per_hit_ns
    meta.update(uprobe_hits={"locks": hits}, uprobe_hits_per_s={"locks": 27_600.0},
                uprobe_cost={"locks": {"ns": ns, "share_of_cpu": ns / 2e9}},
                uprobe_costs_ns={"emulated": 500, "single-stepped": 15_000, "measured": True})
    (d / "meta.json").write_text(json.dumps(meta))
    s = pipeline.build_report(d, plots=False)
    if warned:
        assert COST_WARNING in s["warnings"]
    else:
        assert not any("uprobe" in w for w in s["warnings"])
