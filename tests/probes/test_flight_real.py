"""The flight recorder on real BPF (tailtrace --flight-recorder), with injected stalls whose
times are known: orders-server's orders-ledger thread holds the lock every order takes for
40 ms every 3 s (--stall-every-ms/--stall-ms, each logged with its CLOCK_MONOTONIC times).

Oracles: every stall inside the run is overlapped by a capture window; each such capture's
report names orders-ledger; nothing but captures reaches the disk; the exporter's histogram
carries an exemplar naming a capture; bad input is refused before anything runs.
Bounded in time (~30 s). Real BPF: run as root."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from orders_proc import Server
from test_spans import BUILD, TAILTRACE, expect_error
from tt_run import free_port, read_line, records

SERVER = BUILD / "workloads" / "server" / "orders-server"
SPAN_TARGET = BUILD / "tests" / "probes" / "span_target"
HTTPLOAD = BUILD / "workloads" / "httpload" / "httpload"
USDT = f"usdt:{HTTPLOAD}:httpload:request"
# Alone (scripts/lib/tests.sh): which request a capture holds depends on timing, and another
# test's uprobes being attached or removed makes a uprobe hit wait on the kernel's uprobes lock
# (a second blocked switch-out under the same user stack: tt-deepstacks' path seen twice).
pytestmark = pytest.mark.serial


def server(tmp: Path, *extra: str) -> tuple[Server, str]:
    srv = Server("--workers", "16", "--sleep-us", "2000", *extra)
    return srv, srv.url


def stop(srv: Server) -> None:
    srv.stop()


def test_every_lock_stall_is_captured_and_explained(tmp_path):
    log = tmp_path / "stalls.txt"
    srv, url = server(tmp_path, "--stall-every-ms", "1500", "--stall-ms", "40",
                      "--stall-log", str(log))
    out = tmp_path / "run"
    try:
        p = subprocess.run([str(TAILTRACE), "--out", str(out), "--flight-recorder", "10",
                            "--trigger", "latency>15ms", "--max-captures-per-min", "60",
                            "--also-pid", str(srv.pid), "--span", USDT, "--",
                            str(HTTPLOAD), "--model", "pool", "--conns", "20", "--rate", "1000",
                            "--duration", "14", "--url", url],
                           capture_output=True, text=True, timeout=120)
    finally:
        stop(srv)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "meta.json").read_text())
    # the stalls while httpload sent (on a slow machine the run may end well after that)
    t0 = meta["mono_start_ns"]
    t1 = min(meta["mono_end_ns"], t0 + 14_000_000_000)
    stalls = [tuple(map(int, line.split()[1:])) for line in log.read_text().splitlines()]
    stalls = [(a, b) for a, b in stalls if a > t0 + 500_000_000 and b < t1 - 1_000_000_000]
    assert len(stalls) >= 6
    # the run directory holds only the recorder's files: no per-event streams
    assert not (out / "switches.bin").exists() and not (out / "runq.bin").exists()
    fl = meta["flight"]
    assert fl["trigger"] == "latency>15ms" and fl["captures"] >= len(stalls)
    assert fl["failed"] == 0 and fl["refused"] == 0
    # no --flight-mb: the cap followed the record rate (1,000 requests a second need a few MB
    # a second: the 64 MB floor, not the 1024 MB ceiling), and it held the whole window
    assert fl["auto_size"] is True and fl["peak_rate_mb_s"] > 0
    assert 64 <= fl["max_mb"] < 1024, fl
    assert fl["max_mb"] * 2**20 >= 2 * fl["peak_rate_mb_s"] * 2**20 * fl["seconds"], fl
    assert fl["evicted_early"] == 0 and fl["held_s"] >= 0.8 * fl["seconds"], fl
    assert fl["memory_peak_bytes"] <= fl["max_mb"] * 2**20
    r = subprocess.run(["python3", "-m", "analyze", "captures", str(out), "--no-plots"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (out / "captures.html").exists()
    caps = []
    for line in (out / "captures.jsonl").read_text().splitlines():
        c = json.loads(line)
        d = out / c["dir"]
        m = json.loads((d / "meta.json").read_text())["capture"]
        head = json.loads((d / "summary.json").read_text())["headline"]
        assert m["worst_ns"] > 15_000_000 and m["span"]["latency_ns"] > 15_000_000
        caps.append((m["t0_ns"], m["t1_ns"], head))
    # Each 1 s slot captures its slowest request: on a quiet machine that is a stall's, every
    # time (bench/flight_stalls.sh: 100%). Beside a busy neighbour under a sanitizer, a request
    # slowed by the machine sometimes outlasted a stall's: the ~8 stalls are judged together.
    # A captured stall is explained by its lock; one may be missed where the kernel left a gap
    # in the switches of its window (a lost edge: the lock wait then has no switch-out to hang
    # on; seen once under ASan in CI), never more.
    caught, unexplained = 0, []
    for a, b in stalls:
        hit = [h for c0, c1, h in caps if c0 <= b and c1 >= a]
        if any("orders-ledger" in h for h in hit):
            caught += 1
        elif hit:
            unexplained.append(hit)
    assert len(unexplained) <= 1, unexplained
    assert caught >= 0.6 * len(stalls), (caught, len(stalls), unexplained)


def test_exporter_serves_an_exemplar_naming_the_capture(tmp_path):
    srv, url = server(tmp_path, "--stall-every-ms", "1500", "--stall-ms", "40",
                      "--stall-log", str(tmp_path / "stalls.txt"))
    port = free_port()
    out = tmp_path / "run"
    tt = subprocess.Popen([str(TAILTRACE), "--out", str(out), "--flight-recorder", "8",
                           "--trigger", "latency>15ms", "--max-captures-per-min", "60",
                           "--listen", f"127.0.0.1:{port}", "--span", USDT, "--",
                           str(HTTPLOAD), "--model", "pool", "--conns", "20", "--rate", "500",
                           "--duration", "8", "--url", url],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    body = ""
    try:
        for _ in range(80):
            time.sleep(0.1)
            if (out / "captures.jsonl").exists():
                break
        time.sleep(0.3)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                     headers={"Accept": "application/openmetrics-text; "
                                                        "version=1.0.0"})
        body = urllib.request.urlopen(req, timeout=10).read().decode()
    finally:
        _, err = tt.communicate(timeout=60)
        stop(srv)
    assert tt.returncode == 0, err
    assert body.endswith("# EOF\n")
    ex = re.findall(r'^tailtrace_span_latency_seconds_bucket\{le="([^"]+)"\} \d+ '
                    r'# \{capture="(captures/\d{4})"\} ([0-9.]+) [0-9.]+$', body, re.M)
    assert ex, body[-2000:]
    le, cap, value = ex[0]
    assert float(value) <= float(le) and (out / cap / "meta.json").exists()
    assert re.search(r'^tailtrace_flight_captures_total\{trigger="latency>15ms",state="[a-z_]+"\} '
                     r'[1-9]', body, re.M)


def test_a_recorder_that_falls_behind_still_captures_each_slot(tmp_path):
    """Two slow calls 1.5 s apart (span_target stopped 100 ms during a 10 ms call) while
    tailtrace itself is stopped, as a capture being written on a loaded machine stops its loop:
    read in one batch when it resumes, they are two slots of --max-captures-per-min 60 (1 s
    each, on the requests' clock) and two captures, none skipped by the budget."""
    target = subprocess.Popen([str(SPAN_TARGET), "work", "1500", "10000"])
    out = tmp_path / "rec"
    tt = subprocess.Popen([str(TAILTRACE), "--out", str(out), "--flight-recorder", "8",
                           "--trigger", "latency>50ms", "--max-captures-per-min", "60",
                           "--span", f"{SPAN_TARGET}:tt_span_work", "--pid", str(target.pid)],
                          stderr=subprocess.PIPE, bufsize=0)
    slow = []
    try:
        read_line(tt.stderr, "attached to PID", 60)
        time.sleep(0.5)
        os.kill(tt.pid, signal.SIGSTOP)
        try:
            for _ in range(2):
                time.sleep(0.5)
                t0 = time.monotonic_ns()
                os.kill(target.pid, signal.SIGSTOP)
                time.sleep(0.1)
                os.kill(target.pid, signal.SIGCONT)
                slow.append((t0, time.monotonic_ns()))
                time.sleep(1.0)
        finally:
            os.kill(tt.pid, signal.SIGCONT)
        time.sleep(2.0)  # the second slot closes, its records arrive
    finally:
        tt.send_signal(signal.SIGINT)
        _, err = tt.communicate(timeout=60)
        target.kill()
        target.wait()
    assert tt.returncode == 0, err
    fl = json.loads((out / "meta.json").read_text())["flight"]
    assert (fl["triggers"], fl["captures"], fl["skipped_rate"]) == (2, 2, 0), fl
    windows = []
    for line in (out / "captures.jsonl").read_text().splitlines():
        cm = json.loads((out / json.loads(line)["dir"] / "meta.json").read_text())["capture"]
        windows.append((cm["t0_ns"], cm["t1_ns"]))
    for a, b in slow:
        assert sum(w0 <= b and a <= w1 for w0, w1 in windows) == 1, (slow, windows)


def stop_calls(target, n: int, every_s: float) -> list[int]:
    """Stop span_target n times for 100 ms, every_s apart: n slow calls. Their CLOCK_MONOTONIC
    times."""
    t = []
    for _ in range(n):
        time.sleep(every_s)
        t.append(time.monotonic_ns())
        os.kill(target.pid, signal.SIGSTOP)
        time.sleep(0.1)
        os.kill(target.pid, signal.SIGCONT)
    return t


def slow_call_recorder(out: Path, target, *extra: str) -> subprocess.Popen:
    """A recorder of a 3 s window on span_target's calls, triggered by those over 50 ms; once
    it has attached."""
    tt = subprocess.Popen([str(TAILTRACE), "--out", str(out), "--flight-recorder", "3",
                           "--trigger", "latency>50ms", "--max-captures-per-min", "60", *extra,
                           "--span", f"{SPAN_TARGET}:tt_span_work", "--pid", str(target.pid)],
                          stderr=subprocess.PIPE, bufsize=0)
    try:
        read_line(tt.stderr, "attached to PID", 60)
    except BaseException:
        tt.kill()
        target.kill()
        raise
    return tt


def recorder_stop(tt: subprocess.Popen, target) -> str:
    """SIGINT to the recorder, then the target goes; the recorder's stderr (exit status 0)."""
    tt.send_signal(signal.SIGINT)
    _, err = tt.communicate(timeout=120)
    target.kill()
    target.wait()
    assert tt.returncode == 0, err
    return err.decode()


def test_a_captures_spans_are_at_the_requests_wall_time(tmp_path):
    """A capture taken 6 s into a recorder of a 3 s window: the OTLP span of its slow call
    (span_target stopped 100 ms in a 10 ms call) starts at the call's start in Unix time as the
    test's own clocks convert it, within 1 ms, not at the recorder's start plus the call's
    monotonic time since the capture's window began (3 s early)."""
    target = subprocess.Popen([str(SPAN_TARGET), "work", "1500", "10000"])
    out = tmp_path / "rec"
    tt = slow_call_recorder(out, target)
    try:
        t_stop = stop_calls(target, 1, 6.0)[0]
        to_wall_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
        time.sleep(2.0)
    finally:
        recorder_stop(tt, target)
    from analyze import pipeline
    from analyze.render import otlp
    from otlp_receiver import Receiver, attrs
    rx = Receiver()
    try:
        pipeline.build_captures(out, plots=False, otlp=rx.url)
    finally:
        rx.close()
    # the capture whose window holds the stop, and its stopped call (on a loaded machine
    # another slow call may have made a capture too)
    caps = [out / json.loads(line)["dir"] for line in
            (out / "captures.jsonl").read_text().splitlines()]
    cap = [c for c in caps if (lambda w: w["t0_ns"] <= t_stop <= w["t1_ns"])(
        json.loads((c / "meta.json").read_text())["capture"])]
    assert len(cap) == 1, caps
    run = pipeline.load_run(cap[0])
    a = pipeline.analyse(run)
    calls = otlp.df_request_spans(run, a["decomp"], a["segments"])
    calls = calls[(calls["t_enqueue_ns"] <= t_stop) & (calls["t_end_ns"] >= t_stop)]
    assert len(calls) == 1, calls
    call = calls.iloc[0]
    stopped = [sp for _, sp in rx.spans() if sp.trace_id == call["trace_id"]
               and not sp.parent_span_id]
    assert len(stopped) == 1, [attrs(sp.attributes) for _, sp in rx.spans()]
    sp = stopped[0]
    assert sp.end_time_unix_nano - sp.start_time_unix_nano >= 100_000_000
    assert abs(sp.start_time_unix_nano - (call["t_enqueue_ns"] + to_wall_ns)) < 1_000_000, \
        (sp.start_time_unix_nano - (call["t_enqueue_ns"] + to_wall_ns)) / 1e9


def test_otlp_sends_each_capture_while_the_recorder_runs(tmp_path):
    """--otlp: three slow calls 3 s apart; each capture's slow call reaches the OTLP endpoint,
    explained (its parts, its cause), while the recorder still runs: within seconds of the
    last stop here, bounded at 60 s for a loaded machine (the target's calls last 90 s, so
    the recorder outlives the wait; a failure shows captures.jsonl and otlp.json)."""
    from otlp_receiver import Receiver, attrs
    rx = Receiver()
    target = subprocess.Popen([str(SPAN_TARGET), "work", "9000", "10000"])
    out = tmp_path / "rec"
    tt = slow_call_recorder(out, target, "--otlp", rx.url)
    arrived = {}
    try:
        stops = stop_calls(target, 3, 3.0)
        end = time.monotonic() + 60
        while time.monotonic() < end and len(arrived) < len(stops):
            for _, sp in rx.spans():
                a = attrs(sp.attributes)
                if not sp.parent_span_id and a.get("tailtrace.latency_ns", 0) >= 100_000_000:
                    arrived.setdefault(sp.trace_id, (time.monotonic(), a))
            time.sleep(0.1)
        running = tt.poll() is None
    finally:
        err = recorder_stop(tt, target)
        rx.close()
    caps = (out / "captures.jsonl").read_text() if (out / "captures.jsonl").exists() else ""
    sent = (out / "otlp.json").read_text() if (out / "otlp.json").exists() else ""
    assert running and len(arrived) == 3, (arrived, err, caps, sent)
    for _, a in arrived.values():
        parts = sum(v for k, v in a.items() if k.endswith("_ns") and k[10:-3] in
                    ("queue_wait", "oncpu", "runq_wakeup", "runq_preempt", "throttled",
                     "lock_wait", "io_wait", "sleep", "blocked"))
        assert parts > 0 and a["tailtrace.cause"] and a["tailtrace.check"] == "ok", a
    c = json.loads((out / "otlp.json").read_text())
    assert c["finished"] and c["dropped_spans"] == 0 and c["captures"] >= 3, c
    assert c["sent_spans"] == len([1 for _ in rx.spans()])


def test_a_captures_requests_keep_their_callers_trace_context(tmp_path):
    """tcp spans under the flight recorder: tcp_server.py answers 30 ms after each request,
    over the 20 ms trigger, so each of 8 requests (by turns a valid traceparent, a valid
    "TraceParent", a malformed one, none: test_tcp_spans.traced_requests) is in a capture.
    The captures hold the 4 valid ones' contexts, found by their spans' thread and times, not
    by the recorder's rows; exported, their spans sit in their callers' traces, under the
    callers' spans, the others in traces of their own."""
    from analyze import pipeline
    from otlp_receiver import Receiver
    from test_tcp_spans import TcpServer, traced_requests

    srv = TcpServer(delay_ms=30)
    out = tmp_path / "rec"
    tt = subprocess.Popen([str(TAILTRACE), "--out", str(out), "--flight-recorder", "3",
                           "--trigger", "latency>20ms", "--max-captures-per-min", "60",
                           "--span", "tcp", "--pid", str(srv.proc.pid)],
                          stderr=subprocess.PIPE, bufsize=0)
    try:
        read_line(tt.stderr, "attached to PID", 60)
        sent = traced_requests(srv.port, 8)
        time.sleep(1.0)
        tt.send_signal(signal.SIGINT)
        _, err = tt.communicate(timeout=120)
    finally:
        if tt.poll() is None:
            tt.kill()
        srv.stop()
    assert tt.returncode == 0, err
    rx = Receiver()
    try:
        pipeline.build_captures(out, plots=False, otlp=rx.url)
    finally:
        rx.close()
    valid = {t: p for k, t, p in sent if k in ("valid", "named")}
    # every request is in a capture, its context found there by its span's thread and times
    held = {}
    for line in (out / "captures.jsonl").read_text().splitlines():
        req = pipeline.load_run(out / json.loads(line)["dir"]).requests
        ok = req[req["trace_context"] == "ok"]
        held.update(zip(ok["trace_id"], ok["parent_span_id"]))
    assert held == valid, (held, err.decode()[-1500:])
    # the export: each request span sent in a caller's trace is under the caller's span (a
    # request whose parts are unknown, say its thread born inside it, is not exported)
    got = {sp.trace_id.hex(): sp.parent_span_id.hex() for _, sp in rx.spans()
           if sp.kind == sp.SPAN_KIND_SERVER}
    joined = {t: p for t, p in got.items() if p}
    assert joined and all(valid.get(t) == p for t, p in joined.items()), (got, valid)


def test_otlp_to_an_endpoint_that_is_down_loses_no_capture(tmp_path):
    """--otlp where nothing listens: the recorder records and writes every capture as without
    it; the spans it could not send are counted in otlp.json and in one line at its end."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/traces"
    target = subprocess.Popen([str(SPAN_TARGET), "work", "3000", "10000"])
    out = tmp_path / "rec"
    tt = slow_call_recorder(out, target, "--otlp", url)
    try:
        stops = stop_calls(target, 2, 3.0)
        time.sleep(3.0)
    finally:
        err = recorder_stop(tt, target)
    fl = json.loads((out / "meta.json").read_text())["flight"]
    assert fl["captures"] >= len(stops) and fl["failed"] == 0, fl
    caps = (out / "captures.jsonl").read_text().splitlines()
    assert all((out / json.loads(line)["dir"] / "meta.json").exists() for line in caps)
    c = json.loads((out / "otlp.json").read_text())
    assert c["finished"] and c["sent_spans"] == 0 and c["dropped_spans"] >= len(stops), c
    assert f"OTLP endpoint {url} refused the spans" in c["last_error"]
    assert "tailtrace: --otlp: not every capture's spans were sent" in err, err


def test_bad_flight_settings_are_refused_before_anything_runs(tmp_path):
    cases = [
        (["--flight-recorder", "30", "--trigger", "p100", "--span", USDT],
         "give latency>DURATION"),
        (["--flight-recorder", "30", "--trigger", "latency>fast", "--span", USDT],
         "give latency>DURATION"),
        (["--flight-recorder", "5", "--span", USDT], "keep at least 12 s"),
        (["--trigger", "p99", "--span", USDT], "go with --flight-recorder"),
        (["--flight-recorder", "30"], "give --span"),
        (["--flight-recorder", "30", "--aggregate", "--span", USDT], "does not go with --aggregate"),
        (["--flight-recorder", "30", "--flight-mb", "99999999", "--span", USDT], "--flight-mb"),
        (["--otlp", "http://127.0.0.1:4318/v1/traces", "--span", USDT],
         "go with --flight-recorder"),
        (["--flight-recorder", "30", "--otlp", "127.0.0.1:4318", "--span", USDT],
         "give an OTLP/HTTP traces URL"),
        (["--flight-recorder", "30", "--otlp", "http://127.0.0.1:4318/v1/traces", "--span",
          USDT, "ENV=/nonexistent"], "TAILTRACE_ANALYZE_DIR=/nonexistent holds no"),
    ]
    for args, needle in cases:
        env = dict(os.environ)
        if args[-1].startswith("ENV="):
            env["TAILTRACE_ANALYZE_DIR"] = args.pop()[4:]
        p = subprocess.run([str(TAILTRACE), "--out", str(tmp_path / "x"), *args, "--", "true"],
                           capture_output=True, text=True, timeout=30, env=env)
        err = expect_error(p, needle)
        assert err.count("\n") == 0, err   # one line


def test_a_full_disk_fails_captures_counted_and_the_recorder_goes_on(tmp_path):
    """The run directory on a 320 KiB tmpfs: the captures that do not fit fail, each with
    one line, counted in meta.json flight.failed; tailtrace ends normally."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "tmpfs", str(small)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    srv, url = server(tmp_path, "--stall-every-ms", "1000", "--stall-ms", "40",
                      "--stall-log", str(tmp_path / "stalls.txt"))
    try:
        p = subprocess.run([str(TAILTRACE), "--out", str(small / "run"), "--flight-recorder", "8",
                            "--trigger", "latency>15ms", "--max-captures-per-min", "120",
                            "--also-pid", str(srv.pid), "--span", USDT, "--",
                            str(HTTPLOAD), "--model", "pool", "--conns", "20", "--rate", "1000",
                            "--duration", "6", "--url", url],
                           capture_output=True, text=True, timeout=120)
        fl = json.loads((small / "run" / "meta.json").read_text())["flight"]
    finally:
        stop(srv)
        subprocess.run(["umount", str(small)])
    assert p.returncode == 0, p.stderr
    fails = [l for l in p.stderr.splitlines() if re.search(r"capture captures/\d+ failed: ", l)]
    assert fl["failed"] >= 1 and len(fails) == fl["failed"], p.stderr
    assert all(l.endswith("(counted; the recorder goes on)") for l in fails)


