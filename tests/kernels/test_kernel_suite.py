"""The kernel suite: every feature of tailtrace against an oracle known by construction, run
on each kernel of the matrix (scripts/kernels.sh boots Debian's 5.10, 6.1 and 6.12 under
QEMU, and runs it on the host's own). Each test records, as junit properties, the feature,
its outcome (pass, or refused: tailtrace said in one line which kernel feature is missing
and which Linux version has it, and went on without it), the hook the scheduler probes used,
every fallback tailtrace took (meta.json kernel_fallbacks) and its figures; the matrix is
built from them (scripts/lib/kernel_matrix.py).

Only an optional feature may be refused: --span usdt:, --listen, --events ...,locks,
--events ...,irq, and the wait-reason split; and only on a kernel older than the version the
refusal names (a refusal on one that has it fails the test). The default events, function spans,
--aggregate, --flight-recorder and the main job must pass on every kernel.

The bounds are those of the host's own tests where the figure is a share of a window
(runnable 2/3 +-15%); where it is a duration the VM's software emulation stretches, an
order of magnitude. Real BPF: run as root.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from analyze.explain import antagonists as A
from analyze.load.load import OCC_HARDIRQ, OCC_IRQ_TIMER, load_run
from analyze.load.schema import load_schema, read_records
from analyze.render.summary import records_throttled_ns
from quota_case import PERIOD_US, QUOTA_US, SLEEP_US, QuotaGroup, cpu_v1_root, run_service
from tt_run import (BUILD, ROOT, cgroup2_root, clipped_sum, free_port, helper, intervals,
                    json_lines, meta, needs_root, records, tailtrace)

pytestmark = needs_root
SPAN_TARGET = BUILD / "tests" / "probes" / "span_target"
HOLDER = BUILD / "tests" / "probes" / "lock_holder"
SLOW = 600        # s: a tailtrace run under software emulation, at most
REFUSED = re.compile(r"^tailtrace: (?P<what>.+?) needs (?P<needs>.+?) \(Linux (?P<since>\d+\.\d+)\+\)"
                     r"; recording without it", re.M)


def cpu_pinned() -> int:
    return max(os.sched_getaffinity(0))


def report(record_property, run_dir: Path | None, outcome: str = "pass", **figures) -> None:
    """The junit properties the matrix reads (the feature itself: the test's feature mark,
    recorded before it runs, so that a failure is filed under it too), with the kernel events
    the run wrote, lost and left unmatched (meta.json, summed over the kinds)."""
    m = meta(run_dir) if run_dir is not None and (run_dir / "meta.json").exists() else {}
    record_property("outcome", outcome)
    record_property("hook", (m.get("hooks") or {}).get("runq") or (m.get("hooks") or {}).get(
        "switch") or "")
    record_property("fallbacks", json.dumps(m.get("kernel_fallbacks") or []))
    record_property("figures", json.dumps({k: round(v, 4) if isinstance(v, float) else v
                                           for k, v in figures.items()}))
    if m:
        record_property("events", json.dumps({
            "events": sum((m.get("events") or {}).values()),
            "lost": sum((m.get("lost_events") or {}).values()),
            "unmatched": sum((m.get("unmatched_events") or {}).values())}))


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """The running kernel's (major, minor): '6.12.117+deb13-amd64' -> (6, 12)."""
    m = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    return int(m[1]), int(m[2])


def refused(record_property, stderr: str, what: str, run_dir: Path, **figures) -> bool:
    """Did tailtrace refuse `what` in its one line? If so, report the test's feature refused,
    with the kernel feature it needs and the version that has it. A refusal on a kernel at
    or past that version is feature detection gone wrong: the test fails."""
    for m in REFUSED.finditer(stderr):
        if what in m["what"]:
            since = tuple(int(x) for x in m["since"].split("."))
            assert kernel_version() < since, (
                f"{m['what']} refused as needing {m['needs']} (Linux {m['since']}+) on "
                f"{os.uname().release}, which has it: {m[0]}")
            report(record_property, run_dir, "refused", needs=m["needs"],
                   since=m["since"], **figures)
            return True
    return False


