"""The older kernels' code paths, run here: `--debug without=FEATURE` takes a kernel feature
as missing, so the fallback tailtrace takes on a kernel that lacks it (docs/kernels.md) runs
on this machine too, against the same oracles as the default path. The kernel matrix
(scripts/kernels.sh) runs them on the real old kernels; these keep them tested on every run.

  bpf-loop       the cpu event's records from sched_noloop.bpf.o (bpf_loop serves only
                 --listen's split of waits): no fallback, and three spinners on one CPU are
                 each held by their two siblings
  task-regs      wait reasons read at the top of the kernel stack: a pipe ping-pong blocks
                 in read(2) on its pipes' fds
  uprobe-cookie  a program pair per --span: 200 calls, 200 spans with their return values
  atomics        USDT spans paired through the hash map only
  fair-group-sched  no run queue reached from a task (se.cfs_rq): wakeup contexts told
                 apart only over the idle task, the rest marked a guess
Each fallback is said in one line naming the missing feature and the Linux version that has
it (or that it is a build option of the kernel), and recorded in meta.json kernel_fallbacks. Real BPF: run as root."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from analyze.explain import antagonists as A
from analyze.load.load import RUNQ_KINDS, WAKER_CTXS, load_run
from analyze.load.schema import load_schema, read_records
from tt_run import BUILD, helper, meta, needs_root, records, tailtrace

pytestmark = needs_root
SPAN_TARGET = BUILD / "tests" / "probes" / "span_target"
LINE = re.compile(r"^tailtrace: .+ needs? .+ \(Linux \d+\.\d+\+\)[:;] .+$", re.M)


def fallbacks(run_dir) -> dict:
    return {f["needs"]: f for f in meta(run_dir)["kernel_fallbacks"]}


@pytest.mark.serial
@pytest.mark.parametrize("hook", ["tp_btf", "raw_tp"])
def test_cpu_event_without_bpf_loop(tmp_path, hook):
    cpu = max(os.sched_getaffinity(0))
    p = tailtrace(tmp_path, "--debug", f"hook={hook},without=bpf-loop", "--events",
                  "runq,switch,cpu", "--", helper("hog"), "3", "1.5", str(cpu))
    assert p.returncode == 0, p.stderr
    assert "bounded loops" not in p.stderr and "bpf_loop" not in fallbacks(tmp_path)
    rows = A.df_runnable_occupants(load_run(tmp_path))
    spinners = [int(t) for t, n in rows.groupby("victim_tid")["ns"].sum().items() if n > 1e8]
    assert len(spinners) == 3
    for tid in spinners:
        mine = rows[rows["victim_tid"] == tid]
        held = mine.loc[mine["tid"].isin([t for t in spinners if t != tid]), "ns"].sum()
        assert held >= 0.5 * mine["ns"].sum()


@pytest.mark.parametrize("hook", ["tp_btf", "raw_tp", "tracepoint"])
def test_wait_reasons_from_the_kernel_stack(tmp_path, hook):
    p = tailtrace(tmp_path, "--debug", f"hook={hook},without=task-regs", "--events",
                  "runq,switch", "--", helper("pingpong"), "2000")
    assert p.returncode == 0, p.stderr
    assert meta(tmp_path)["evidence"]["wait_reason"] == "task_stack"
    sw = records(tmp_path, "switch")
    busy = [t for t in np.unique(sw["tid"]) if (sw["tid"] == t).sum() >= 1500]
    assert len(busy) == 2
    vol = sw[np.isin(sw["tid"], busy) & (sw["voluntary"] == 1)]
    in_read = vol[vol["syscall"] == 0]
    assert len(in_read) >= 0.9 * len(vol)
    # read(2)'s first argument: each thread's pipe, a small fd
    assert set(np.unique(in_read["wait_addr"]).tolist()) <= set(range(3, 16))


def test_function_spans_without_cookies(tmp_path):
    p = tailtrace(tmp_path, "--debug", "without=uprobe-cookie", "--events", "spans", "--span",
                  f"{SPAN_TARGET}:tt_span_work", "--", str(SPAN_TARGET), "work", "200", "500")
    assert p.returncode == 0, p.stderr
    s = read_records(tmp_path / "spans.bin", load_schema(tmp_path), "span")
    assert len(s) == 200 and (s["span_id"] == 0).all()
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(200)]


def test_second_span_without_cookies_gets_its_index(tmp_path):
    p = tailtrace(tmp_path, "--debug", "without=uprobe-cookie", "--events", "spans",
                  "--span", f"{SPAN_TARGET}:tt_span_spin", "--span",
                  f"{SPAN_TARGET}:tt_span_work", "--", str(SPAN_TARGET), "work", "50", "0")
    assert p.returncode == 0, p.stderr
    s = read_records(tmp_path / "spans.bin", load_schema(tmp_path), "span")
    assert len(s) == 50 and (s["span_id"] == 1).all()


def test_return_site_spans_are_refused_without_cookies(tmp_path):
    """A function whose file links an unwinder ends by uprobes on its returns, which tell
    their sites apart by cookie: refused in one line, and the rest of the run goes on."""
    p = tailtrace(tmp_path, "--debug", "without=uprobe-cookie", "--span",
                  f"{BUILD / 'tests' / 'probes' / 'span_throw'}:tt_throw_work", "--",
                  helper("sleeper"), "10", "1000")
    assert p.returncode == 0, p.stderr
    line, = [x for x in p.stderr.splitlines() if "tt_throw_work" in x and "needs" in x]
    assert "BPF cookies on uprobes (Linux 5.15+); recording without it" in line
    assert len(records(tmp_path, "switch")) >= 10
    f = fallbacks(tmp_path)["BPF cookies on uprobes"]
    assert f["refused"]


def test_usdt_spans_without_atomics(tmp_path):
    p = tailtrace(tmp_path, "--debug", "without=atomics", "--events", "spans", "--span",
                  f"usdt:{SPAN_TARGET}:span_target:work", "--", str(SPAN_TARGET), "overlap",
                  "300")
    assert p.returncode == 0, p.stderr
    s = read_records(tmp_path / "spans.bin", load_schema(tmp_path), "span")
    # 300 marks open at once, half ended by another thread: all paired by their id
    assert len(s) == 300
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(300)]


def test_wakeup_contexts_without_a_run_queue_reached_from_the_task(tmp_path):
    """A kernel built without CONFIG_FAIR_GROUP_SCHED has no se.cfs_rq: the programs load
    (the read is dead code) and every wakeup is a guess but those over the idle task."""
    p = tailtrace(tmp_path, "--debug", "without=fair-group-sched", "--events", "runq,switch",
                  "--", helper("pingpong"), "2000")
    assert p.returncode == 0, p.stderr
    assert ("wakeup contexts (a task, or an interrupt) need CONFIG_FAIR_GROUP_SCHED (a kernel "
            "built with it): ") in p.stderr
    f = fallbacks(tmp_path)["CONFIG_FAIR_GROUP_SCHED"]
    assert f["since"] is None and not f["refused"] and "marked a guess" in f["loses"]
    rq = records(tmp_path, "runq")
    woken = rq[rq["kind"] == RUNQ_KINDS.index("wakeup")]
    ctx = {WAKER_CTXS[c] for c in np.unique(woken["waker_ctx"])}
    assert "task_guess" in ctx and ctx <= {"task_guess", "hardirq", "unknown"}, ctx

