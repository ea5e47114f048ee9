"""summary_dict: exact keys, figures from a small known run, lost events flagged."""
import json

import pytest

from fixtures import MS, make_run, off, req, rq, task
from analyze.explain.attribute import df_bands
from analyze.explain.decompose import df_decompose
from analyze.explain.findings import Findings
from analyze.render.summary import summary_dict

KEYS = {"workload", "conns", "workers", "requests", "errors", "throughput_rps", "latency_ms",
        "e2e_ms", "queue_wait_ms", "attribution", "headline", "sched", "lost_events",
        "closure_ratio"}


def small_run(meta=None):
    # 4 requests on 2 threads over 40 ms (enqueue of the first at 0, last end at 40 ms).
    # Request 3 has a runnable interval with no off-CPU interval: it does not close.
    return make_run(
        requests=[req(0, 1, 0, 10 * MS, conn=0), req(1, 2, 0, 20 * MS, t_enqueue=0, conn=1),
                  req(2, 1, 12 * MS, 40 * MS, t_enqueue=10 * MS, conn=0, status=503),
                  req(3, 2, 21 * MS, 25 * MS, t_enqueue=20 * MS, conn=1, status=-28)],
        switches=[off(1, 2 * MS, 6 * MS), off(2, 5 * MS, 6 * MS, voluntary=False)],
        runq=[rq(1, 5 * MS, 6 * MS), rq(2, 5 * MS, 6 * MS, "preempt"), rq(2, 22 * MS, 23 * MS)],
        locks=[], tasks=[task(1, "pool-w0", migrations=3), task(2, "pool-w1")],
        meta=meta or {}, workload={"model": "pool", "conns": 2, "workers": 2})


def test_keys_and_figures():
    run = small_run()
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert KEYS <= set(s)
    assert (s["workload"], s["conns"], s["workers"], s["requests"], s["errors"]) == ("pool", 2, 2, 4, 2)
    assert s["throughput_rps"] == pytest.approx(4 / 0.040)
    assert set(s["latency_ms"]) == {"avg", "p50", "p90", "p99", "p999", "max"}
    assert s["latency_ms"]["avg"] == pytest.approx((10 + 20 + 28 + 4) / 4)
    assert s["latency_ms"]["max"] == pytest.approx(28) and s["latency_ms"]["p50"] == pytest.approx(15)
    assert set(s["e2e_ms"]) == {"avg", "p50", "p99", "max"} and s["e2e_ms"]["max"] == pytest.approx(30)
    # queue waits 0, 0, 2, 1 ms
    assert s["queue_wait_ms"] == {"p50": pytest.approx(0.5), "p99": pytest.approx(2.0 - 0.03),
                                  "max": pytest.approx(2.0)}
    assert s["closure_ratio"] == pytest.approx(0.75)
    assert s["sched"] == {"runq_p50_us": pytest.approx(1000), "runq_p99_us": pytest.approx(1000),
                          "voluntary": 1, "involuntary": 1, "migrations": 3}
    assert list(s["attribution"]) == ["≤P50", "P50–P90", "P90–P99", "≥P99"]
    top = s["attribution"]["≥P99"]
    assert top["n"] == 1 and top["blocked_ms"] == 0 and top["oncpu_ms"] == pytest.approx(28)
    assert s["headline"].startswith("≥P99 requests (n=1, mean 30.0 ms)")
    assert s["lost_events"] == {} and s["lost_events_total"] == 0
    json.dumps(s, allow_nan=False)  # valid JSON: NaN became null


def test_lost_events_are_flagged():
    run = small_run(meta={"lost_events": {"runq": 5, "switches": 0}})
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["lost_events"] == {"runq": 5, "switches": 0} and s["lost_events_total"] == 5
    assert any(w.startswith("runq: 5 events lost") for w in s["warnings"])
    assert "Caution: events were lost (runq: 5)" in s["headline"]


def test_full_maps_are_warned_with_what_the_run_lacks():
    run = small_run(meta={"map_full": {"tasks": {"refused": 0, "entries": 65536},
                                       "open_spans": {"refused": 3616, "entries": 16384},
                                       "bogus": "not a map", "stacks": {"refused": "x"}}})
    d = df_decompose(run)
    w = summary_dict(Findings(run, d, df_bands(d)))["warnings"]
    full = [x for x in w if x.startswith("BPF map")]
    assert full == ["BPF map open_spans was full (it holds 16,384): 3,616 updates refused; "
                    "those calls are not spans"], w