def keep_run(run_dir: Path, what: str) -> None:
    """A failed run's directory, kept beside the matrix's results (scripts/kernels.sh --out,
    writable from the guest) for a look after the VM is gone."""
    out = os.environ.get("TT_KERNEL_OUT")
    if out:
        dest = Path(out) / f"{os.environ.get('TT_KERNEL_NAME', 'host')}-{what}"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("perf.data"))


def ok(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 0, p.stderr[-3000:]


# ---- default events: runq, switch, offcpu, cpu -------------------------------------------

@pytest.mark.serial
@pytest.mark.feature("default events")
def test_default_events_busy_threads(tmp_path, record_property):
    """Three SCHED_RR spinners pinned to one CPU for 1.5 s, under the default events: each is
    runnable 2/3 of its window, runnable + running cover it, running agrees with its own CPU
    clock; and the cpu event says its two siblings held the CPU while it waited."""
    p = tailtrace(tmp_path, "--", helper("busy"), "3", "1.5", str(cpu_pinned()), timeout=SLOW)
    ok(p)
    threads, rq, sw = json_lines(p.stdout), records(tmp_path, "runq"), intervals(tmp_path)
    assert len(threads) == 3
    shares = []
    for th in threads:
        lo, hi = th["t_start_ns"], th["t_end_ns"]
        window = hi - lo
        r, s = rq[rq["tid"] == th["tid"]], sw[sw["tid"] == th["tid"]]
        runnable = clipped_sum(r["t_runnable_ns"], r["t_run_ns"], lo, hi)
        running = window - clipped_sum(s["t_off_ns"], s["t_on_ns"], lo, hi)
        assert runnable == pytest.approx(window * 2 / 3, rel=0.15), th
        assert runnable + running == pytest.approx(window, rel=0.05), th
        assert running == pytest.approx(th["cpu_ns"], abs=0.05 * window), th
        shares.append(runnable / window)
    run = load_run(tmp_path)
    rows = A.df_runnable_occupants(run)
    tids = [t["tid"] for t in threads]
    sib = []
    for tid in tids:
        mine = rows[rows["victim_tid"] == tid]
        held = mine.loc[mine["tid"].isin([t for t in tids if t != tid]), "ns"].sum()
        sib.append(held / mine["ns"].sum())
    assert min(sib) >= 0.5, sib
    report(record_property, tmp_path, runnable_share=float(np.mean(shares)),
           siblings_held=float(min(sib)))


# ---- --cgroup ------------------------------------------------------------------------------

def cgroup2_dir(tmp_path: Path) -> Path:
    """The cgroup v2 hierarchy: the machine's, or in a VM mounted here for the test."""
    root = cgroup2_root()
    if root is None and os.environ.get("TT_KERNEL_VM"):
        root = tmp_path / "cgroup2"
        root.mkdir()
        subprocess.run(["mount", "-t", "cgroup2", "none", str(root)], check=True)
    if root is None:
        pytest.skip("no cgroup v2 hierarchy mounted")
    return root


@pytest.mark.feature("--cgroup")
def test_cgroup_filter_one_sleeper_of_two(tmp_path, record_property):
    """Two sleepers (1 ms sleeps), one moved into a new cgroup v2: under --cgroup the default
    events record that one's switches and waits only, and many of them."""
    cg = cgroup2_dir(tmp_path) / f"tt-kernel-{os.getpid()}"
    cg.mkdir()
    sleepers = [subprocess.Popen([helper("sleeper"), "100000", "1000"], stdout=subprocess.PIPE,
                                 text=True) for _ in range(2)]
    try:
        tids = [json_lines(s.stdout.readline())[0]["tid"] for s in sleepers]
        (cg / "cgroup.procs").write_text(str(tids[0]))
        p = tailtrace(tmp_path, "--cgroup", str(cg), "--duration", "1", timeout=SLOW)
    finally:
        for s in sleepers:
            s.kill()
            s.wait()
        cg.rmdir()
    ok(p)
    sw, rq = records(tmp_path, "switch"), records(tmp_path, "runq")
    assert set(sw["pid"].tolist()) == {tids[0]} and set(rq["pid"].tolist()) == {tids[0]}
    assert len(sw) >= 50 and len(rq) >= 50, (len(sw), len(rq))
    report(record_property, tmp_path, switches=len(sw), waits=len(rq))


@pytest.mark.feature("throttled")
@pytest.mark.parametrize("sleep_us,aggregate", [(0, False), (SLEEP_US, False), (SLEEP_US, True)],
                         ids=["spin", "serve", "aggregate"])
def test_cpu_quota_throttling_as_the_kernel_counts_it(tmp_path, record_property, sleep_us,
                                                      aggregate):
    """A service needing 44% of a CPU under a quota of 20 ms per 100 ms (tests/probes/
    quota_case.py), on cgroup v2 (the host's cgroup v1 cpu controller where v2 has no cpu
    controller): the runnable time its waits spent throttled, summed over its run-queue
    records (with --aggregate, its throttled histogram), is within 10% of what the kernel
    counted (cpu.stat) over the run; the run names the quota in meta.json."""
    v2 = cgroup2_dir(tmp_path)
    if "cpu" in (v2 / "cgroup.controllers").read_text().split():
        root, version = v2, 2
    elif cpu_v1_root() is not None:
        root, version = cpu_v1_root(), 1
    else:
        pytest.skip("no cgroup hierarchy with the cpu controller")
    g = QuotaGroup(root, version, f"tt-kernel-quota-{os.getpid()}", QUOTA_US)
    try:
        p, bracket_ns = run_service(tailtrace, tmp_path, g, duration_s=8, timeout=SLOW,
                                    sleep_us=sleep_us,
                                    args=("--aggregate",) if aggregate else None)
    finally:
        g.close()
    ok(p)
    meta = json.loads((tmp_path / "meta.json").read_text())
    quota = next(q for q in meta["cpu_quotas"] if q["path"] == g.path)
    assert (quota["quota_us"], quota["period_us"]) == (QUOTA_US, PERIOD_US)
    kernel_ns = quota["throttled_ns"][1] - quota["throttled_ns"][0]
    if aggregate:   # the waits switched in while tracing: a first one noted before is left out
        ours = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]["throttled"][
            "total"]["sum_ns"]
    else:           # the run-queue records switched in between the kernel's two reads
        ours = records_throttled_ns(load_run(tmp_path).runq, quota)
    # the kernel throttled it for a good part of the run (4-6 s alone; 1.7 s in the host's pass
    # beside the parallel phase, whose load leaves the service less CPU to spend its quota on)
    assert kernel_ns >= 0.5e9 and kernel_ns <= bracket_ns, (kernel_ns, bracket_ns)
    assert abs(ours - kernel_ns) <= 0.10 * kernel_ns, (ours, kernel_ns)
    report(record_property, tmp_path, cgroup=version, clock=meta["evidence"]["throttle"],
           sleep_us=sleep_us, aggregate=aggregate, kernel_ms=kernel_ns / 1e6,
           ours_ms=ours / 1e6)


