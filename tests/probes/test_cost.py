"""tailtrace's own cost (docs/probes.md, "Cost"): with BPF run-time statistics
on, meta.json cost.bpf holds every module's program runs and time. Oracle by
construction: every record a stream writes was produced by at least one run
of that module's programs, so run_cnt >= records written (the programs also
run for every other task on the machine and drop them in the filter); the
sleeper's 1000 x usleep(100) alone are >= 1000 switches and 1000 wakeups.
"""
from __future__ import annotations

import re

import pytest

from tt_run import helper, meta, needs_root, tailtrace

pytestmark = needs_root
N, USEC = 1000, 100
LINE = re.compile(r"^tailtrace: cost: BPF ([\d.]+) ms \(([\d.]+) us/event\), loader ([\d.]+) ms CPU "
                  r"over ([\d.]+) s traced on (\d+) CPUs? = ([\d.]+)% of the machine"
                  r" \(not counted: start-up ([\d.]+) ms, finish ([\d.]+) ms CPU\)"
                  r"((?:; \w+ programs skipped \d+ times \(recursion\))*)$", re.M)


def run_cost(tmp_path, *extra: str):
    p = tailtrace(tmp_path, "--events", "runq,switch", *extra, "--", helper("sleeper"), str(N),
                  str(USEC))
    assert p.returncode == 0, p.stderr
    m = meta(tmp_path)
    if m["cost"]["bpf"] is None:
        pytest.skip(f"BPF run-time stats unavailable: {m['cost'].get('bpf_stats_error')}")
    return m, p.stderr


def check_totals(m: dict, stderr: str):
    cost = m["cost"]
    bpf = cost["bpf"]
    assert cost["bpf_total_ns"] == sum(v["run_time_ns"] for v in bpf.values())
    for name, v in bpf.items():
        assert v["ns_per_run"] == pytest.approx(v["run_time_ns"] / v["run_cnt"], rel=1e-3), name
    # traced = while the target ran (the poll loop); the files written after are not
    assert 0 < cost["traced_wall_ns"] <= m["mono_end_ns"] - m["mono_start_ns"]
    assert cost["ncpus"] == m["ncpus"]
    assert 0 <= cost["loader_cpu_ns"] <= cost["traced_wall_ns"] * cost["ncpus"]
    share = (cost["bpf_total_ns"] + cost["loader_cpu_ns"]) / (cost["traced_wall_ns"] * cost["ncpus"])
    assert 0 < cost["cpu_share_of_machine"] < 1
    assert cost["cpu_share_of_machine"] == pytest.approx(share, rel=1e-3)
    # the final line says the same figures
    found = LINE.findall(stderr)
    assert len(found) == 1, stderr
    bpf_ms, us_ev, loader_ms, wall_s, ncpus, pct, startup_ms, finish_ms, skipped = found[0]
    # start-up (symbols of the target) and finish (stacks, files) are reported, not counted
    assert cost["startup_cpu_ns"] >= 0 and cost["finish_cpu_ns"] >= 0
    assert float(startup_ms) == pytest.approx(cost["startup_cpu_ns"] / 1e6, abs=0.06)
    assert float(finish_ms) == pytest.approx(cost["finish_cpu_ns"] / 1e6, abs=0.06)
    # runs the kernel skipped (recursion_misses) are lost events: said when there are any
    assert all(v["missed"] >= 0 for v in bpf.values())
    assert skipped == "".join(f"; {k} programs skipped {v['missed']} times (recursion)"
                              for k, v in bpf.items() if v["missed"])
    runs = sum(v["run_cnt"] for v in bpf.values())
    assert float(bpf_ms) == pytest.approx(cost["bpf_total_ns"] / 1e6, abs=0.06)
    assert float(us_ev) == pytest.approx(cost["bpf_total_ns"] / 1e3 / runs, abs=0.006)
    assert float(loader_ms) == pytest.approx(cost["loader_cpu_ns"] / 1e6, abs=0.06)
    assert float(wall_s) == pytest.approx(cost["traced_wall_ns"] / 1e9, abs=0.06)
    assert int(ncpus) == cost["ncpus"]
    assert float(pct) == pytest.approx(share * 100, abs=0.06)


def test_cost_records(tmp_path):
    m, stderr = run_cost(tmp_path)
    bpf = m["cost"]["bpf"]
    assert set(bpf) == {"sched", "runq"}, bpf  # the switch stream is the sched module's
    assert bpf["sched"]["run_cnt"] >= max(m["events"]["switch"], N)
    assert bpf["runq"]["run_cnt"] >= max(m["events"]["runq"], N)
    assert bpf["sched"]["run_time_ns"] > 0 and bpf["runq"]["run_time_ns"] > 0
    check_totals(m, stderr)


def test_cost_aggregate(tmp_path):
    """No records in aggregate mode, but the programs still ran once per event."""
    m, stderr = run_cost(tmp_path, "--aggregate")
    bpf = m["cost"]["bpf"]
    assert bpf["sched"]["run_cnt"] >= max(m["events"]["switch"], N)
    assert bpf["runq"]["run_cnt"] >= max(m["events"]["runq"], N)
    assert bpf["sched"]["run_time_ns"] > 0 and bpf["runq"]["run_time_ns"] > 0
    check_totals(m, stderr)
