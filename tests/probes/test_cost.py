"""tailtrace's own cost (docs/probes/cost.md, "Cost"): with BPF run-time statistics
on (--bpf-stats always), meta.json cost.bpf holds every module's program runs
and time. Oracle by construction: every record a stream writes was produced by
at least one run of that module's programs, so run_cnt >= records written (the
programs also run for every other task on the machine and drop them in the
filter); the sleeper's 1000 x usleep(100) alone are >= 1000 switches and 1000
wakeups. Sampled (the default), the programs are counted inside the windows
only (~10 % of a 3 s run) and the total is scaled to the traced time.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tt_run import free_port, helper, meta, needs_root, tailtrace

pytestmark = needs_root
N, USEC = 1000, 100
LINE = re.compile(r"^tailtrace: cost: BPF ([\d.]+) ms \(([\d.]+) us/event(?:; sampled \d+% of the time)?\), loader ([\d.]+) ms CPU "
                  r"over ([\d.]+) s traced on (\d+) CPUs? = ([\d.]+)% of the machine"
                  r" \(not counted: start-up ([\d.]+) ms, finish ([\d.]+) ms CPU\)"
                  r"((?:; \w+ programs skipped \d+ times \(recursion\))*)$", re.M)


def run_cost(tmp_path, *extra: str, n: int = N, usec: int = USEC, env: dict | None = None):
    p = tailtrace(tmp_path, "--events", "runq,switch", *extra, "--", helper("sleeper"), str(n),
                  str(usec), env=env)
    assert p.returncode == 0, p.stderr
    m = meta(tmp_path)
    if m["cost"]["bpf"] is None:
        pytest.skip(f"BPF run-time stats unavailable: {m['cost'].get('bpf_stats_error')}")
    return m, p.stderr


def check_totals(m: dict, stderr: str):
    cost = m["cost"]
    bpf = cost["bpf"]
    assert cost["bpf_measured_ns"] == sum(v["run_time_ns"] for v in bpf.values())
    if cost["bpf_stats"] == "always":
        assert cost["bpf_total_ns"] == cost["bpf_measured_ns"]
        assert cost["bpf_sampled_ns"] == cost["traced_wall_ns"]
    else:  # scaled from the windows to the traced time
        assert cost["bpf_total_ns"] == pytest.approx(
            cost["bpf_measured_ns"] * cost["traced_wall_ns"] / cost["bpf_sampled_ns"], rel=1e-6)
    # by program: each loaded program once, the parts their sums
    progs = cost["programs"]
    assert len({q["name"] for q in progs}) == len(progs) and all(q["section"] for q in progs)
    for name, v in bpf.items():
        mine = [q for q in progs if q["part"] == name]
        for key in ("run_cnt", "run_time_ns", "missed"):
            assert v[key] == sum(q[key] for q in mine), (name, key)
    for name, v in bpf.items():
        if not v["run_cnt"]:  # a module whose programs never ran
            assert v["run_time_ns"] == 0 and v["ns_per_run"] is None, name
            continue
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
    assert float(us_ev) == pytest.approx(cost["bpf_measured_ns"] / 1e3 / runs, abs=0.006)
    assert float(loader_ms) == pytest.approx(cost["loader_cpu_ns"] / 1e6, abs=0.06)
    assert float(wall_s) == pytest.approx(cost["traced_wall_ns"] / 1e9, abs=0.06)
    assert int(ncpus) == cost["ncpus"]
    assert float(pct) == pytest.approx(share * 100, abs=0.06)


def test_cost_records(tmp_path):
    m, stderr = run_cost(tmp_path, "--bpf-stats", "always")
    bpf = m["cost"]["bpf"]
    assert set(bpf) == {"sched", "runq"}, bpf  # the switch stream is the sched module's
    assert bpf["sched"]["run_cnt"] >= max(m["events"]["switch"], N)
    assert bpf["runq"]["run_cnt"] >= max(m["events"]["runq"], N)
    assert bpf["sched"]["run_time_ns"] > 0 and bpf["runq"]["run_time_ns"] > 0
    check_totals(m, stderr)


def test_cost_aggregate(tmp_path):
    """No records in aggregate mode, and no wakeup program: the run-queue waits come from
    the kernel's own accounting, read by the switch program (sched's), which runs once
    per switch; runq's programs never run."""
    m, stderr = run_cost(tmp_path, "--aggregate", "--bpf-stats", "always")
    if m["evidence"]["runq_wait"] != "sched_info":
        pytest.skip("no tp_btf or no sched_info here: test_cost_aggregate_waking covers it")
    bpf = m["cost"]["bpf"]
    assert bpf["sched"]["run_cnt"] >= max(m["events"]["switch"], m["events"]["runq"], N)
    assert bpf["sched"]["run_time_ns"] > 0
    assert bpf["runq"]["run_cnt"] == 0, bpf
    check_totals(m, stderr)