# ---- wait reasons and wakers ------------------------------------------------------------

@pytest.mark.feature("wait reasons")
def test_wait_reasons_and_wakers_pingpong(tmp_path, record_property):
    """Two threads pass a byte over two pipes 2,000 times: each blocks in read() and is woken
    by the other. The wakers must name the other thread; the wait reasons (where the kernel
    lets tailtrace read them) must say read."""
    p = tailtrace(tmp_path, "--events", "runq,switch", "--", helper("pingpong"), "2000",
                  timeout=SLOW)
    ok(p)
    rq, sw = records(tmp_path, "runq"), records(tmp_path, "switch")
    tids = sorted(set(rq["tid"].tolist()) & set(sw["tid"].tolist()))
    busy = [t for t in tids if (rq["tid"] == t).sum() >= 1500]
    assert len(busy) == 2, {t: int((rq["tid"] == t).sum()) for t in tids}
    woken_by_other = []
    for me in busy:
        other = busy[1] if me == busy[0] else busy[0]
        mine = rq[(rq["tid"] == me) & (rq["kind"] == 0)]
        woken_by_other.append(float((mine["waker_tid"] == other).mean()))
    assert min(woken_by_other) >= 0.9, woken_by_other
    # a write() wakes the reader from process context: where tailtrace reads the waker's
    # preempt_count (per-CPU layout from BTF, pcpu_hot on 6.2-6.14), it must say so
    waker_ctx = meta(tmp_path)["evidence"]["waker_ctx"]
    mine = rq[np.isin(rq["tid"], busy) & (rq["kind"] == 0)]
    task_ctx = float((mine["waker_ctx"] == (1 if waker_ctx == "preempt_count" else 6)).mean())
    assert task_ctx >= 0.9, (waker_ctx, task_ctx)
    vol = sw[np.isin(sw["tid"], busy) & (sw["voluntary"] == 1)]
    if refused(record_property, p.stderr, "wait-reason", tmp_path,
               woken_by_other=min(woken_by_other)):
        assert (vol["syscall"] == -1).all()
        return
    in_read = float((vol["syscall"] == 0).mean())
    assert in_read >= 0.9, in_read
    report(record_property, tmp_path, in_read=in_read,
           woken_by_other=min(woken_by_other), waker_ctx=waker_ctx, task_ctx=task_ctx)