def test_run_without_scheduler_streams_still_summarises():
    run = make_run(requests=[req(0, 1, 0, 10 * MS), req(1, 1, 10 * MS, 30 * MS)])
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["closure_ratio"] is None and s["sched"]["runq_p50_us"] is None
    assert s["attribution"]["≥P99"]["oncpu_ms"] is None
    assert "No scheduler events were recorded" in s["headline"]
    json.dumps(s, allow_nan=False)


def test_requests_without_valid_times_are_left_out_and_counted():
    run = make_run(requests=[req(0, 1, 0, 10 * MS), req(1, 1, 20 * MS, 30 * MS),
                             dict(req(2, 1, 5 * MS, 0), t_end_ns=0, status=-42)],
                   switches=[], runq=[], locks=[], tasks=[task(1, "w0")])
    d = df_decompose(run)
    assert d["id"].tolist() == [0, 1]
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["requests"] == 3 and s["errors"] == 1
    assert s["latency_ms"]["max"] == pytest.approx(10) and s["closure_ratio"] == 1.0
    assert s["throughput_rps"] == pytest.approx(2 / 0.030)
    assert any(w.startswith("1 request records have no valid") for w in s["warnings"])


def test_printed_table_switches_to_microseconds_below_a_millisecond():
    from analyze.__main__ import format_summary
    pct = {"avg": 0.0006, "p50": 0.0005, "p90": 0.0007, "p99": 0.0011, "p999": 0.003, "max": 1.2}
    s = {"requests": 10, "headline": "h", "latency_ms": pct, "e2e_ms": pct,
         "queue_wait_ms": {k: 0.0 for k in pct}, "errors": 0, "throughput_rps": 5}
    lines = format_summary(s).splitlines()
    assert lines[2].split()[:2] == ["µs", "avg"]
    assert lines[3].split() == ["service", "0.600", "0.500", "0.700", "1.100", "3.000", "1,200"]
    s["e2e_ms"] = dict(pct, p99=2.0)
    assert format_summary(s).splitlines()[2].split()[0] == "ms"


def test_a_kernel_fallback_that_loses_information_is_one_warning():
    from analyze.render.summary import kernel_warnings
    meta = {"kernel_fallbacks": [
        {"what": "tp_btf scheduler programs", "needs": "task storage", "since": "5.11",
         "refused": False, "instead": "raw_tp programs", "loses": None},
        {"what": "the cpu event's loops", "needs": "bpf_loop", "since": "5.17", "refused": False,
         "instead": "bounded loops", "loses": "a wait keeps its last 48 switches"}]}
    assert kernel_warnings(meta) == ["the cpu event's loops: this kernel lacks bpf_loop (Linux "
                                     "5.17+): a wait keeps its last 48 switches"]
    assert kernel_warnings({}) == []
    # a build option of the kernel, in no version: since null
    meta = {"kernel_fallbacks": [
        {"what": "wakeup contexts", "needs": "CONFIG_FAIR_GROUP_SCHED", "since": None,
         "refused": False, "instead": "idle only", "loses": "a guess"}]}
    assert kernel_warnings(meta) == ["wakeup contexts: this kernel lacks CONFIG_FAIR_GROUP_SCHED "
                                     "(a kernel build option): a guess"]


COST = {"bpf_stats": "sampled",
        "bpf": {"sched": {"run_cnt": 2000, "run_time_ns": 2_000_000},
                "runq": {"run_cnt": 1000, "run_time_ns": 250_000}},
        "programs": [
            {"name": "runq_waking_btf", "section": "tp_btf/sched_waking", "part": "runq",
             "run_cnt": 1000, "run_time_ns": 250_000},
            {"name": "sched_exec_btf", "section": "tp_btf/sched_process_exec", "part": "sched",
             "run_cnt": 0, "run_time_ns": 0},
            {"name": "sched_switch_btf", "section": "tp_btf/sched_switch", "part": "sched",
             "run_cnt": 2000, "run_time_ns": 2_000_000}],
        "bpf_total_ns": 22_500_000, "bpf_measured_ns": 2_250_000,
        "bpf_sampled_ns": 100_000_000, "traced_wall_ns": 1_000_000_000,
        "loader_cpu_ns": 5_000_000, "ncpus": 2, "cpu_share_of_machine": 0.01375}