def test_cost_aggregate_waking(tmp_path):
    """The same with waits from sched_waking (--debug runq-waking): the programs still
    ran once per event."""
    m, stderr = run_cost(tmp_path, "--aggregate", "--bpf-stats", "always", "--debug",
                         "runq-waking")
    assert m["evidence"]["runq_wait"] == "sched_waking"
    bpf = m["cost"]["bpf"]
    assert bpf["sched"]["run_cnt"] >= max(m["events"]["switch"], N)
    assert bpf["runq"]["run_cnt"] >= max(m["events"]["runq"], N)
    assert bpf["sched"]["run_time_ns"] > 0 and bpf["runq"]["run_time_ns"] > 0
    check_totals(m, stderr)


@pytest.mark.serial
def test_cost_sampled(tmp_path):
    """Default: statistics on 10 ms of every 100 ms. A 3 s sleeper: ~10 % of the
    time measured, and the scaled runs still cover every record written. The switch program
    runs on every context switch of the machine (a busy neighbour's too): the kernel's own
    count of them (/proc/stat ctxt, over the same run) is the oracle for its runs. Serial:
    a neighbour's --bpf-stats always holds the statistics on, and a window that closes
    then keeps them on (bpf_stats_shared)."""
    ctxt0 = ctxt()
    m, stderr = run_cost(tmp_path, n=6000, usec=400)
    switches = ctxt() - ctxt0
    cost = m["cost"]
    assert cost["bpf_stats"] == "sampled" and cost["bpf_stats_shared"] is False
    frac = cost["bpf_sampled_ns"] / cost["traced_wall_ns"]
    assert cost["traced_wall_ns"] > 2e9
    assert 0.05 < frac < 0.3, cost
    assert "% of the time)" in stderr
    runs = cost["bpf"]["sched"]["run_cnt"]  # counted inside the windows only
    assert runs < 0.5 * switches, (runs, switches)
    assert 0.5 * switches <= runs / frac <= 2 * switches, (runs / frac, switches)
    assert runs / frac >= 0.7 * m["events"]["switch"], (runs / frac, m["events"])
    runs = cost["bpf"]["runq"]["run_cnt"]
    assert runs / frac >= 0.7 * m["events"]["runq"], (runs / frac, m["events"])
    check_totals(m, stderr)


def ctxt() -> int:
    """Context switches of the whole machine since boot (/proc/stat)."""
    return int(re.search(r"^ctxt (\d+)", Path("/proc/stat").read_text(), re.M)[1])


@pytest.mark.serial
def test_cost_sampled_burst_then_quiet(tmp_path):
    """A burst of context switches (pipe ping-pong for 500 ms, pinned to one CPU so that
    its rate is steady: unpinned, the scheduler moved a pair between one CPU and two
    mid-burst and the rate changed 20x), then 2.5 s of quiet. The sampled windows must be
    spread finely enough that the burst is sampled like the rest: the switch program's
    runs scaled from the windows agree with the exact count of the same run under
    --bpf-stats always. (With one 100 ms window a second, the first window fell in the
    burst and the scaled count read 1.66x the exact one.) run_cnt also counts every other
    task's switches, and the two runs are separate: a pair outside the bounds is run once
    more (a bias of the windows, like the 1.66x, is there every time; another tenant's
    burst is not)."""
    tries = []
    cpu = max(os.sched_getaffinity(0))
    for attempt in range(2):
        runs = {}
        for mode in ("always", "sampled"):
            out = tmp_path / f"{mode}{attempt}"
            p = tailtrace(out, "--events", "runq,switch", "--bpf-stats", mode, "--",
                          "taskset", "-c", str(cpu), helper("pingpong"), "500ms", "1", "2500")
            assert p.returncode == 0, p.stderr
            cost = meta(out)["cost"]
            assert cost["bpf_stats"] == mode and cost["traced_wall_ns"] > 2.5e9
            frac = cost["bpf_sampled_ns"] / cost["traced_wall_ns"]
            runs[mode] = cost["bpf"]["sched"]["run_cnt"] / frac
            assert meta(out)["events"]["switch"] >= 20000  # the burst happened
        tries.append(runs)
        if 0.6 * runs["always"] <= runs["sampled"] <= 1.5 * runs["always"]:
            return
    pytest.fail(f"sampled/always run counts out of [0.6, 1.5] twice: {tries}")