# ---- spans -----------------------------------------------------------------------------

@pytest.mark.feature("--span BIN:SYMBOL")
def test_function_spans(tmp_path, record_property):
    """1,000 calls of tt_span_work, each sleeping 500 us and returning 2i+1: 1,000 spans with
    those return values, each at least 500 us; their sleeps' off-CPU user stacks go on past
    the uretprobe's trampoline (where tt_span_work's return address was) to main.
    Known bug: in about one full suite of three on 6.1 (CI, and here), and once on 5.10 in
    CI, the sleep's stack reads clock_nanosleep -> main, tt_span_work's own frame missing:
    the frame-pointer walk's answer (libc's clock_nanosleep keeps no frame pointer), as when
    the DWARF unwind of the copy stopped in libc (not understood yet: the unwind through the
    pending return, or a copy unwound after the process was gone, are the suspects). It is
    marked xfail by that symptom alone, on any kernel; any other failure fails, its message
    led by how the unwinds ended."""
    p = tailtrace(tmp_path, "--events", "switch,offcpu,spans", "--span",
                  f"{SPAN_TARGET}:tt_span_work", "--", str(SPAN_TARGET), "work", "1000", "500",
                  timeout=SLOW)
    ok(p)
    s = read_records(tmp_path / "spans.bin", load_schema(tmp_path), "span")
    assert len(s) == 1000
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(1000)]
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert (dur >= 500_000).all()
    stacks = [json.loads(line)["frames"] for line in
              (tmp_path / "stacks.jsonl").read_text().splitlines()]
    inside = [[f.rpartition("+0x")[0] or f for f in fr] for fr in stacks
              if any(f.startswith("tt_span_work+") for f in fr)]
    skipped_frame = any([f.rpartition("+0x")[0] for f in fr[:2]] == ["clock_nanosleep", "main"]
                        for fr in stacks)
    if not inside:
        keep_run(tmp_path, "function-spans")
    if not inside and skipped_frame:
        report(record_property, tmp_path, outcome="xfail (known: tt_span_work's frame skipped)")
        pytest.xfail("the sleep's stack skips tt_span_work (known, not yet understood)")
    us = meta(tmp_path).get("user_stacks", {})
    sleeps = [fr for fr in stacks if any(f.startswith("clock_nanosleep") for f in fr)]
    assert inside, (f"ended {us.get('ended')} stopped_in {us.get('stopped_in')} "
                    f"copies {us.get('copies')} lost {us.get('copies_lost')}", sleeps[:2], us)
    for fr in inside:
        assert "main" in fr[fr.index("tt_span_work"):], fr
    report(record_property, tmp_path, spans=int(len(s)),
           median_ms=float(np.median(dur) / 1e6), stacks_through_span=len(inside))


