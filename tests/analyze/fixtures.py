"""Inline fixture builders for the analysis tests (shared by every analyze test).

Records are given as small tuples/kwargs in ns; `make_run` turns them into a
Run exactly as the loader would (same frame_from_records conversions), and
`write_run` writes real .bin files (16-byte header + records, schema dtypes)
for tests that go through load_run. Times are offsets from T0, a realistic
CLOCK_MONOTONIC value, so nothing depends on small absolute numbers.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analyze.load.load import (STREAM_FILE, STREAM_KIND, STREAMS, WAKER_CTXS, Run,
                               frame_from_records, set_request_source, split_gaps)
from analyze.load.schema import record_dtype

T0 = 5_000_000_000_000  # 5000 s after boot
MS, US = 1_000_000, 1_000
RUNQ_KIND = {"wakeup": 0, "preempt": 1, "wakeup_new": 2}


def req(id, tid, t_start, t_end, t_enqueue=None, conn=0, status=200, pid=100, bytes=64):
    """A request record; times are offsets from T0."""
    return dict(id=id, conn=conn, tid=tid, pid=pid, status=status, bytes=bytes,
                t_enqueue_ns=T0 + (t_start if t_enqueue is None else t_enqueue),
                t_start_ns=T0 + t_start, t_end_ns=T0 + t_end)


def off(tid, t_off, t_on, voluntary=True, cpu_off=0, cpu_on=None, pid=100, kstack=-1, ustack=-1,
        syscall=-1, addr=0, aux=0, unmatched=False):
    """An off-CPU interval (switches.bin record); syscall -1: no wait reason recorded."""
    return dict(pid=pid, tid=tid, cpu_off=cpu_off, cpu_on=cpu_off if cpu_on is None else cpu_on,
                t_off_ns=T0 + t_off, t_on_ns=T0 + t_on, voluntary=int(voluntary),
                prev_state=1 if voluntary else 0, kstack_id=kstack, ustack_id=ustack,
                syscall=syscall, wait_addr=addr, wait_aux=aux, unmatched=int(unmatched))


def gap(tid, t_from, t_to, pid=100):
    """A gap record: the kernel never reported one switch edge between t_from and t_to."""
    return off(tid, t_from, t_to, voluntary=False, pid=pid, unmatched=True)


def rq(tid, t_runnable, t_run, kind="wakeup", cpu=0, waker=0, pid=100, waker_pid=None,
       ctx=None, throttled=0):
    """A runnable interval (runq.bin record). ctx: a WAKER_CTXS name (default: "task" for a
    wakeup by a waker, "unknown" without one, "none" for a preemption); throttled: its first
    part held back by a CPU quota (throttled_ns)."""
    if ctx is None:
        ctx = "none" if kind == "preempt" else "task" if waker else "unknown"
    return dict(pid=pid, tid=tid, cpu=cpu, waker_tid=waker, kind=RUNQ_KIND[kind],
                waker_pid=pid if waker_pid is None else waker_pid,
                waker_ctx=WAKER_CTXS.index(ctx),
                t_runnable_ns=T0 + t_runnable, t_run_ns=T0 + t_run, throttled_ns=throttled)


def lk(tid, mutex, t_request, t_acquired, t_released=None, contended=None, trylock=False,
       ustack=-1, pid=100):
    """A mutex acquisition (locks.bin record); t_released=None: never released."""
    if contended is None:
        contended = t_acquired > t_request
    return dict(pid=pid, tid=tid, mutex=mutex, t_request_ns=T0 + t_request,
                t_acquired_ns=T0 + t_acquired,
                t_released_ns=0 if t_released is None else T0 + t_released,
                flags=(2 if contended else 0) | (1 if trylock else 0), ustack_id=ustack)


def span(tid, t_start, t_end, ret=0, span_id=0, depth=0, pid=100, end=0, goroutine=0,
         end_tid=None):
    return dict(pid=pid, tid=tid, span_id=span_id, depth=depth, ret=ret,
                t_start_ns=T0 + t_start, t_end_ns=T0 + t_end, end=end, goroutine=goroutine,
                end_tid=tid if end_tid is None else end_tid)


def task(tid, comm, migrations=0, pid=100, ns_tid=None):
    """ns_tid: the thread's id in its own PID namespace (default: the host's, tid)."""
    return dict(pid=pid, tid=tid, comm=comm.encode(), migrations=migrations,
                ns_pid=pid, ns_tid=tid if ns_tid is None else ns_tid)


def _raw(rows: list[dict]) -> dict:
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def occ(cpu, t, tid, pid=None, flags=0):
    """An occupancy record: from T0 + t, tid (0: idle) ran on cpu."""
    return dict(cpu=cpu, t_ns=T0 + t, tid=tid, pid=tid if pid is None else pid, flags=flags)


def occupant(tid, comm, pid=None, cgroup_id=1, flags=0, reused=0):
    """An occupants.bin row."""
    return dict(tid=tid, pid=tid if pid is None else pid, comm=comm.encode(),
                cgroup_id=cgroup_id, flags=flags, reused=reused)


def make_run(requests=None, runq=None, switches=None, locks=None, spans=None, tasks=None,
             meta=None, workload=None, stacks=None, path="/nonexistent/run", occupancy=None,
             occupants=None, span_contexts=None) -> Run:
    """A Run built in memory. A stream given as a list (even empty) is 'present'.
    Requests come from where load_run takes them (requests, else outer spans, else none)."""
    run = Run(path=Path(path), meta=meta or {}, workload=workload or {})
    given = dict(requests=requests, runq=runq, switches=switches, locks=locks,
                 spans=spans, tasks=tasks, occupancy=occupancy, occupants=occupants,
                 span_contexts=span_contexts)
    for s, rows in given.items():
        if rows is None:
            continue
        run.present.add(s)
        if rows:
            setattr(run, s, frame_from_records(s, _raw(rows)))
    run.gaps = split_gaps(run)
    set_request_source(run)
    run.stacks = stacks or {}
    run.lost_events = {k: int(v) for k, v in (run.meta.get("lost_events") or {}).items()}
    return run


def write_bin(path: Path, schema: dict, kind: str, rows: list[dict]) -> np.ndarray:
    """Write one record file (header + records) with the schema's dtype; returns the array."""
    rec = schema["records"][kind]
    arr = np.zeros(len(rows), dtype=record_dtype(schema, kind))
    for i, r in enumerate(rows):
        for k, v in r.items():
            arr[k][i] = v
    head = schema["magic"].encode().ljust(8, b"\0")
    head += int(rec["type"]).to_bytes(4, "little") + int(rec["size"]).to_bytes(4, "little")
    with open(path, "wb") as f:
        f.write(head)
        f.write(arr.tobytes())
    return arr


def write_run(run_dir: Path, schema: dict, meta=None, workload=None, stacks=None, **streams) -> Path:
    """Write a run directory: STREAM=[rows] for each stream given, plus schema/meta json."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "schema.json").write_text(json.dumps(schema))
    for s, rows in streams.items():
        assert s in STREAMS, s
        write_bin(run_dir / STREAM_FILE[s], schema, STREAM_KIND[s], rows)
    if meta is not None:
        (run_dir / "meta.json").write_text(json.dumps(meta))
    if workload is not None:
        (run_dir / "workload.json").write_text(json.dumps(workload))
    if stacks:
        (run_dir / "stacks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in stacks))
    return run_dir
