"""./run.sh --workload pool --conns 20 --requests 2000: the whole pipeline, checked in its run directory.

Oracles by construction: httpload sends exactly 2000 requests (ids 0..1999), all answered 200 by
our own orders-server; the pool's worker threads are the only threads that execute requests; the
on-CPU profile was taken of httpload and the server, so their thread names appear in it.
"""
import gzip
import json
import os
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from go_pprof import pprof

from .conftest import assert_nothing_left, load_json, needs_root, read_records, run_sh

pytestmark = needs_root
REQUESTS, CONNS = 2000, 20
# run.sh looks for inferno in PATH and ~/.cargo/bin
HAVE_INFERNO = shutil.which("inferno-flamegraph", path=os.environ.get("PATH", "") + ":" +
                            os.path.expanduser("~/.cargo/bin")) is not None


@pytest.fixture(scope="module")
def pool_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e") / "pool-c20"
    p = run_sh("--workload", "pool", "--conns", CONNS, "--requests", REQUESTS, "--out", out, check=True)
    return out, p


def test_run_dir_has_every_output(pool_run):
    out, _ = pool_run
    flames = ["oncpu.folded", "flame-oncpu.svg", "flame-offcpu.svg"] if HAVE_INFERNO else []
    for name in ["requests.bin", "workload.json", "meta.json", "runq.bin", "switches.bin",
                 "report.html", "summary.json", "threads.csv", "locks.csv", "trace.json",
                 "perf.data", "offcpu.folded", "run.json"] + flames:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, f"{name} missing or empty"