def usdt_spans(tmp_path, record_property, name, mode, what):
    p = tailtrace(tmp_path, "--events", "spans", "--span",
                  f"usdt:{SPAN_TARGET}:span_target:{name}", "--", str(SPAN_TARGET), *mode,
                  timeout=SLOW)
    if refused(record_property, p.stderr, what, tmp_path):
        return
    ok(p)
    s = read_records(tmp_path / "spans.bin", load_schema(tmp_path), "span")
    assert len(s) == 200
    assert sorted(s["ret"].tolist()) == [2 * i + 1 for i in range(200)]
    assert ((s["t_end_ns"] - s["t_start_ns"]).astype(np.int64) >= 500_000).all()
    report(record_property, tmp_path, spans=int(len(s)))


@pytest.mark.feature("--span usdt:")
def test_usdt_spans(tmp_path, record_property):
    """The same 200 calls, timed between their USDT probes work__start(i) and work__done(i,
    2i+1), paired by i."""
    usdt_spans(tmp_path, record_property, "work", ["work", "200", "500"], "--span usdt")


@pytest.mark.feature("--span usdt: one mark")
def test_usdt_one_mark_spans(tmp_path, record_property):
    """The same 200 calls, each followed by one mark once__span(i, t_start_ns, 2i+1) that
    carries its start."""
    usdt_spans(tmp_path, record_property, "once", ["once", "200", "500", "0"], "--span usdt")


@pytest.mark.feature("--span usdt: trace context")
def test_usdt_spans_trace_context(tmp_path, record_property):
    """orders-server's one mark request__span carries each request's traceparent and
    tracestate values in arg3 and arg4: of 40 requests by turns valid, valid with a long
    tracestate, malformed and without (test_usdt_spans.orders_with_trace_contexts), the 20
    valid ones' spans join their callers' traces, read from the target's memory at the mark."""
    from test_tcp_spans import check_trace_contexts
    from test_usdt_spans import usdt_context_run

    sent, out = usdt_context_run(tmp_path, "request", timeout=SLOW)
    if refused(record_property, out, "--span usdt", tmp_path):
        return
    got = check_trace_contexts(tmp_path, sent)
    report(record_property, tmp_path, **got)


@pytest.mark.feature("--span tcp")
def test_tcp_spans(tmp_path, record_property):
    """tcp_server.py answers each request 50 ms after it: 20 requests on one connection are 20
    spans of its thread, each at least 50 ms: the server's delay after the last byte (the
    client's two writes 5 ms apart add up to 5 ms more, less the delay of the first one's
    delivery, which reached 0.7 ms under emulation on 5.10). A span ended by the server's
    delayed ACK (40 ms) would be shorter."""
    from test_spans import spans, tailtrace_bg
    from test_tcp_spans import DELAY_MS, TcpServer, client

    srv = TcpServer()
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.proc.pid), "--events", "spans",
                                "--span", "tcp", "--duration", str(SLOW))
        got = []
        client(srv, 20, got)
        tt.send_signal(2)
        _, err = tt.communicate(timeout=SLOW)
        assert tt.returncode == 0, head + err
    finally:
        srv.stop()
    s = spans(tmp_path)
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert len(s) == len(got) == 20
    assert (dur >= DELAY_MS * 1_000_000).all(), dur.min()
    assert set(s["tid"]) == set(srv.threads.values()) and len(srv.threads) == 1
    report(record_property, tmp_path, spans=int(len(s)), median_ms=float(np.median(dur) / 1e6))