def window_count(traced_s: float, dense_s: float) -> int:
    """The sampled windows of a run (probes/core/cost.h): one every 100 ms for dense_s, then one
    every 1000 ms; a window opens at the start."""
    dense = min(traced_s, dense_s)
    return int(dense / 0.1) + 1 + max(0, int(traced_s - dense_s - 1e-9))


def check_windows(tmp_path, dense_s: float, min_s: float, rel: float, *args: str) -> float:
    """A steady sleeper traced with args: its run lasted > min_s, as many windows opened
    as window_count says (+-2), they cover ~10 ms each (within rel: a window closes when the
    loader wakes, later on a busy machine), and the switch program's runs scaled from them
    still cover every switch written. Returns the share of the run they cover."""
    p = tailtrace(tmp_path, "--events", "runq,switch", *args, "--", helper("sleeper"),
                  str(int(min_s * 2000) + 200), "500", timeout=60)  # >= 0.5 ms each
    assert p.returncode == 0, p.stderr
    m = meta(tmp_path)
    cost = m["cost"]
    if cost["bpf"] is None:
        pytest.skip(f"BPF run-time stats unavailable: {cost.get('bpf_stats_error')}")
    traced_s = cost["traced_wall_ns"] / 1e9
    frac = cost["bpf_sampled_ns"] / cost["traced_wall_ns"]
    assert traced_s > min_s, cost
    n = window_count(traced_s, dense_s)
    assert abs(cost["bpf_windows"] - n) <= 2, (n, cost)
    assert cost["bpf_sampled_ns"] / cost["bpf_windows"] == pytest.approx(10e6, rel=rel), cost
    runs = cost["bpf"]["sched"]["run_cnt"] / frac
    assert runs >= 0.7 * m["events"]["switch"], (runs, m["events"])
    check_totals(m, p.stderr)
    return frac


@pytest.mark.serial
def test_cost_sampled_sparsely_after_10_s(tmp_path):
    """Each window turns a kernel static key on and off (text patching, IPIs to every
    CPU): after 10 s of tracing they come once a second instead of ten times. A 12-13 s
    run: (101 + 2) windows of 10 ms, 8 % of it, not 10 %."""
    check_windows(tmp_path, 10, 11.5, 0.5)


@pytest.mark.serial
def test_cost_listen_samples_sparsely_from_the_start(tmp_path):
    """The exporter is a service: one 10 ms window a second from its start (1 %)."""
    check_windows(tmp_path, 0, 3.5, 0.5, "--listen", f"127.0.0.1:{free_port()}")


def test_cost_stats_off(tmp_path):
    p = tailtrace(tmp_path, "--bpf-stats", "off", "--", "true")
    assert p.returncode == 0, p.stderr
    cost = meta(tmp_path)["cost"]
    assert cost["bpf_stats"] == "off"
    assert cost["bpf"] is None and cost["cpu_share_of_machine"] is None
    assert "tailtrace: cost: BPF unknown (--bpf-stats off), loader" in p.stderr


SWITCH = Path("/proc/sys/kernel/bpf_stats_enabled")


@pytest.mark.serial
def test_cost_sampled_with_stats_held_on(tmp_path):
    """kernel.bpf_stats_enabled=1 (another user's): the counters run all the time,
    so nothing is scaled and the runs cover every record, as with always. Serial: the
    switch is the machine's, and every sampled run beside it would see it on."""
    if SWITCH.read_text().strip() != "0":
        pytest.skip("kernel.bpf_stats_enabled is already 1")
    SWITCH.write_text("1")
    try:
        m, stderr = run_cost(tmp_path, n=3000, usec=400)
    finally:
        SWITCH.write_text("0")
    cost = m["cost"]
    assert cost["bpf_stats"] == "sampled" and cost["bpf_stats_shared"] is True
    assert cost["bpf_total_ns"] == cost["bpf_measured_ns"]
    assert cost["bpf"]["sched"]["run_cnt"] >= m["events"]["switch"]
    assert "% of the time)" not in stderr