def test_tailtrace_cost_from_meta():
    """meta.json cost as the report shows it: the BPF time scaled to the traced time (the
    statistics were on 10 % of it), per event from the measured windows (2.25 ms / 3000
    runs), per request scaled (22.5 ms / 4 requests), the programs by BPF time, the one
    that never ran left out."""
    from analyze.render.fmt import cost_words
    from analyze.render.summary import tailtrace_cost
    run = small_run(meta={"cost": COST})
    d = df_decompose(run)
    c = summary_dict(Findings(run, d, df_bands(d)))["tailtrace_cost"]
    assert c["share_of_machine"] == pytest.approx(0.01375)
    assert c["bpf_ms"] == pytest.approx(22.5) and c["loader_cpu_ms"] == pytest.approx(5.0)
    assert c["bpf_us_per_event"] == pytest.approx(0.75)
    assert c["bpf_us_per_request"] == pytest.approx(22_500_000 / 4 / 1e3)
    assert c["sampled"] == pytest.approx(0.1)
    assert [(q["name"], q["runs"], q["ns_per_run"], q["share"]) for q in c["programs"]] == [
        ("sched_switch_btf", 2000, 1000.0, pytest.approx(2 / 2.25)),
        ("runq_waking_btf", 1000, 250.0, pytest.approx(0.25 / 2.25))]
    assert cost_words(c) == (
        "1.4 % of the machine: BPF 22.5 ms (0.75 µs an event, 5,625 µs a request, statistics "
        "on 10 % of the time), loader 5.0 ms CPU; most BPF time: sched_switch_btf "
        "(tp_btf/sched_switch) 1,000 ns a run (2,000 runs measured), 89 %; runq_waking_btf "
        "(tp_btf/sched_waking) 250 ns a run (1,000 runs measured), 11 %")
    # no statistics (--bpf-stats off: bpf null), or a recording without cost.programs
    assert tailtrace_cost({"cost": dict(COST, bpf=None)}) is None
    assert tailtrace_cost({"cost": {k: v for k, v in COST.items() if k != "programs"}}) is None
    assert tailtrace_cost({}) is None and cost_words(None) is None


def test_requests_on_threads_no_probe_saw_are_named_with_the_option_that_traces_them():
    """A pre-fork server traced by a pid whose workers were not followed: the probes saw
    thread 7 (pid 100) only, every request ran on workers 21 and 22 (pid 200 and 201). The
    headline says no part is known, names the processes and the --pid that traces them, and
    never claims that no scheduler event was recorded."""
    run = make_run(requests=[req(k, 21 + k % 2, k * MS, k * MS + 5 * MS, pid=200 + k % 2)
                             for k in range(20)],
                   switches=[off(7, 0, 1 * MS, pid=100)], runq=[rq(7, 0, 1 * MS, pid=100)],
                   tasks=[task(7, "master")])
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    h = s["headline"]
    assert "no part could be measured" in h and "No scheduler events" not in h, h
    assert "2 threads of 2 processes the probes did not trace (pid 200, 201)" in h, h
    assert "--pid 200,201" in h, h
    assert s["attribution"]["≥P99"]["n_unknown"] == s["attribution"]["≥P99"]["n"] >= 1


def test_a_throttled_tail_names_its_quota_and_the_kernels_count():
    # ten requests of 10 ms; the slowest's 50 ms include a 40 ms wait its CPU quota held back
    quota = {"path": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5c2e7a1f_"
                     "0000_4000_8000_000000000000.slice/cri-containerd-" + "3f2a9c1b7d4e" + "0" * 52
                     + ".scope",
             "cgroup_version": 2, "quota_us": 20000, "period_us": 100000,
             "throttled_ns": [1_000_000, 41_000_000], "nr_throttled": [3, 4], "nr_periods": [9, 10]}
    reqs = [req(i, 7, i * 100 * MS, i * 100 * MS + 10 * MS) for i in range(9)]
    reqs.append(req(9, 7, 900 * MS, 950 * MS))
    run = make_run(requests=reqs, switches=[off(7, 905 * MS, 945 * MS, voluntary=False)],
                   runq=[rq(7, 905 * MS, 945 * MS, "preempt", throttled=40 * MS)], locks=[],
                   meta={"cpu_quotas": [quota]})
    d = df_decompose(run)
    s = summary_dict(Findings(run, d, df_bands(d)))
    assert s["headline"].startswith(
        "≥P99 requests (n=1, mean 50.0 ms) were throttled by the CPU quota of containerd "
        "container 3f2a9c1b7d4e in pod 5c2e7a1f, burstable (20 ms per 100 ms) for 80% of their "
        "time"), s["headline"]
    assert s["attribution"]["≥P99"]["throttled_ms"] == pytest.approx(40)
    assert s["cpu_quotas"] == [{
        "path": quota["path"], "cgroup_version": 2, "quota_us": 20000, "period_us": 100000,
        "kernel_throttled_ms": pytest.approx(40), "kernel_throttles": 1,
        "records_throttled_ms": pytest.approx(40), "requests_throttled_ms": pytest.approx(40)}]