@pytest.mark.feature("--span tcp traceparent")
def test_tcp_spans_traceparent(tmp_path, record_property):
    """40 requests on one connection, by turns with a valid traceparent (named in lower case,
    or "TraceParent"), a malformed one and none (test_tcp_spans.traced_requests): the 20
    valid ones' spans join their callers' traces in the run and in the OTLP export, read from
    the bytes the server's recv() copied (its registers: bpf_task_pt_regs, or the top of its
    kernel stack before 5.15)."""
    from test_tcp_spans import check_trace_contexts, traced_run

    sent, out = traced_run(tmp_path, 40)
    if refused(record_property, out, "traceparent", tmp_path):
        return
    got = check_trace_contexts(tmp_path, sent)
    report(record_property, tmp_path, **got)


@pytest.mark.feature("--span tcp traceresponse")
def test_tcp_spans_traceresponse(tmp_path, record_property):
    """30 HTTP requests whose answers carry, by turns, a valid traceresponse (sent in one
    send or a two-buffer sendmsg, for a request with a traceparent or without), a malformed
    one and none (test_tcp_spans.answered_requests): the 18 valid ones' spans go under the
    server's own span, read from the bytes the server's send copied from (its registers, and
    the socket's write_seq)."""
    from test_tcp_spans import answered_requests, check_answer_contexts, traced_run

    want, out = traced_run(tmp_path, 30, send=answered_requests)
    if refused(record_property, out, "traceparent", tmp_path):
        return
    got = check_answer_contexts(tmp_path, want)
    report(record_property, tmp_path, **got)


@pytest.mark.feature("--pid of a pre-fork server")
def test_process_tree_prefork_server(tmp_path, record_property):
    """prefork_server's parent only listens; its two forked workers serve. Traced by the
    parent's pid with --span tcp: 20 requests (each 2 ms of CPU, then 3 ms asleep) are 20
    spans in the workers, and the workers' switches are recorded (process trees: the filter
    follows a task's ancestry, docs/probes/README.md)."""
    from test_servers import Server, drive
    from test_spans import spans, tailtrace_bg

    srv = Server("prefork_server", 2)
    try:
        tt, head = tailtrace_bg(tmp_path, "--pid", str(srv.info["pid"]), "--span",
                                f"tcp:{srv.info['port']}", "--duration", str(SLOW))
        errors: list = []
        drive(srv.info["port"], 20, errors)
        tt.send_signal(2)
        _, err = tt.communicate(timeout=SLOW)
        assert tt.returncode == 0 and not errors, head + err + str(errors)
    finally:
        srv.stop()
    s = spans(tmp_path)
    workers = set(s["pid"].tolist())
    sw = records(tmp_path, "switch")
    assert len(s) == 20 and srv.info["pid"] not in workers, (len(s), workers)
    assert set(sw["pid"].tolist()) >= workers and len(sw) >= 20, (len(sw), workers)
    dur = (s["t_end_ns"] - s["t_start_ns"]).astype(np.int64)
    assert (dur >= 3_000_000).all()            # the sleep alone is 3 ms
    report(record_property, tmp_path, spans=int(len(s)), workers=len(workers),
           median_ms=float(np.median(dur) / 1e6))


# ---- locks ---------------------------------------------------------------------------------

@pytest.mark.feature("--events …,locks")
def test_locks_mutex_held_2ms_100_times(tmp_path, record_property):
    """lock_holder holds its mutex 100 times for 2 ms: 100 holds, and their median agrees with
    the holder's own clock."""
    p = tailtrace(tmp_path, "--events", "runq,switch,offcpu,cpu,locks", "--", str(HOLDER),
                  "100", "2", timeout=SLOW)
    if refused(record_property, p.stderr, "--events locks", tmp_path):
        return
    ok(p)
    f = {k: int(v, 0) for k, v in re.findall(r"(\w+)=(0x[0-9a-f]+|\d+)", p.stdout)}
    r = read_records(tmp_path / "locks.bin", load_schema(tmp_path), "lock")
    mine = r[(r["tid"] == f["holder_tid"]) & (r["mutex"] == f["mutex"])]
    assert len(mine) == f["holds"] == 100
    hold_ms = float(np.median(mine["t_released_ns"] - mine["t_acquired_ns"]) / 1e6)
    own_ms = f["hold_median_ns"] / 1e6
    assert 2.0 <= own_ms and abs(hold_ms - own_ms) <= max(0.3, 0.15 * own_ms), (hold_ms, own_ms)
    report(record_property, tmp_path, holds=int(len(mine)),
           median_hold_ms=hold_ms, own_clock_ms=own_ms)


