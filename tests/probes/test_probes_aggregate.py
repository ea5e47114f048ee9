"""--aggregate: in-kernel histograms only. 1000 x usleep(100) gives 1000
blocked off-CPU intervals of >= 100 us (as many as the kernel's own ru_nvcsw
count, see test_probes_switch.py) and as many wakeup run-queue waits for that
thread, printed runqlat-style and written to aggregate.json."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tt_run import BUILD, TAILTRACE, helper, json_lines, meta, needs_root, stolen_ns, tailtrace

pytestmark = needs_root
N, USEC = 1000, 100


def test_aggregate_histograms_match_the_workload(tmp_path):
    p = tailtrace(tmp_path, "--aggregate", "--events", "runq,switch", "--", helper("sleeper"),
                  str(N), str(USEC), "0", "rt")  # SCHED_FIFO: one block per sleep
    assert p.returncode == 0, p.stderr
    start, end = json_lines(p.stdout)
    tid, nvcsw = start["tid"], end["nvcsw_total"]
    assert nvcsw >= 0.9 * N, "the machine stalled the sleeper too often to judge"
    assert "usecs" in p.stdout and "count    distribution" in p.stdout and "|****" in p.stdout
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]
    unmatched = meta(tmp_path)["unmatched_events"]["switch"]  # see test_probes_switch.py
    for metric in ("offcpu", "runq"):
        th = [t for t in agg[metric]["threads"] if t["tid"] == tid]
        assert len(th) == 1, metric
        h = th[0]
        # the whole thread: the sleeps, plus a switch or two around exec and exit;
        # intervals whose switch-in never reached the tracepoint are not in it.
        # Run-queue waits also follow each preemption (a loaded machine has a few).
        most = nvcsw + 3 + (end["nivcsw_total"] if metric == "runq" else 0)
        assert nvcsw - 2 <= h["count"] + unmatched and h["count"] <= most, metric
        assert h["comm"] == "tt-sleeper" and h["pid"] == tid
        assert sum(b["count"] for b in h["buckets"]) == h["count"]
        assert agg[metric]["total"]["count"] >= h["count"]
    off = [t for t in agg["offcpu"]["threads"] if t["tid"] == tid][0]
    # every sleep lasts >= 100 us: (almost) nothing below the 64-127 us bucket
    short = sum(b["count"] for b in off["buckets"] if b["hi"] < 64)
    assert short <= off["count"] * 0.01
    assert off["sum_ns"] >= N * USEC * 1000
    # no per-event records in this mode
    assert not (tmp_path / "runq.bin").exists() and not (tmp_path / "switches.bin").exists()
    m = meta(tmp_path)
    assert m["options"]["aggregate"] is True
    # meta.json and the final line count what went into the histograms
    assert m["events"]["runq"] == agg["runq"]["total"]["count"]
    assert m["events"]["switch"] == agg["offcpu"]["total"]["count"]
    assert f"runq={agg['runq']['total']['count']}" in p.stderr.splitlines()[-1]
    assert p.stderr.splitlines()[-1].startswith("tailtrace: events counted ")


@pytest.mark.parametrize("mode", [["--aggregate"], []], ids=["aggregate", "records"])
def test_one_runq_program_per_wakeup(tmp_path, mode):
    """A wait starts at sched_waking and no sched_wakeup program runs, and a
    switch runs one program, sched's: the run-queue part's programs run on
    sched_waking (and sched_wakeup_new) only, once per wakeup of the machine.
    The programs run for every task, so their counts are the machine's: the
    sleeper's 1000 wakeups are a lower bound. --aggregate measures from
    sched_waking too with --debug runq-waking (without it, under tp_btf, no
    runq program runs at all: test_cost_aggregate)."""
    p = tailtrace(tmp_path, *mode, "--bpf-stats", "always", "--debug", "runq-waking", "--",
                  helper("sleeper"), str(N), str(USEC), "0", "rt")
    assert p.returncode == 0, p.stderr
    progs = meta(tmp_path)["cost"]["programs"]
    ran = [q for q in progs if q["run_cnt"]]

    def hook(q):  # "tp_btf/sched_waking" -> "sched_waking"
        return q["section"].split("/")[-1]
    runq = {hook(q) for q in ran if q["part"] == "runq"}  # a fork nearby: sched_wakeup_new
    assert "sched_waking" in runq and runq <= {"sched_waking", "sched_wakeup_new"}, progs
    assert sum(q["run_cnt"] for q in ran if hook(q) == "sched_waking") >= N * 0.9
    switch = [q for q in ran if hook(q) == "sched_switch"]
    assert [q["part"] for q in switch] == ["sched"], progs
    assert switch[0]["run_cnt"] >= 2 * N * 0.9


@pytest.mark.serial
@pytest.mark.parametrize("hook,waits", [(None, "sched_info"), ("raw_tp", "sched_waking")])
def test_pinned_spinners_wait_two_thirds_in_the_histogram(tmp_path, hook, waits):
    """Three SCHED_RR spinners pinned to one CPU for 1.5 s: each is runnable, not running,
    for its window minus its own CPU time (the thread's clock: an independent oracle), and
    every such wait follows a preemption. The run-queue histogram's sum must say so, with
    the waits read from the kernel's accounting (tp_btf) and measured from the switch-out
    (the raw_tp fallback, which has no typed task to read it from)."""
    debug = ["--debug", f"hook={hook}"] if hook else []
    cpu = max(os.sched_getaffinity(0))
    stolen = stolen_ns(cpu)
    p = tailtrace(tmp_path, *debug, "--aggregate", "--events", "runq,switch", "--", helper("busy"),
                  "3", "1.5", str(cpu))
    stolen = stolen_ns(cpu) - stolen
    assert p.returncode == 0, p.stderr
    if meta(tmp_path)["evidence"]["runq_wait"] != waits and hook is None:
        pytest.skip("this kernel has no sched_info: --aggregate measures from sched_waking")
    assert meta(tmp_path)["evidence"]["runq_wait"] == waits
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]["runq"]
    for th in json_lines(p.stdout):
        waited = th["t_end_ns"] - th["t_start_ns"] - th["cpu_ns"]
        h, = [t for t in agg["threads"] if t["tid"] == th["tid"]]
        # the histogram also holds the waits before and after the spin window: at most the two
        # other threads' 100 ms RR slices before it starts; the thread's clock leaves out what
        # the hypervisor stole while it ran (tt_run.stolen_ns), which the waits do not hold
        assert (waited - stolen) * 0.95 <= h["sum_ns"] <= waited * 1.05 + 200e6, \
            (h["sum_ns"], waited, stolen)
        assert h["count"] >= th["nivcsw"] - 1


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.serial
def test_runq_sums_are_the_kernels_run_delay_across_migrations(tmp_path):
    """Three SCHED_RR spinners on one CPU; 0.7 s in, two of them are moved to the other CPU,
    so at least one moves while queued (only one runs at a time): the kernel splits that
    wait at the migration. Each thread's histogram sum must still be its whole run-queue
    wait as the kernel accounts it (/proc/thread-self/schedstat run_delay, read by the
    thread at the end of its window: an oracle independent of tailtrace), plus at most the
    waits between that read and its exit (two RR slices). This holds to 0.7 % even when
    switch-ins never reach the tracepoint (an idle CPU's often do not here: the
    moved threads' first runs): the kernel's own total still has those waits."""
    cpu = max(os.sched_getaffinity(0))
    other = min(os.sched_getaffinity(0))
    if cpu == other:
        pytest.skip("needs two CPUs")
    p = subprocess.Popen([str(TAILTRACE), "--out", str(tmp_path), "--aggregate", "--events",
                          "runq,switch", "--", helper("busy"), "3", "1.5", str(cpu)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.7)
        busy, = children(p.pid)
        workers = sorted(int(t) for t in os.listdir(f"/proc/{busy}/task") if int(t) != busy)
        assert len(workers) == 3, workers
        for tid in workers[:2]:
            os.sched_setaffinity(tid, {other})
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    threads = json_lines(out)
    if any(t["run_delay_ns"] < 0 for t in threads):
        pytest.skip("the kernel has no sched_info (CONFIG_SCHED_INFO)")
    assert meta(tmp_path)["hooks"]["runq"] == "tp_btf"
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]["runq"]
    for t in threads:
        h, = [x for x in agg["threads"] if x["tid"] == t["tid"]]
        rd = t["run_delay_ns"]
        assert rd > 0.2e9, "the spinners hardly waited: nothing to check"
        # a thread with an unmatched wait reads up to 0.7 % short, quiet or busy (the
        # reliability table): 2 %, where a wait class left out would be tens of %
        assert rd * 0.98 - 1e5 <= h["sum_ns"] <= rd + 250e6, (t["tid"], h["sum_ns"], rd)


def vcsw(tid: int) -> int:
    status = Path(f"/proc/{tid}/status").read_text()
    return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))


def test_live_threads_are_counted_at_the_end(tmp_path):
    """Under tp_btf a thread counts into its own task storage and the loader collects
    it at the end: a sleeper still running when a 3 s --pid run ends must have its
    sleeps of those seconds in aggregate.json, as many as the kernel's own count of its
    voluntary switches over the run (read once tailtrace says it attached and after it
    stopped: a little wider than the run; its start-up, seconds on a loaded machine, is left
    out)."""
    s = subprocess.Popen([helper("sleeper"), "200000", str(USEC), "0", "rt"],
                         stdout=subprocess.PIPE, text=True)
    try:
        tid = json.loads(s.stdout.readline())["tid"]
        wide = vcsw(tid)                     # before tailtrace starts: a bound from above
        p = subprocess.Popen([str(TAILTRACE), "--out", str(tmp_path), "--aggregate", "--events",
                              "runq,switch", "--pid", str(tid), "--duration", "3"],
                             stderr=subprocess.PIPE, text=True)
        said = []
        for line in p.stderr:
            said.append(line)
            if "attached to" in line:
                break
        before = vcsw(tid)
        said.append(p.communicate(timeout=120)[1])
        after = vcsw(tid)
        assert s.poll() is None, "the sleeper ended before tailtrace did"
    finally:
        s.kill()
        s.wait()
    assert p.returncode == 0, "".join(said)
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]
    (off,) = [t for t in agg["offcpu"]["threads"] if t["tid"] == tid]
    assert after - before >= 1000, "the sleeper hardly slept: nothing to check"
    # the detach takes part of the window the kernel's count spans
    assert 0.5 * (after - before) <= off["count"] <= after - wide, (off["count"], after - before,
                                                                     after - wide)


@pytest.mark.serial   # 20,000 threads: a sixth of this machine's pids (pid_max 32,768)
def test_a_full_histogram_map_counts_what_it_refused(tmp_path):
    """tests/probes/span_target.c `many`: 20,000 threads, each blocks once on a condition
    variable and waits once for a CPU, then exits. Histograms by thread hold 16,384 (thread,
    kind) keys a map, so the runq and off-CPU maps fill: every duration they refuse, at the
    time or at its thread's exit, is a lost event of its stream (meta.json, the last line),
    never dropped unsaid; the kept and the refused are at least one per thread."""
    n = 20000
    target = BUILD / "tests" / "probes" / "span_target"
    p = tailtrace(tmp_path, "--aggregate", "--events", "runq,switch", "--", str(target),
                  "many", str(n), "1", timeout=180)
    assert p.returncode == 0, p.stderr
    assert f"held={n}" in p.stdout
    m = meta(tmp_path)
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]
    for metric, stream in (("runq", "runq"), ("offcpu", "switch")):
        kept = agg[metric]["total"]["count"]
        refused = m["lost_events"][stream]
        assert refused > 0, (metric, kept, m["lost_events"])
        # the stream's refusals are its histogram map's (runq has no records here)
        full = m["map_full"][f"{metric}_hist"]
        assert full["entries"] == 16384 and full["refused"] == refused, (metric, m["map_full"])
        assert kept + refused >= n, (metric, kept, refused)
        assert len({t["tid"] for t in agg[metric]["threads"]}) <= 16384
    counted = [line for line in p.stderr.splitlines() if line.startswith("tailtrace: events")]
    assert counted and "lost" in counted[-1], p.stderr
    assert "BPF maps full: runq_hist refused" in p.stderr, p.stderr
