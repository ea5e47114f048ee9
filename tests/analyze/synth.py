"""Synthetic run for the output tests (plots, HTML, Perfetto, compare, report, CLI).

`make_run(dir)` writes a run directory whose every nanosecond is known by
construction, through analyze/load/schema.py dtypes (no layout restated), and
returns the ground truth: the per-request decomposition and the thread-state
slices. Scenario ("pool", 4 workers on 2 CPUs, pid 100, workers 101..104):
each request on its worker runs back to back (50 µs apart) as

    run 100 µs
    [i % 10 == 5]  lock wait: off-CPU 400 µs, runnable (wakeup) 50 µs, hold 50 µs on CPU
    run 100 µs
    blocked: off-CPU 800 + (37·i mod 300) µs (waiting for the server), runnable 20 µs
    [i % 100 == 50] preempted: runnable 5000 µs (preempt_us)
    run 100 µs

and was enqueued 100 µs before it started (queue wait). Each lock wait is
caused by the main thread (tid 100): it took the mutex 10 µs before the
waiter asked, was preempted (runnable) until 5 µs before releasing it, and
released it when the waiter acquired it. Between those, tid 100 runs.
"""
from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from matplotlib import image as mpimg

from analyze.load.schema import load_schema, record_dtype

US = 1000
T_BASE = 1_000_000_000_000  # CLOCK_MONOTONIC ns of the run start
PID = 100
WORKERS = [101, 102, 103, 104]
FILES = {"request": "requests.bin", "runq": "runq.bin", "switch": "switches.bin",
         "lock": "locks.bin", "task": "tasks.bin"}


def _scenario(n: int, preempt_us: int = 5000):
    reqs, runq, sw, locks, states = [], [], [], [], []
    clock = {w: T_BASE + 1000 * US + k * 7 * US for k, w in enumerate(WORKERS)}
    for i in range(n):
        w = WORKERS[i % len(WORKERS)]
        cpu = WORKERS.index(w) % 2
        t = s = clock[w]
        parts = dict(oncpu=0, runq_wakeup=0, runq_preempt=0, lock_wait=0, blocked=0)

        def state(name, dur):
            nonlocal t
            states.append((w, name, t, t + dur))
            t += dur

        def run(dur):
            parts["oncpu"] += dur
            state("Running", dur)

        def off(blocked_dur, runnable_dur, kind, blocked_part):
            t_off = t
            if blocked_dur:
                parts[blocked_part] += blocked_dur
                state("Lock wait" if blocked_part == "lock_wait" else "Blocked", blocked_dur)
            t_r = t
            parts["runq_wakeup" if kind == 0 else "runq_preempt"] += runnable_dur
            state("Runnable", runnable_dur)
            sw.append((t_off, t, PID, w, cpu, cpu, -1, -1, 1 if kind == 0 else 0,
                       1 if kind == 0 else 0))
            runq.append((t_r, t, PID, w, cpu, 999 if kind == 0 else 0, kind))

        run(100 * US)
        if i % 10 == 5:
            t_req = t
            off(400 * US, 50 * US, 0, "lock_wait")
            t_acq = t
            run(50 * US)
            locks.append((0xDEAD0, t_req, t_acq, t, PID, w, -1, 0x2))
            # the holder: the main thread took the mutex 10 µs earlier and was
            # preempted while holding it (lock-holder preemption), released at t_acq
            h_acq, h_off, h_on = t_req - 10 * US, t_req, t_acq - 5 * US
            locks.append((0xDEAD0, h_acq, h_acq, t_acq, PID, PID, -1, 0x0))
            sw.append((h_off, h_on, PID, PID, 0, 0, -1, -1, 0, 0))
            runq.append((h_off, h_on, PID, PID, 0, 0, 1))
            states.extend([(PID, "Running", h_acq, h_off), (PID, "Runnable", h_off, h_on),
                           (PID, "Running", h_on, t_acq)])
        run(100 * US)
        off((800 + (i * 37) % 300) * US, 20 * US, 0, "blocked")
        if i % 100 == 50:
            off(0, preempt_us * US, 1, "blocked")
        run(100 * US)
        e = t
        reqs.append(dict(id=i, conn=i % 16, tid=w, pid=PID, status=200, bytes=512,
                         t_enqueue_ns=s - 100 * US, t_start_ns=s, t_end_ns=e,
                         queue_wait_ns=100 * US, **{f"{k}_ns": v for k, v in parts.items()}))
        state("Running", 50 * US)  # gap to the next request, on CPU
        clock[w] = t
    return reqs, runq, sw, locks, states