def test_requests_and_summary_count_2000(pool_run):
    out, _ = pool_run
    req = read_records(out, "requests.bin", "request")
    assert len(req) == REQUESTS
    assert np.array_equal(np.sort(req["id"]), np.arange(REQUESTS))
    assert (req["status"] == 200).all()
    s = load_json(out / "summary.json")
    for key in ["workload", "conns", "workers", "requests", "errors", "throughput_rps", "latency_ms",
                "e2e_ms", "queue_wait_ms", "attribution", "headline", "sched", "lost_events",
                "closure_ratio"]:
        assert key in s, f"summary.json lacks {key}"
    assert s["requests"] == REQUESTS and s["errors"] == 0 and s["conns"] == CONNS
    assert s["workload"] == "pool"
    lat = s["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]
    assert "≥P99" in s["attribution"]
    assert s["throughput_rps"] > 0


def test_meta_complete_and_probes_saw_the_workers(pool_run):
    out, _ = pool_run
    meta = load_json(out / "meta.json")
    assert meta["incomplete"] is False
    # run.sh's own workloads are traced with the tracepoint probes only (no locks uprobes)
    assert set(meta["events"]) >= {"runq", "switch"} and "locks" not in meta["events"]
    assert meta["lost_events"] and not any(meta["lost_events"].values())
    req = read_records(out, "requests.bin", "request")
    runq = read_records(out, "runq.bin", "runq")
    workers = set(np.unique(req["tid"]).tolist())
    assert set(np.unique(runq["tid"]).tolist()) & workers, "no runnable interval of a worker thread"
    threads = pd.read_csv(out / "threads.csv")
    assert {"tid", "comm", "runq_ns", "oncpu_ns"} <= set(threads.columns)
    assert workers <= set(threads["tid"]), "threads.csv lacks a thread that served requests"


def test_report_trace_and_flame_graphs(pool_run):
    out, p = pool_run
    html = (out / "report.html").read_text()
    assert not HAVE_INFERNO or ("flame-oncpu.svg" in html and "flame-offcpu.svg" in html)
    trace = load_json(out / "trace.json")
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert len(events) > REQUESTS
    if not HAVE_INFERNO:  # run.sh must say so in one line, and still produce the report
        assert "inferno not found" in p.stderr and not (out / "flame-oncpu.svg").exists()
    else:
        oncpu = (out / "oncpu.folded").read_text()
        assert re.search(r"^(httpload|pool-w|orders-w)", oncpu, re.M), "on-CPU stacks name no workload thread"
        assert "<svg" in (out / "flame-oncpu.svg").read_text()[:2000]
        assert "<svg" in (out / "flame-offcpu.svg").read_text()[:2000]
    pd.read_csv(out / "locks.csv")  # parses (may be empty: the pool has few contended mutexes)
    # Headline, table and report path reach the user.
    assert str(out / "report.html") in p.stderr + p.stdout
    headline = load_json(out / "summary.json")["headline"]
    assert headline.split(".")[0] in p.stdout
    assert re.search(r"^service\s+[\d.]+\s+[\d.]+", p.stdout, re.M), "no summary table on stdout"


def test_nothing_left_running(pool_run):
    out, _ = pool_run
    started = {name for _, name in assert_nothing_left(out)}
    assert {"orders-server", "tailtrace", "perf"} <= started


def test_run_json_records_the_command(pool_run):
    out, _ = pool_run
    info = json.loads((out / "run.json").read_text())
    assert info["command"][0].endswith("run.sh")
    assert info["command"][1:3] == ["--workload", "pool"]
    assert info["label"] == "pool-c20"


def test_profiles_total_the_runs_cpu_and_waits(pool_run):
    """The pprof profiles of a real run: off-CPU totals threads.csv offcpu_ns, on-CPU (from
    perf's stacks) its oncpu_ns, and `go tool pprof -top` reads both."""
    from analyze.render.pprof import profile_class
    out, _ = pool_run
    th = pd.read_csv(out / "threads.csv")
    want = {"offcpu": th["offcpu_ns"].sum()}
    if HAVE_INFERNO:
        want["oncpu"] = th["oncpu_ns"].sum()
    for name, total in want.items():
        path = out / "profiles" / f"{name}.pb.gz"
        p = profile_class()()
        p.ParseFromString(gzip.decompress(path.read_bytes()))
        got = sum(s.value[1] for s in p.sample)
        assert got == pytest.approx(total, rel=0.01) and total > 0, (name, got, total)
        r = pprof("-top", path, home=out)
        assert r.returncode == 0 and "Total samples" in r.stdout, r.stderr


def test_perfetto_trace_holds_every_record(pool_run):
    """trace.perfetto-trace read back: every switch record's switch-out and switch-in, every
    wakeup with its waker and every preemption are in it (a switch-out after a gap, whose
    switch-in the kernel never reported, may show the CPU's previous holder leaving), as many
    as meta.json counts; every request is a slice; and it takes at most half the bytes per
    event of trace.json."""
    from analyze.load.load import load_run
    from analyze.render.pftrace import check_against_records
    out, _ = pool_run
    run = load_run(out)
    c = check_against_records(run, out / "trace.perfetto-trace")
    events = load_json(out / "meta.json")["events"]
    assert c["switch_records"] + c["gap_records"] == events["switch"] > 0, c
    assert c["switch_ins_found"] == c["switch_records"], c
    # each switch-in the kernel never reported costs at most the next switch-out found; it
    # is a gap, or (a thread asleep since before the attach) a run-queue wait counted unmatched
    missed_ins = c["gap_records"] + load_json(out / "meta.json")["unmatched_events"]["runq"]
    assert c["switch_records"] - missed_ins <= c["switch_outs_found"], c
    assert c["runq_records"] == events["runq"], c
    assert c["wakeups_found"] == c["wakeups"] == c["wakings_in_trace"] > 0, c
    assert c["preemptions"] - c["gap_records"] <= c["preemptions_found"], c
    assert c["request_slices"] == REQUESTS, c
    summary = load_json(out / "summary.json")
    trace = summary["trace"]
    assert not trace["truncated"], trace
    native = c["switches_in_trace"] + c["wakings_in_trace"] + 2 * REQUESTS
    per_event = (out / "trace.perfetto-trace").stat().st_size / native
    assert per_event <= 0.5 * (out / "trace.json").stat().st_size / trace["events"], per_event
    assert "trace.perfetto-trace" in summary["outputs"]
    assert 'href="trace.perfetto-trace"' in (out / "report.html").read_text()
