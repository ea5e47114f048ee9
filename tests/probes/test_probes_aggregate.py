"""--aggregate: in-kernel histograms only. 1000 x usleep(100) gives 1000
blocked off-CPU intervals of >= 100 us (as many as the kernel's own ru_nvcsw
count, see test_probes_switch.py) and as many wakeup run-queue waits for that
thread, printed runqlat-style and written to aggregate.json."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tt_run import helper, json_lines, meta, needs_root, tailtrace

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
    """A wait starts at sched_waking and no sched_wakeup program runs: each
    sleep is two switches (sleeper out, sleeper in) and one wakeup, so runq's
    programs run about half as often as sched's (with both wakeup hooks: as
    often)."""
    p = tailtrace(tmp_path, *mode, "--bpf-stats", "always", "--", helper("sleeper"), str(N),
                  str(USEC), "0", "rt")
    assert p.returncode == 0, p.stderr
    bpf = meta(tmp_path)["cost"]["bpf"]
    assert bpf["sched"]["run_cnt"] >= 2 * N * 0.9
    assert bpf["runq"]["run_cnt"] < 0.75 * bpf["sched"]["run_cnt"], bpf


def test_pinned_spinners_wait_two_thirds_in_the_histogram(tmp_path):
    """Three SCHED_RR spinners pinned to one CPU for 1.5 s: each is runnable, not running,
    for its window minus its own CPU time (the thread's clock: an independent oracle), and
    every such wait follows a preemption. The run-queue histogram's sum must say so."""
    p = tailtrace(tmp_path, "--aggregate", "--events", "runq,switch", "--", helper("busy"), "3",
                  "1.5", str(max(os.sched_getaffinity(0))))
    assert p.returncode == 0, p.stderr
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]["runq"]
    for th in json_lines(p.stdout):
        waited = th["t_end_ns"] - th["t_start_ns"] - th["cpu_ns"]
        h, = [t for t in agg["threads"] if t["tid"] == th["tid"]]
        # the histogram also holds the waits before and after the spin window: at most the two
        # other threads' 100 ms RR slices before it starts
        assert waited * 0.95 <= h["sum_ns"] <= waited * 1.05 + 200e6, (h["sum_ns"], waited)
        assert h["count"] >= th["nivcsw"] - 1


def vcsw(tid: int) -> int:
    status = Path(f"/proc/{tid}/status").read_text()
    return int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))


def test_live_threads_are_counted_at_the_end(tmp_path):
    """Under tp_btf a thread counts into its own task storage and the loader collects
    it at the end: a sleeper still running when a 1 s --pid run ends must have its
    sleeps of that second in aggregate.json, as many as the kernel's own count of its
    voluntary switches over the run (read before tailtrace attached and after it
    stopped: a little wider than the run)."""
    s = subprocess.Popen([helper("sleeper"), "200000", str(USEC), "0", "rt"],
                         stdout=subprocess.PIPE, text=True)
    try:
        tid = json.loads(s.stdout.readline())["tid"]
        before = vcsw(tid)
        p = tailtrace(tmp_path, "--aggregate", "--events", "runq,switch", "--pid", str(tid),
                      "--duration", "1")
        after = vcsw(tid)
        assert s.poll() is None, "the sleeper ended before tailtrace did"
    finally:
        s.kill()
        s.wait()
    assert p.returncode == 0, p.stderr
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]
    (off,) = [t for t in agg["offcpu"]["threads"] if t["tid"] == tid]
    assert after - before >= 1000, "the sleeper hardly slept: nothing to check"
    # attach and detach take part of the window the kernel's count spans
    assert 0.5 * (after - before) <= off["count"] <= after - before, (off["count"], after - before)