def truth(n: int = 400, preempt_us: int = 5000) -> SimpleNamespace:
    """Ground truth of the scenario: decomp (contract columns) and thread states."""
    reqs, runq, sw, locks, states = _scenario(n, preempt_us)
    d = pd.DataFrame(reqs)
    d["latency_ns"] = d["t_end_ns"] - d["t_start_ns"]
    d["e2e_ns"] = d["t_end_ns"] - d["t_enqueue_ns"]
    d["runnable_ns"] = d["runq_wakeup_ns"] + d["runq_preempt_ns"]
    d["closure_err"] = 0.0
    d["closes"] = True
    st = pd.DataFrame(states, columns=["tid", "state", "t_start_ns", "t_end_ns"])
    return SimpleNamespace(decomp=d, states=st, runq=runq, switches=sw, locks=locks)


def make_run(run_dir, n: int = 400, probes: bool = True, lost: int = 0,
             label: str = "pool", preempt_us: int = 5000) -> SimpleNamespace:
    """Write the scenario as a run directory; returns truth(n) plus the path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    schema = load_schema()
    (run_dir / "schema.json").write_text(json.dumps(schema))
    tr = truth(n, preempt_us)
    d = tr.decomp

    def write(kind, rows):
        dt = record_dtype(schema, kind)
        arr = np.zeros(len(next(iter(rows.values()))), dtype=dt)
        for name in dt.names:
            if name in rows:
                arr[name] = rows[name]
        hdr = schema["magic"].encode().ljust(8, b"\0")
        hdr += int(schema["records"][kind]["type"]).to_bytes(4, "little")
        hdr += int(dt.itemsize).to_bytes(4, "little")
        (run_dir / FILES[kind]).write_bytes(hdr + arr.tobytes())

    write("request", {c: d[c].to_numpy() for c in
                      ["id", "conn", "tid", "pid", "status", "bytes", "t_enqueue_ns",
                       "t_start_ns", "t_end_ns"]})
    end_ns = int(d["t_end_ns"].max()) + 1000 * US
    meta = {"command": "tailtrace --out RUN -- httpload --model pool --workers 4",
            "target": "httpload", "kernel": "6.18.0-test", "ncpus": 2, "label": label,
            "mono_start_ns": T_BASE, "mono_end_ns": end_ns, "incomplete": False,
            "hooks": {}, "events": {}, "lost_events": {}}
    if probes:
        rq = pd.DataFrame(tr.runq, columns=["t_runnable_ns", "t_run_ns", "pid", "tid", "cpu",
                                            "waker_tid", "kind"])
        write("runq", {c: rq[c].to_numpy() for c in rq})
        sw = pd.DataFrame(tr.switches, columns=["t_off_ns", "t_on_ns", "pid", "tid", "cpu_off",
                                                "cpu_on", "kstack_id", "ustack_id",
                                                "prev_state", "voluntary"])
        # no wait reasons (syscall -1): lock waits come from the locks stream, as in runs
        # recorded before wait reasons or on kernels without bpf_task_pt_regs
        write("switch", {**{c: sw[c].to_numpy() for c in sw},
                         "syscall": np.full(len(sw), -1, np.int32)})
        lk = pd.DataFrame(tr.locks, columns=["mutex", "t_request_ns", "t_acquired_ns",
                                             "t_released_ns", "pid", "tid", "ustack_id", "flags"])
        write("lock", {c: lk[c].to_numpy() for c in lk})
        tids = [PID] + WORKERS
        comms = ["httpload"] + [f"pool-w{k}" for k in range(len(WORKERS))]
        write("task", {"migrations": np.zeros(len(tids), np.uint64), "pid": [PID] * len(tids),
                       "tid": tids, "comm": np.array([c.encode() for c in comms], dtype="S16")})
        meta["hooks"] = {"runq": "tp_btf", "sched": "tp_btf", "locks": "uprobe"}
        meta["events"] = {"runq": len(rq), "switches": len(sw), "locks": len(lk), "tasks": 5}
        meta["lost_events"] = {"runq": lost, "switches": 0, "locks": 0}
        (run_dir / "flame-offcpu.svg").write_text(
            '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>')
    (run_dir / "meta.json").write_text(json.dumps(meta))
    dur_s = (end_ns - T_BASE) / 1e9
    (run_dir / "workload.json").write_text(json.dumps({
        "model": "pool", "conns": 16, "workers": 4, "requests": n, "errors": 0,
        "url": "http://127.0.0.1:8080/orders", "duration_s": dur_s,
        "throughput_rps": n / dur_s}))
    tr.path = run_dir
    tr.meta = meta
    return tr


def frames(tr) -> SimpleNamespace:
    """A Run-like object (contract DataFrames) straight from the ground truth."""
    rq = pd.DataFrame(tr.runq, columns=["t_runnable_ns", "t_run_ns", "pid", "tid", "cpu",
                                        "waker_tid", "kind"])
    rq["kind"] = pd.Categorical(rq["kind"].map({0: "wakeup", 1: "preempt", 2: "wakeup_new"}))
    sw = pd.DataFrame(tr.switches, columns=["t_off_ns", "t_on_ns", "pid", "tid", "cpu_off",
                                            "cpu_on", "kstack_id", "ustack_id", "prev_state",
                                            "voluntary"])
    sw["voluntary"] = sw["voluntary"].astype(bool)
    lk = pd.DataFrame(tr.locks, columns=["mutex", "t_request_ns", "t_acquired_ns",
                                         "t_released_ns", "pid", "tid", "ustack_id", "flags"])
    lk["wait_ns"] = lk["t_acquired_ns"] - lk["t_request_ns"]
    lk["hold_ns"] = lk["t_released_ns"] - lk["t_acquired_ns"]
    tasks = pd.DataFrame({"pid": [PID] * 5, "tid": [PID] + WORKERS,
                          "comm": ["httpload"] + [f"pool-w{k}" for k in range(4)],
                          "migrations": [0] * 5})
    return SimpleNamespace(meta={"mono_start_ns": T_BASE}, requests=tr.decomp, runq=rq,
                           switches=sw, locks=lk, tasks=tasks, spans=pd.DataFrame())


def bands_of(decomp: pd.DataFrame) -> pd.DataFrame:
    """Band table in the contract's shape, computed plainly (for output tests only)."""
    lat = decomp["latency_ns"]
    q50, q90, q99 = lat.quantile([0.5, 0.9, 0.99])
    band = np.select([lat >= q99, lat > q90, lat > q50], ["≥P99", "P90–P99", "P50–P90"], "≤P50")
    rows = {}
    for b in ["≤P50", "P50–P90", "P90–P99", "≥P99"]:
        g = decomp[band == b]
        row = {"n": len(g), "latency_ms": g["latency_ns"].mean() / 1e6}
        for p in ["queue_wait", "oncpu", "runq_wakeup", "runq_preempt", "lock_wait", "blocked"]:
            row[f"{p}_ms"] = g[f"{p}_ns"].mean() / 1e6
            row[f"{p}_share"] = g[f"{p}_ns"].mean() / g["e2e_ns"].mean()
        rows[b] = row
    return pd.DataFrame.from_dict(rows, orient="index")


IMG_SRC = re.compile(r'<img\b[^>]*\bsrc="([^"]*)"')


def check_self_contained(page: str) -> int:
    """Every <img> is a data: PNG that decodes; nothing is fetched from elsewhere.
    Returns the number of images."""
    srcs = IMG_SRC.findall(page)
    for src in srcs:
        assert src.startswith("data:image/png;base64,"), src[:60]
        raw = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert raw[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(io.BytesIO(raw), format="png")
        assert img.shape[0] > 100 and img.shape[1] > 300
    assert not re.search(r'\b(src|href)\s*=\s*"(https?:|//|file:)', page)
    assert not re.search(r"<(link|iframe|object|embed)\b|<script\b[^>]*\bsrc=|url\(|@import",
                         page, re.I)
    return len(srcs)