# ---- the irq event ----------------------------------------------------------------------

@pytest.mark.feature("--events …,irq")
def test_irq_event_sees_the_timer(tmp_path, record_property):
    """Two spinners keep a CPU busy for 1.5 s: the kernel's timer interrupts it there, and the
    cpu records must hold those interrupts, each a short slice of class irq."""
    p = tailtrace(tmp_path, "--events", "runq,switch,cpu,irq", "--", helper("hog"), "2", "1.5",
                  str(cpu_pinned()), timeout=SLOW)
    if refused(record_property, p.stderr, "--events irq", tmp_path):
        return
    ok(p)
    seg = A.df_occupancy(load_run(tmp_path))
    seg = seg[seg["cpu"] == cpu_pinned()]
    timer = seg[A.irq_code(seg["flags"]) == A.irq_code(OCC_HARDIRQ | OCC_IRQ_TIMER << 16)]
    span_s = (timer["t_from_ns"].max() - timer["t_from_ns"].min()) / 1e9
    assert span_s > 1.0, span_s
    per_s = len(timer) / span_s
    # HZ is 100..1000, and a busy CPU's tick is not stopped
    assert per_s >= 50, (len(timer), span_s)
    report(record_property, tmp_path, timer_irqs_per_s=per_s)


# ---- --aggregate and --listen ------------------------------------------------------------

@pytest.mark.serial
@pytest.mark.feature("--aggregate")
def test_aggregate_pinned_spinners(tmp_path, record_property):
    """Three SCHED_RR spinners pinned to one CPU: each one's run-queue histogram sums to its
    window minus its own CPU time (its clock)."""
    p = tailtrace(tmp_path, "--aggregate", "--events", "runq,switch", "--", helper("busy"), "3",
                  "1.5", str(cpu_pinned()), timeout=SLOW)
    ok(p)
    agg = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]["runq"]
    ratios = []
    for th in json_lines(p.stdout):
        waited = th["t_end_ns"] - th["t_start_ns"] - th["cpu_ns"]
        h, = [t for t in agg["threads"] if t["tid"] == th["tid"]]
        # the histogram also holds the waits before and after the spin window: the two other
        # threads' 100 ms RR slices, longer under emulation (a 5.10 guest: 1.171 s summed
        # against 0.921 s waited in the window), so 300 ms
        assert waited * 0.95 <= h["sum_ns"] <= waited * 1.05 + 300e6, (h["sum_ns"], waited)
        ratios.append(h["sum_ns"] / waited)
    report(record_property, tmp_path, sum_over_waited=float(np.median(ratios)),
           waits=meta(tmp_path)["evidence"]["runq_wait"])


