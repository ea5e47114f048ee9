"""A synthetic pre-fork server's records, every interval known by construction.

`server_streams(seed)` lays out BACKENDS single-threaded processes (a PostgreSQL-like
pre-fork server), a WAL-writer-like process that ends their I/O waits and a client
process that ends their idle waits, over DURATION_MS. Each backend alternates

    idle: blocked in epoll_wait, woken by the client (another process), runnable
    request (a span): runs, and between runs one of
        a lock wait (futex, woken by another backend: another process),
        an I/O wait (pread64, woken by the WAL writer: another process),
        a preemption (runnable, involuntary),
        a sleep (nanosleep, woken by the timer interrupt),
      each blocked wait ending runnable before it runs again

with a heavy tail: one request in ~25 holds a wait of 10-80 ms. The records are what
tailtrace writes for them (switches, runq, spans, tasks, occupancy), so
`decompose.df_decompose` of the run gives each request exactly its construction.
`write_server_run(dir, seed)` writes it as a run directory (fixtures.write_run).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fixtures import T0, MS, US, occ, off, rq, span, task, write_run

BACKENDS = [201, 202, 203, 204, 205, 206]
WALWRITER, CLIENT = 301, 401
DURATION_MS = 2500
FUTEX, PREAD, EPOLL_WAIT, NANOSLEEP = 202, 17, 232, 35


def _backend(rng, tid: int, out: dict) -> None:
    """One backend's idle waits and requests, appended to out's streams."""
    sw, runq, spans = out["switches"], out["runq"], out["spans"]
    cpu = tid % 2
    t = int(rng.integers(0, 3 * MS))

    def blocked(dur, syscall, waker, waker_pid, addr=0):
        nonlocal t
        ready = max(1, int(dur * rng.uniform(0.05, 0.4)))      # runnable after the wakeup
        sw.append(off(tid, t, t + dur, pid=tid, cpu_off=cpu, syscall=syscall, addr=addr))
        runq.append(rq(tid, t + dur - ready, t + dur, cpu=cpu, waker=waker, pid=tid,
                       waker_pid=waker_pid, ctx="task" if waker else "hardirq"))
        t += dur

    def preempted(dur):
        nonlocal t
        sw.append(off(tid, t, t + dur, voluntary=False, pid=tid, cpu_off=cpu))
        runq.append(rq(tid, t, t + dur, kind="preempt", cpu=cpu, pid=tid))
        t += dur

    while t < DURATION_MS * MS:
        blocked(int(rng.integers(50 * US, 3 * MS)), EPOLL_WAIT, CLIENT, CLIENT)
        start = t
        long_wait = rng.random() < 0.04
        for k in range(int(rng.integers(1, 6))):
            t += int(rng.integers(5 * US, 300 * US))              # on CPU
            kind = rng.choice(["lock", "io", "preempt", "sleep", "none"],
                              p=[0.3, 0.35, 0.15, 0.05, 0.15])
            dur = int(rng.integers(20 * US, 2 * MS))
            if long_wait and k == 0:
                kind, dur = rng.choice(["lock", "io"]), int(rng.integers(10 * MS, 80 * MS))
            if kind == "lock":
                other = int(rng.choice([b for b in BACKENDS if b != tid]))
                blocked(dur, FUTEX, other, other, addr=0x7f0000001000)
            elif kind == "io":
                blocked(dur, PREAD, WALWRITER, WALWRITER)
            elif kind == "preempt":
                preempted(dur)
            elif kind == "sleep":
                blocked(dur, NANOSLEEP, 0, 0)
        t += int(rng.integers(5 * US, 200 * US))
        spans.append(span(tid, start, t, pid=tid))


def _walwriter(rng, out: dict) -> None:
    """The WAL writer: sleeps and runs, woken by timers (it ends the backends' I/O waits)."""
    t = 0
    while t < DURATION_MS * MS:
        t += int(rng.integers(50 * US, 500 * US))
        dur = int(rng.integers(200 * US, 5 * MS))
        out["switches"].append(off(WALWRITER, t, t + dur, pid=WALWRITER, syscall=NANOSLEEP))
        out["runq"].append(rq(WALWRITER, t + dur - 10 * US, t + dur, pid=WALWRITER, ctx="hardirq"))
        t += dur


def server_streams(seed: int) -> dict:
    """{stream: [record dicts]} of the synthetic server (module doc), from one seed."""
    rng = np.random.default_rng(seed)
    out = {"switches": [], "runq": [], "spans": [], "occupancy": []}
    for tid in BACKENDS:
        _backend(rng, tid, out)
    _walwriter(rng, out)
    # who held each CPU: a record every ms (the antagonists' stream, read from 1 s before
    # a capture's window)
    for k in range(0, DURATION_MS + 1):
        for cpu in (0, 1):
            out["occupancy"].append(occ(cpu, k * MS, BACKENDS[(k + cpu) % len(BACKENDS)]))
    # each stream in the order tailtrace writes it: by the time the record ends
    for stream, end in (("switches", "t_on_ns"), ("runq", "t_run_ns"), ("spans", "t_end_ns"),
                        ("occupancy", "t_ns")):
        out[stream].sort(key=lambda r: r[end])
    out["tasks"] = ([task(b, "postgres", pid=b) for b in BACKENDS]
                    + [task(WALWRITER, "walwriter", pid=WALWRITER)])
    return out


def write_server_run(run_dir: Path, schema: dict, seed: int) -> Path:
    """The synthetic server as a run directory: its records and a meta.json whose recorded
    time covers them all."""
    streams = server_streams(seed)
    meta = {"mono_start_ns": T0 - 10 * MS, "mono_end_ns": T0 + (DURATION_MS + 200) * MS,
            "events": "runq,switch,offcpu,spans,cpu", "lost_events": {}}
    return write_run(run_dir, schema, meta=meta, **streams)