DEEPSTACKS = BUILD / "tests" / "probes" / "tt-deepstacks"
IDS = 3 * 16384  # an offcpu stack id's epoch is id // IDS (SCHED_STACK_IDS,
                 # probes/sched/sched_stacks.h)
LOCK_IDS = 8192  # a lock stack id's (probes/locks/locks.h LOCKS_STACK_ENTRIES)


def deepstacks_flight(out: Path, epoch_ms: int) -> dict:
    """tt-deepstacks sleeps 20 ms 400 times holding a mutex, each time under its own user
    stack (path i: ten calls through via_a or via_b as the bits of i say), each sleep a span
    (walk, from its outermost call) above the trigger: a capture a second (the rate limit).
    exact-stacks: every switch-out unwinds (the stack cache would keep the first path's)."""
    p = subprocess.run([str(TAILTRACE), "--out", str(out), "--flight-recorder", "4",
                        "--trigger", "latency>10ms", "--max-captures-per-min", "60",
                        "--events", "runq,switch,offcpu,cpu,locks",
                        "--debug", f"exact-stacks,stack-epoch-ms={epoch_ms}",
                        "--span", f"{DEEPSTACKS}:walk", "--",
                        str(DEEPSTACKS), "400", "20000", "lock"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "meta.json").read_text())