@pytest.mark.serial
@pytest.mark.feature("--listen")
def test_listen_serves_the_spinners(tmp_path, record_property):
    """--listen while three pinned spinners run: the exposition's run-queue latency of their
    process adds up to what they waited (their clocks), scraped over HTTP."""
    port = free_port()
    out = tmp_path / "rec"
    proc = subprocess.Popen([str(BUILD / "probes" / "tailtrace"), "--out", str(out), "--listen",
                             f"127.0.0.1:{port}", "--", helper("busy"), "3", "1.5",
                             str(cpu_pinned()), "4"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines, text = [], ""
        deadline = time.monotonic() + SLOW
        while len(lines) < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                lines.append(json.loads(line))
        assert len(lines) == 3, proc.stderr.read() if proc.poll() is not None else "no output"
        time.sleep(1.0)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=SLOW)
    if refused(record_property, err, "--listen", out):
        return
    sums = [float(v) for v in re.findall(
        r'^tailtrace_runqueue_latency_seconds_sum\{[^}]*comm="tt-busy"[^}]*\} (\S+)', text, re.M)]
    assert sums, text[:2000]
    waited = sum(t["t_end_ns"] - t["t_start_ns"] - t["cpu_ns"] for t in lines) / 1e9
    got = sum(sums)
    assert waited * 0.9 <= got <= waited * 1.1 + 0.6, (got, waited)
    report(record_property, out, served_over_waited=got / waited)


# ---- the flight recorder ------------------------------------------------------------------

@pytest.mark.serial
@pytest.mark.feature("--flight-recorder")
def test_flight_recorder_catches_injected_stalls(tmp_path, record_property):
    """tt-stall freezes both CPUs for 60 ms every 2 s while span_target's 10 ms calls run under
    --flight-recorder with a latency>30ms trigger: the stalls inside the run are overlapped by
    a capture's window (most of them: a slot captures its slowest request, and a stall that
    begins while the thread runs between two calls delays none: under emulation that running
    took a tenth of 2 ms calls' time), and a capture's report adds up. 12 s of calls: some 5
    stalls inside the run (with 6 s, 2: one missed failed a 5.10 run)."""
    log = tmp_path / "stalls.txt"
    # the stalls last as long as the run, however long tailtrace takes to load under emulation
    # (on 5.10 it once took longer than 9 s of stalls); each is logged as it ends
    stall = subprocess.Popen([helper("stall"), "2000", "60", str(SLOW), str(log)])
    try:
        out = tmp_path / "rec"
        p = tailtrace(out, "--flight-recorder", "8", "--trigger", "latency>30ms",
                      "--max-captures-per-min", "60", "--span", f"{SPAN_TARGET}:tt_span_work",
                      "--", str(SPAN_TARGET), "work", "1200", "10000", timeout=SLOW)
    finally:
        stall.terminate()
        stall.wait(timeout=SLOW)
    ok(p)
    m = meta(out)
    t0, t1 = m["mono_start_ns"], m["mono_end_ns"]
    stalls = [tuple(map(int, line.split()[1:])) for line in log.read_text().splitlines()]
    stalls = [(a, b) for a, b in stalls if a > t0 + 500_000_000 and b < t1 - 1_000_000_000]
    assert stalls, "no stall fell inside the run"
    caps = [json.loads(line) for line in (out / "captures.jsonl").read_text().splitlines()]
    windows = []
    for c in caps:
        cm = json.loads((out / c["dir"] / "meta.json").read_text())["capture"]
        windows.append((cm["t0_ns"], cm["t1_ns"]))
    caught = sum(any(w0 <= b and a <= w1 for w0, w1 in windows) for a, b in stalls)
    assert caught >= 0.6 * len(stalls), (caught, stalls, windows)
    from analyze.pipeline import build_report
    s = build_report(out / caps[0]["dir"], plots=False)
    assert all(s["checks"]["bands_add_up"].values()), s["checks"]
    report(record_property, out, captures=len(caps), stalls=len(stalls),
           caught=caught)


# ---- the main job ------------------------------------------------------------------------

@pytest.mark.feature("main job")
def test_main_job(tmp_path, record_property):
    """./run.sh --workload pool --conns 20 --requests 2000: the report closes (>= 99.9% of the
    requests' parts add up to their latency). The build is the suite's (scripts/kernels.sh
    builds it first): --no-build."""
    out = tmp_path / "run"
    p = subprocess.run([str(ROOT / "run.sh"), "--workload", "pool", "--conns", "20",
                        "--requests", "2000", "--out", str(out), "--no-build"], cwd=ROOT,
                       capture_output=True,
                       text=True, timeout=3 * SLOW, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-4000:]
    s = json.loads((out / "summary.json").read_text())
    if not (s["closure_ratio"] >= 0.999 and all(s["checks"]["bands_add_up"].values())):
        keep_run(out, "main-job")
    assert s["requests"] == 2000
    assert s["closure_ratio"] >= 0.999, s["checks"]
    assert all(s["checks"]["bands_add_up"].values()), s["checks"]
    report(record_property, out, closure=s["closure_ratio"],
           p99_ms=s["latency_ms"]["p99"])
