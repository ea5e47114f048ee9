"""Context switches and off-CPU stacks against a thread that sleeps 1000 x
usleep(100): at least 1000 voluntary (blocked) off-CPU intervals of at least
100 us each, each followed by a wakeup run-queue interval; its stacks end in
the kernel's schedule() and its user stack shows the libc sleep call."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tt_run import helper, json_lines, meta, needs_root, records, tailtrace

pytestmark = needs_root
N, USEC = 1000, 100
TASK_INTERRUPTIBLE = 1
WAKEUP = 0


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("switch")
    p = tailtrace(out, "--events", "runq,switch,offcpu", "--", helper("sleeper"), str(N), str(USEC))
    assert p.returncode == 0, p.stderr
    return out, json_lines(p.stdout)[0]["tid"], p.stderr


def test_at_least_1000_voluntary_switches_of_100us(run):
    out, tid, _ = run
    sw = records(out, "switch")
    mine = sw[(sw["tid"] == tid) & (sw["voluntary"] == 1)]
    assert len(mine) >= N
    sleeps = mine[(mine["prev_state"] & 0x3) == TASK_INTERRUPTIBLE]  # + TASK_FREEZABLE etc.
    assert len(sleeps) >= N
    # usleep(100) sleeps at least 100 us: (almost) every blocked interval is that long
    assert np.percentile(sleeps["t_on_ns"] - sleeps["t_off_ns"], 1) >= USEC * 1000 * 0.95
    assert (mine["t_on_ns"] > mine["t_off_ns"]).all()
    assert (mine["pid"] == tid).all()  # single-threaded: tid == tgid


def test_every_sleep_ends_with_a_wakeup_interval(run):
    out, tid, _ = run
    rq = records(out, "runq")
    mine = rq[(rq["tid"] == tid) & (rq["kind"] == WAKEUP)]
    assert len(mine) >= N
    assert (mine["t_run_ns"] >= mine["t_runnable_ns"]).all()


def test_meta_counts_match_files_and_nothing_lost(run):
    out, _, stderr = run
    m = meta(out)
    assert m["events"]["switch"] == len(records(out, "switch"))
    assert m["events"]["runq"] == len(records(out, "runq"))
    assert m["lost_events"]["switch"] == 0 and m["lost_events"]["runq"] == 0
    assert m["target"]["mode"] == "command" and m["exit_status"] == 0
    assert m["incomplete"] is False
    assert m["mono_end_ns"] > m["mono_start_ns"]
    assert "lost" in stderr.splitlines()[-1] and "switch=0" in stderr.splitlines()[-1]


def test_tasks_bin_names_the_thread(run):
    out, tid, _ = run
    tasks = records(out, "task")
    row = tasks[tasks["tid"] == tid]
    assert len(row) == 1
    assert row["comm"][0].decode() == "tt-sleeper"


def test_offcpu_stacks_and_folded(run):
    out, tid, _ = run
    stacks = [json.loads(line) for line in (out / "stacks.jsonl").read_text().splitlines()]
    mine = [s for s in stacks if s["stream"] == "offcpu"]
    kernel = [s for s in mine if s["kind"] == "kernel"]
    user = [s for s in mine if s["kind"] == "user"]
    assert kernel and user
    # leaf first: the tracing machinery is trimmed, the leaf is the scheduler
    assert any(s["frames"][0].startswith("__schedule") for s in kernel)
    assert any("nanosleep" in f for s in kernel for f in s["frames"])
    assert any("nanosleep" in f or "usleep" in f for s in user for f in s["frames"]), user
    sw = records(out, "switch")
    stacked = sw[(sw["tid"] == tid) & (sw["kstack_id"] >= 0)]
    ids = {s["id"] for s in kernel}
    assert set(stacked["kstack_id"].tolist()) <= ids
    folded = (out / "offcpu.folded").read_text().splitlines()
    lines = [l for l in folded if l.startswith("tt-sleeper;")]
    assert lines
    total_us = sum(int(l.rsplit(" ", 1)[1]) for l in lines)
    # blocked time: at least N sleeps of USEC, at most the switch records' total
    assert total_us >= N * USEC
    assert total_us <= (stacked["t_on_ns"] - stacked["t_off_ns"]).sum() / 1000 + 1
    assert all(";__schedule_[k]" in l for l in lines if "nanosleep" in l)