def path_of(frames: list[str]) -> int:
    """The path a user stack was taken on. The compiler folds via_a and via_b into one
    function, so the bits are in walk's frames: leaf first, the return addresses of its
    last ten calls to via_a or via_b are bits 9 down to 0 (via_a's call site for a 0; a
    lock's stack has the lock's call site before them). Bit 9 is 0 on every path below 512:
    the first of them is via_a's call site."""
    walks = [f.split()[0] for f in frames if f.startswith("walk+")][-10:]
    assert len(walks) == 10, frames
    return sum((w != walks[0]) << (9 - k) for k, w in enumerate(walks))


def capture_paths(d: Path, stream: str = "offcpu") -> tuple[list[int], np.ndarray, tuple]:
    """A capture's stacked sleeps (offcpu) or acquisitions (locks) in time order, as the
    paths their user stacks name (-1: no entry in stacks.jsonl), their records, and the ids
    the stream's records carry beside those stacks.jsonl holds."""
    if stream == "offcpu":
        rec = records(d, "switch")
        rec = rec[(rec["unmatched"] == 0) & (rec["ustack_id"] >= 0)]
        rec = np.sort(rec, order="t_off_ns")
    else:
        rec = records(d, "lock")
        rec = np.sort(rec[rec["ustack_id"] >= 0], order="t_acquired_ns")
    assert len(set(rec["tid"].tolist())) == 1, d  # the one thread traced
    user = {}
    for line in (d / "stacks.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["stream"] == stream and s["kind"] == "user":
            user[s["id"]] = s["frames"]
    ids = (set(rec["ustack_id"].tolist()), set(user))

    def looped(i) -> bool:  # not libc's and ld.so's own locks, at start and exit
        return int(i) not in user or any(f.startswith("walk+") for f in user[int(i)])

    rec = rec[np.array([looped(i) for i in rec["ustack_id"]], dtype=bool)]
    paths = [path_of(user[int(i)]) if int(i) in user else -1 for i in rec["ustack_id"]]
    return paths, rec, ids


def test_stack_maps_take_turns_and_every_stack_stays_its_own(tmp_path):
    """--debug stack-epoch-ms: the recorder empties and switches its two generations of
    off-CPU stack maps every 1.5 s (an hour-long run would otherwise fill them). A stack id
    carries its epoch (probes/sched/sched_stacks.h): the captures (a second or two old at most when
    written) hold ids of several epochs of both generations, and every one names the stack
    it was taken on: in time order, the paths count up. A capture holds a second of sleeps
    (the rate limit); the last one, of the sleeps left when the walk ends, may hold one."""
    meta = deepstacks_flight(tmp_path / "run", 1500)
    caps = sorted((tmp_path / "run" / "captures").iterdir())
    assert len(caps) >= 4
    for stream, ids in (("offcpu", IDS), ("locks", LOCK_IDS)):
        ep = meta[f"{stream}_stack_epochs"]
        assert ep["period_ms"] == 1500 and ep["begun"] >= 3, ep
        assert ep["expired"] == 0, ep
        epochs = set()
        for d in caps:
            paths, rec, (used, written) = capture_paths(d, stream)
            least = 1 if d == caps[-1] else 2
            assert len(paths) >= least and -1 not in paths, (stream, d, paths)
            assert written == used, (stream, d)  # its own stacks, not every one seen
            assert all(b > a for a, b in zip(paths, paths[1:])), (stream, d, paths)
            epochs |= {int(i) // ids for i in rec["ustack_id"]}
        assert len(epochs) >= 3 and {e & 1 for e in epochs} == {0, 1}, (stream, epochs)


def test_stacks_of_an_emptied_epoch_are_counted_never_misnamed(tmp_path):
    """Epochs of 100 ms, shorter than a capture's age when it is written (up to a second):
    the records of its window reach back over emptied epochs. Their stack ids are counted as
    expired (not as lost events) and get no entry in stacks.jsonl (the map's bucket may hold
    a later stack now); the ids of the two live epochs still name their own paths."""
    meta = deepstacks_flight(tmp_path / "run", 100)
    assert meta["lost_events"]["offcpu"] == 0  # expired by design, not an event lost
    for stream in ("offcpu", "locks"):
        assert meta[f"{stream}_stack_epochs"]["expired"] > 0, meta[f"{stream}_stack_epochs"]
        named = []
        for d in sorted((tmp_path / "run" / "captures").iterdir()):
            paths = [p for p in capture_paths(d, stream)[0] if p >= 0]
            assert all(b > a for a, b in zip(paths, paths[1:])), (stream, d, paths)
            named += paths
        assert named, stream  # the last capture, written at the end, is young enough
