"""Load a run directory into DataFrames (one per record stream).

`load_run(run_dir) -> Run`. Records are read with the dtypes that
analyze/load/schema.py builds from the run's schema.json (never restated here),
then turned into DataFrames with the documented columns below. Every stream
is optional: an absent stream is an empty DataFrame with the right columns
and `Run.has(stream)` is False. The .bin files are read a chunk at a time into
the columns (20M records in ~0.6 s here), so nothing is cached beside them.

Columns (int64 ns unless said; in runq, switches and locks the ids, flags and
stack ids are int32 and the CPUs int16, to shrink the memory of large traces):
  requests: id, conn, tid, pid, status, bytes, t_enqueue_ns, t_start_ns, t_end_ns
            (+ ret, end, goroutine when built from spans: status then holds the same
            raw return value, which is not an HTTP status; end says how the call ended;
            t_enqueue_ns is the span's start, t_start_ns too unless its thread was born
            during it: then when that thread first ran, start_when_thread_ran; with
            span_contexts also trace_id, parent_span_id, trace_flags, trace_context: the
            caller's trace context; trace_state, trace_state_context: its tracestate;
            service_trace_id, service_span_id, service_context:
            the server's own span, from its answer; trace_context.df_request_contexts)
  runq:     pid, tid, cpu, waker_tid, waker_pid, kind (categorical wakeup|preempt|wakeup_new),
            waker_ctx (categorical, WAKER_CTXS: the context sched_waking ran in),
            t_runnable_ns, t_run_ns (the runnable time is t_run_ns - t_runnable_ns),
            throttled_ns (of it, the first throttled_ns: its cgroup or an ancestor was
            throttled by its CPU quota; 0 in records from before the field)
  switches: pid, tid, cpu_off, cpu_on, t_off_ns, t_on_ns, voluntary (bool),
            prev_state, kstack_id, ustack_id, syscall (-1: not blocked in a syscall or
            unknown), wait_addr (uint64: the syscall's first argument), wait_aux (its second
            argument: futex op, poll nfds)
  Records from before these fields existed load with waker_pid 0, waker_ctx "task_guess"
  (preemptions "none"), syscall -1, wait_addr 0, wait_aux 0.
  gaps:     pid, tid, t_from_ns, t_to_ns: the switch records flagged unmatched (an edge the
            kernel never reported, docs/probes/sched.md), taken out of `switches`: the thread's
            state between the two times is unknown (decompose marks requests overlapping
            one as not traced).
  locks:    pid, tid, mutex (uint64), t_request_ns, t_acquired_ns, t_released_ns,
            wait_ns, hold_ns (float, NaN if never released), flags, ustack_id,
            contended (bool), trylock (bool)
  spans:    pid, tid, span_id, depth, ret, t_start_ns, t_end_ns, goroutine (Go: the
            runtime.g the span was keyed by; 0: keyed by thread), end_tid (thread it ended
            on), end (categorical SPAN_ENDS: return|exception|longjmp|tailcall)
  tasks:    pid, tid, comm (str), migrations, role (conn-thread|worker|event-loop|server|other),
            ns_pid, ns_tid (the ids in its own PID namespace; the host's where equal or not recorded)
  occupancy: cpu, tid, pid, flags, t_ns (int32 but t_ns): from t_ns, tid ran on cpu until that
            cpu's next record; written only around traced threads' runnable intervals
            (antagonists.py; flags OCC_KTHREAD, OCC_TRUNC, OCC_TRACED; with the irq event
            OCC_HARDIRQ / OCC_SOFTIRQ and the number in the top 16 bits: an interrupt)
  occupants: pid, tid, comm (str), cgroup_id (uint64), flags, reused (bool): each task named in
            occupancy (traced or not)
  span_contexts: span_row (the span's row in spans.bin), tid, t_start_ns, t_end_ns (that
            span's; 0 in runs before 2026-12-03), traceparent, traceresponse, tracestate
            (bytes: the headers' values as a tcp:PORT request and its answer carried them,
            or a USDT end's arguments pointed to, to their line's end, b"" without;
            trace_context.py parses them)
Beside them, dicts: stacks {(stream, id): frames, leaf first} (stacks.jsonl) and wait_names
{(pid, futex word): (symbol, offset, object, size)} (wait_names.jsonl: the global variable holding
each word waited on; explain/known_locks.py).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import AnalysisError, CorruptRecordsError, MissingStreamError
from .heap import heap_trim
from .schema import SchemaError, load_schema, record_dtype
from .trace_context import df_request_contexts

STREAMS = ("requests", "runq", "switches", "locks", "spans", "tasks", "occupancy", "occupants",
           "span_contexts")
# stream -> (schema record kind, file name, what writes it)
STREAM_KIND = {"requests": "request", "runq": "runq", "switches": "switch",
               "locks": "lock", "spans": "span", "tasks": "task", "occupancy": "occ",
               "occupants": "occupant", "span_contexts": "span_context"}
PRODUCER = {
    "requests": "httpload --out RUN_DIR",
    "runq": "tailtrace --events runq --out RUN_DIR",
    "switches": "tailtrace --events switch --out RUN_DIR",
    "locks": "tailtrace --events locks --out RUN_DIR",
    "spans": "tailtrace --span BIN:SYMBOL --out RUN_DIR",
    "tasks": "tailtrace --out RUN_DIR (any event set)",
    "occupancy": "tailtrace --events runq,cpu --out RUN_DIR",
    "occupants": "tailtrace --events runq,cpu --out RUN_DIR",
    "span_contexts": "tailtrace --span tcp:PORT (or usdt:BIN:PROV:NAME,traceparent=argN) --out RUN_DIR",
}
RUNQ_KINDS = ["wakeup", "preempt", "wakeup_new"]  # enum tt_runq_kind order
# enum tt_waker_ctx order (records.h): who can be blamed for a wakeup
WAKER_CTXS = ["none", "task", "hardirq", "softirq", "softirq_task", "unknown", "task_guess"]
WAKER_BLAMES_TASK = ("task", "softirq_task", "task_guess")  # the waker tid ended the wait
LOCK_TRYLOCK, LOCK_CONTENDED = 0x1, 0x2            # TT_LOCK_* in records.h
OCC_KTHREAD, OCC_TRUNC, OCC_TRACED = 0x1, 0x2, 0x4  # TT_OCC_* in records.h
# the irq event: an interrupt held the CPU (tid, pid 0); its number in the flags' top half
OCC_HARDIRQ, OCC_SOFTIRQ, OCC_IRQ_SHIFT, OCC_IRQ_TIMER = 0x8, 0x10, 16, 0xffff
SOFTIRQ_NAMES = ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED",
                 "HRTIMER", "RCU"]  # the kernel's softirq vectors, in order
SPAN_ENDS = ["return", "exception", "longjmp", "tailcall"]  # enum tt_span_end order

COLUMNS = {
    "requests": ["id", "conn", "tid", "pid", "status", "bytes",
                 "t_enqueue_ns", "t_start_ns", "t_end_ns"],
    "runq": ["pid", "tid", "cpu", "waker_tid", "waker_pid", "kind", "waker_ctx",
             "t_runnable_ns", "t_run_ns", "throttled_ns"],
    "switches": ["pid", "tid", "cpu_off", "cpu_on", "t_off_ns", "t_on_ns",
                 "voluntary", "prev_state", "kstack_id", "ustack_id", "syscall", "wait_addr",
                 "wait_aux", "unmatched"],
    "locks": ["pid", "tid", "mutex", "t_request_ns", "t_acquired_ns", "t_released_ns",
              "wait_ns", "hold_ns", "flags", "ustack_id", "contended", "trylock"],
    "spans": ["pid", "tid", "span_id", "depth", "ret", "t_start_ns", "t_end_ns", "goroutine",
              "end_tid", "end"],
    "tasks": ["pid", "tid", "comm", "migrations", "role", "ns_pid", "ns_tid"],
    "occupancy": ["cpu", "tid", "pid", "flags", "t_ns"],
    "occupants": ["pid", "tid", "comm", "cgroup_id", "flags", "reused"],
    "span_contexts": ["span_row", "tid", "t_start_ns", "t_end_ns", "traceparent",
                      "traceresponse", "tracestate"],
}


@dataclass
class Run:
    """One run directory, loaded. Absent streams are empty DataFrames."""
    path: Path
    meta: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    schema: dict = field(default_factory=dict)
    requests: pd.DataFrame = None
    runq: pd.DataFrame = None
    switches: pd.DataFrame = None
    locks: pd.DataFrame = None
    spans: pd.DataFrame = None
    tasks: pd.DataFrame = None
    occupancy: pd.DataFrame = None
    occupants: pd.DataFrame = None
    span_contexts: pd.DataFrame = None
    gaps: pd.DataFrame = None
    stacks: dict = field(default_factory=dict)
    wait_names: dict = field(default_factory=dict)  # (pid, futex addr) -> (symbol, offset, object, size)
    lost_events: dict = field(default_factory=dict)
    source: str = "requests"
    present: set = field(default_factory=set)
    warnings: list = field(default_factory=list)
    cut: dict | None = None   # the recorder never finished: cut_span (None: it did)

    def __post_init__(self):
        for s in STREAMS:
            if getattr(self, s) is None:
                setattr(self, s, empty_frame(s))
        if self.gaps is None:
            self.gaps = split_gaps(self)

    def has(self, stream: str) -> bool:
        """True when the stream's file was in the run directory."""
        return stream in self.present

    def require(self, stream: str) -> pd.DataFrame:
        """The stream's DataFrame, or MissingStreamError naming its file and producer."""
        if not self.has(stream):
            name = STREAM_FILE.get(stream, stream)
            raise MissingStreamError(Path(self.path) / name, PRODUCER[stream])
        return getattr(self, stream)


# Streams written by tailtrace: with any of them a run without requests is still a run.
PROBE_STREAMS = ("runq", "switches", "locks", "tasks")

STREAM_FILE = {"requests": "requests.bin", "runq": "runq.bin", "switches": "switches.bin",
               "locks": "locks.bin", "spans": "spans.bin", "tasks": "tasks.bin",
               "occupancy": "occupancy.bin", "occupants": "occupants.bin",
               "span_contexts": "span_contexts.bin"}


# ---- raw records -> DataFrames (shared by the loader and test fixtures) ----

def _i64(a) -> np.ndarray:
    return np.asarray(a).astype(np.int64, copy=False)


def _i32(a) -> np.ndarray:
    """ids, flags of the big streams: int32 halves their memory (tids < 2**22)."""
    return np.asarray(a).astype(np.int32, copy=False)


def _i16(a) -> np.ndarray:
    """CPUs of the big streams (the kernel's NR_CPUS is at most 8192; -1 stays -1)."""
    return np.asarray(a).astype(np.int16, copy=False)


def role_of(comm: str) -> str:
    """Thread role from its comm (thread name), see module doc."""
    if comm.startswith("naive-c"):
        return "conn-thread"
    if comm.startswith("orders-w"):
        return "server"
    if comm.startswith("pool-w") or re.search(r"-w\d+$", comm):
        return "worker"
    if comm.startswith("async-loop"):
        return "event-loop"
    return "other"


def _categorical(codes, names: list) -> pd.Categorical:
    codes = np.asarray(codes)
    return pd.Categorical.from_codes(np.where(codes < len(names), codes, -1).astype(np.int8),
                                     categories=names)


def _defaults(stream: str, r: dict) -> None:
    """Fields added after the first record layout, for records written without them."""
    n = len(next(iter(r.values()))) if r else 0
    if stream == "runq":
        r.setdefault("waker_pid", np.zeros(n, np.int32))
        r.setdefault("throttled_ns", np.zeros(n, np.int64))
        if "waker_ctx" not in r:   # woken: a task as far as is known; preempted: nobody
            r["waker_ctx"] = np.where(np.asarray(r.get("kind", np.zeros(n))) == 1, 0, 6)
    elif stream == "switches":
        r.setdefault("syscall", np.full(n, -1, np.int32))
        r.setdefault("wait_addr", np.zeros(n, np.uint64))
        r.setdefault("wait_aux", np.zeros(n, np.int32))
        r.setdefault("unmatched", np.zeros(n, np.uint8))
    elif stream == "spans":
        r.setdefault("goroutine", np.zeros(n, np.uint64))
        r.setdefault("end_tid", np.asarray(r.get("tid", np.zeros(n))))
        r.setdefault("end", np.zeros(n, np.uint32))


def fold_comm(comm: str) -> str:
    """'pool-w12' -> 'pool-w*': the thread names of one pool as one pattern."""
    return re.sub(r"\d+$", "*", comm)


def thread_names(run) -> dict[int, str]:
    """tid -> comm of the threads in tasks.bin ({} without it)."""
    t = run.tasks
    if t is None or t.empty:
        return {}
    return dict(zip(t["tid"].astype(int), t["comm"].astype(str)))


def frame_from_records(stream: str, rec, owned: bool = False) -> pd.DataFrame:
    """DataFrame of one stream from raw record fields (structured array or dict of arrays);
    owned: the arrays are the caller's to give away (read_bin's), used without a copy."""
    r = {k: np.asarray(rec[k]) for k in (rec.dtype.names if hasattr(rec, "dtype") else rec)}
    _defaults(stream, r)
    if stream == "requests":
        d = {c: _i64(r[c]) for c in COLUMNS["requests"]}
    elif stream == "runq":
        d = {c: _i32(r[c]) for c in ("pid", "tid")}
        d["cpu"] = _i16(r["cpu"])
        d["waker_tid"], d["waker_pid"] = _i32(r["waker_tid"]), _i32(r["waker_pid"])
        d["kind"] = _categorical(r["kind"], RUNQ_KINDS)
        d["waker_ctx"] = _categorical(r["waker_ctx"], WAKER_CTXS)
        d["t_runnable_ns"], d["t_run_ns"] = _i64(r["t_runnable_ns"]), _i64(r["t_run_ns"])
        d["throttled_ns"] = _i64(r["throttled_ns"])
    elif stream == "switches":
        d = {c: _i32(r[c]) for c in ("pid", "tid")}
        d["cpu_off"], d["cpu_on"] = _i16(r["cpu_off"]), _i16(r["cpu_on"])
        d["t_off_ns"], d["t_on_ns"] = _i64(r["t_off_ns"]), _i64(r["t_on_ns"])
        d["voluntary"] = np.asarray(r["voluntary"]).astype(bool)
        for c in ("prev_state", "kstack_id", "ustack_id", "syscall", "wait_aux"):
            d[c] = _i32(r[c])
        d["wait_addr"] = np.asarray(r["wait_addr"]).astype(np.uint64)
        d["unmatched"] = np.asarray(r["unmatched"]).astype(bool)
    elif stream == "locks":
        d = {c: _i32(r[c]) for c in ("pid", "tid")}
        d["mutex"] = np.asarray(r["mutex"]).astype(np.uint64)
        for c in ("t_request_ns", "t_acquired_ns", "t_released_ns"):
            d[c] = _i64(r[c])
        d["wait_ns"] = d["t_acquired_ns"] - d["t_request_ns"]
        rel = d["t_released_ns"]
        d["hold_ns"] = np.where(rel > 0, rel - d["t_acquired_ns"], np.nan)
        d["flags"], d["ustack_id"] = _i32(r["flags"]), _i32(r["ustack_id"])
        d["contended"] = (d["flags"] & LOCK_CONTENDED) != 0
        d["trylock"] = (d["flags"] & LOCK_TRYLOCK) != 0
    elif stream == "spans":
        d = {c: _i64(r[c]) for c in COLUMNS["spans"] if c != "end"}
        d["end"] = _categorical(r["end"], SPAN_ENDS)
    elif stream == "tasks":
        comm = _comms(r["comm"])
        d = {"pid": _i64(r["pid"]), "tid": _i64(r["tid"]), "comm": comm,
             "migrations": _i64(r["migrations"]), "role": [role_of(c) for c in comm]}
        # ids in the thread's own PID namespace; a run recorded before them: the host's
        fields = r.dtype.names if hasattr(r, "dtype") else tuple(r)
        for ns, host in (("ns_pid", "pid"), ("ns_tid", "tid")):
            d[ns] = _i64(r[ns]) if ns in fields else d[host]
    elif stream == "occupancy":
        d = {c: _i32(r[c]) for c in ("cpu", "tid", "pid", "flags")}
        d["t_ns"] = _i64(r["t_ns"])
    elif stream == "occupants":
        d = {"pid": _i64(r["pid"]), "tid": _i64(r["tid"]), "comm": _comms(r["comm"]),
             "cgroup_id": np.asarray(r["cgroup_id"]).astype(np.uint64),
             "flags": _i32(r["flags"]), "reused": np.asarray(r["reused"]).astype(bool)}
    elif stream == "span_contexts":
        fields = r.dtype.names if hasattr(r, "dtype") else tuple(r)
        d = {c: _i64(r[c]) if c in fields else np.zeros(len(r["span_row"]), np.int64)
             for c in ("span_row", "tid", "t_start_ns", "t_end_ns")}
        for c in ("traceparent", "traceresponse", "tracestate"):  # the last two: since 2026-12
            d[c] = ([bytes(v) for v in np.asarray(r[c])] if c in fields
                    else [b""] * len(d["span_row"]))
    else:
        raise ValueError(f"unknown stream {stream!r}")
    # a column per array, no block consolidation (a 2-D copy of every column: 2.3 s for
    # 10M rows of 12 columns); views of the records become contiguous copies of their own
    given = set() if owned else {id(v) for v in r.values()}
    return pd.DataFrame({c: _own(d[c], given) for c in COLUMNS[stream]}, copy=False)


def _own(v, given: set):
    """v as a contiguous array that aliases no caller's buffer (an array given, or a view
    of one, is copied; lists and Categoricals stay as they are)."""
    if isinstance(v, np.ndarray) and (id(v) in given or v.base is not None
                                      or not v.flags.c_contiguous):
        return np.array(v, copy=True, order="C")
    return v


def _comms(comm) -> list[str]:
    """char[16] fields (bytes, NUL-padded) as str."""
    comm = np.asarray(comm)
    if comm.dtype.kind == "S":
        comm = np.char.decode(comm, "utf-8", "replace")
    return [str(c).rstrip("\0") for c in comm]


def empty_frame(stream: str) -> pd.DataFrame:
    """The stream's DataFrame with no rows and the right columns and dtypes."""
    names = {"runq": ["pid", "tid", "cpu", "waker_tid", "kind", "t_runnable_ns", "t_run_ns",
                      "throttled_ns"],
             "switches": ["pid", "tid", "cpu_off", "cpu_on", "t_off_ns", "t_on_ns",
                          "voluntary", "prev_state", "kstack_id", "ustack_id"],
             "locks": ["pid", "tid", "mutex", "t_request_ns", "t_acquired_ns",
                       "t_released_ns", "flags", "ustack_id"],
             "tasks": ["pid", "tid", "comm", "migrations"]}.get(stream, COLUMNS[stream])
    raw = {n: np.zeros(0, dtype=np.int64) for n in names}
    if stream in ("tasks", "occupants"):
        raw["comm"] = np.zeros(0, dtype="S16")
    return frame_from_records(stream, raw)


GAP_COLUMNS = ["pid", "tid", "t_from_ns", "t_to_ns"]


def split_gaps(run) -> pd.DataFrame:
    """Take the gap records (unmatched) out of run.switches; return them as run.gaps."""
    sw = run.switches
    if "unmatched" not in sw or not sw["unmatched"].any():
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in GAP_COLUMNS})
    gap = sw["unmatched"].to_numpy(bool)
    g = sw[gap]
    run.switches = sw[~gap].reset_index(drop=True)
    return pd.DataFrame({"pid": _i64(g["pid"]), "tid": _i64(g["tid"]),
                         "t_from_ns": _i64(g["t_off_ns"]), "t_to_ns": _i64(g["t_on_ns"])})


def requests_from_spans(spans: pd.DataFrame,
                        contexts: pd.DataFrame | None = None) -> pd.DataFrame:
    """One request per outer span (depth 0): id=row, conn=span_id, ret (and status) = the
    function's raw return register (not an HTTP status), end = how the call ended (a call a
    C++ exception or a longjmp left is an error), goroutine = its Go goroutine (0: none);
    with contexts (span_contexts), the trace context each carried."""
    outer = spans[spans["depth"] == 0].sort_values("t_start_ns", kind="stable")
    n = len(outer)
    req = pd.DataFrame({
        "id": np.arange(n, dtype=np.int64), "conn": outer["span_id"].to_numpy(),
        "tid": outer["tid"].to_numpy(), "pid": outer["pid"].to_numpy(),
        "status": outer["ret"].to_numpy(), "bytes": np.zeros(n, dtype=np.int64),
        "t_enqueue_ns": outer["t_start_ns"].to_numpy(),
        "t_start_ns": outer["t_start_ns"].to_numpy(), "t_end_ns": outer["t_end_ns"].to_numpy(),
        "ret": outer["ret"].to_numpy(), "end": outer["end"].to_numpy(),
        "goroutine": outer["goroutine"].to_numpy(),
    }, columns=COLUMNS["requests"] + ["ret", "end", "goroutine"])
    if contexts is not None:
        ctx = df_request_contexts(contexts, outer.index.to_numpy(), outer)
        for c in ctx.columns:
            req[c] = ctx[c].to_numpy()
    return req


def start_when_thread_ran(req: pd.DataFrame, runq: pd.DataFrame) -> pd.DataFrame:
    """Requests answered by a thread born while they waited (a thread started for the
    connection: a TCP span of a thread-per-connection server) start when that thread first
    ran; the time before is their queue wait (t_enqueue_ns keeps the span's start)."""
    born = runq[runq["kind"] == "wakeup_new"] if len(runq) else runq
    if not len(req) or not len(born):
        return req
    first = born.groupby("tid")[["t_runnable_ns", "t_run_ns"]].min()
    birth = req["tid"].map(first["t_runnable_ns"]).to_numpy(dtype="float64")
    ran = req["tid"].map(first["t_run_ns"]).to_numpy(dtype="float64")
    later = (birth > req["t_start_ns"].to_numpy()) & (ran <= req["t_end_ns"].to_numpy())
    if later.any():
        req = req.copy()
        req.loc[later, "t_start_ns"] = ran[later].astype(np.int64)
    return req


def set_request_source(run: Run) -> None:
    """run.requests and run.source from the streams present (see module doc)."""
    if run.has("requests"):
        run.source = "requests"
    elif run.has("spans"):
        run.requests = requests_from_spans(
            run.spans, run.span_contexts if run.has("span_contexts") else None)
        run.source = "spans"
        run.requests = start_when_thread_ran(run.requests, run.runq)
    else:
        run.requests, run.source = empty_frame("requests"), "none"


# ---- files ----------------------------------------------------------------

def read_bin(path: Path, schema: dict, kind: str, cut: list | None = None) -> dict:
    """One .bin file's records as {field: array}; CorruptRecordsError names the file. cut: the
    writer did not finish (meta.json finished=false): a last partial record is left out
    and noted in this list instead."""
    rec = schema["records"][kind]
    hsize = schema["header_size"]
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(hsize)
        if len(head) < hsize:
            raise CorruptRecordsError(f"{path}: truncated header ({len(head)} of {hsize} bytes); "
                                      "the writer was killed before it flushed: re-run the capture")
        magic = head[:8].rstrip(b"\0").decode("ascii", "replace")
        rtype = int.from_bytes(head[8:12], "little")
        rsize = int.from_bytes(head[12:16], "little")
        if magic != schema["magic"] or rtype != rec["type"] or rsize != rec["size"]:
            raise CorruptRecordsError(
                f"{path}: not a {kind} record file (magic {magic!r}, type {rtype}, size {rsize}; "
                f"expected {schema['magic']!r}, {rec['type']}, {rec['size']} by schema.json): "
                "the file or schema.json is damaged, or they are from different tailtrace versions")
        body = size - hsize
        if body % rsize and cut is not None:
            cut.append(f"{path.name}: its last {body % rsize} bytes are part of a record "
                       "(the writer was killed while writing): left out")
            body -= body % rsize
        if body % rsize:
            raise CorruptRecordsError(
                f"{path}: truncated: {body} bytes is not a whole number of {rsize}-byte records; "
                "re-run the capture (or cut the file to the last whole record)")
        return _read_columns(f, record_dtype(schema, kind), body // rsize)


READ_CHUNK = 1 << 16   # records read at a time: 4 MiB of 64-byte records, in the CPU's cache


# unsigned fields that stay unsigned in the frames (addresses); the others become the
# signed type of their width while they are read, as frame_from_records wants them
_UNSIGNED = {"wait_addr", "mutex", "cgroup_id"}


def _column_dtype(name: str, t: np.dtype) -> np.dtype:
    if t.kind == "u" and t.itemsize >= 4 and name not in _UNSIGNED:
        return np.dtype(f"i{t.itemsize}")
    return t


def _read_columns(f, dt: np.dtype, n: int) -> dict[str, np.ndarray]:
    """n records of dtype dt from f as one contiguous array per field, read a chunk at a
    time (each column filled from a cached chunk, never a copy of the whole file)."""
    cols = {name: np.empty(n, dtype=_column_dtype(name, dt.fields[name][0]))
            for name in dt.names}
    buf = np.empty(min(n, READ_CHUNK), dtype=dt)
    raw = buf.view(np.uint8)
    i = 0
    while i < n:
        k = min(len(buf), n - i)
        got = f.readinto(memoryview(raw[:k * dt.itemsize]))
        if got != k * dt.itemsize:
            raise CorruptRecordsError(f"{f.name}: shorter than its size said (read {got} of "
                                      f"{k * dt.itemsize} bytes): was it written to meanwhile?")
        for name, col in cols.items():
            col[i:i + k] = buf[name][:k]
        i += k
    return cols


def load_stream(run_dir: Path, stream: str, schema: dict,
                cut: list | None = None) -> pd.DataFrame:
    """One stream's DataFrame from RUN/<file> (cut: as read_bin's)."""
    path = run_dir / STREAM_FILE[stream]
    recs = read_bin(path, schema, STREAM_KIND[stream], cut)
    try:
        return frame_from_records(stream, recs, owned=True)
    except (KeyError, ValueError) as e:  # schema.json lacks a field this loader needs
        raise CorruptRecordsError(f"{run_dir / 'schema.json'}: {STREAM_KIND[stream]} records "
                                  f"have no usable field {e}, so {path.name} cannot be read; "
                                  "copy a good schema.json from `tt-schema`") from None


def wall_start_ns(meta: dict) -> int:
    """meta.json wall_start ('2026-11-28T18:47:19.028103Z', UTC) as ns since the epoch; 0
    when it is missing or not a time."""
    text = (meta or {}).get("wall_start")
    if not isinstance(text, str):
        return 0
    try:
        return int(pd.Timestamp(text).value)
    except ValueError:
        return 0


def _read_json(path: Path) -> dict:
    """A JSON object file ({} if absent); CorruptRecordsError naming it otherwise."""
    if not path.exists():
        return {}
    try:
        o = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptRecordsError(f"{path}: not valid JSON ({e}); re-run the capture") from None
    if not isinstance(o, dict):
        raise CorruptRecordsError(f"{path}: not a JSON object but {type(o).__name__}; "
                                  "re-run the capture")
    return o


def _lost_events(meta: dict, path: Path) -> dict:
    """meta.json's lost_events as {stream: int}; CorruptRecordsError naming the file."""
    lost = meta.get("lost_events") or {}
    try:
        return {str(k): int(v) for k, v in lost.items()}
    except (AttributeError, TypeError, ValueError):
        raise CorruptRecordsError(f"{path}: lost_events is not a map of counts "
                                  f"({lost!r:.60}); re-run the capture") from None


def _jsonl_dict(path: Path, warnings: list, entry) -> dict:
    """{key: value} of entry(line's object) -> (key, value) for each line of a .jsonl file
    (empty when it is absent); bad lines are skipped and counted in warnings."""
    out, bad = {}, 0
    if not path.exists():
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                k, v = entry(json.loads(line))
                out[k] = v
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                bad += 1
    if bad:
        warnings.append(f"{path}: skipped {bad} malformed line(s)")
    return out


def load_stacks(path: Path, warnings: list) -> dict:
    """stacks.jsonl -> {(stream, id): [frames, leaf first]}; bad lines are skipped and counted."""
    return _jsonl_dict(path, warnings, lambda o: ((o["stream"], int(o["id"])), list(o["frames"])))


def load_wait_names(path: Path, warnings: list) -> dict:
    """wait_names.jsonl -> {(pid, addr): (symbol, offset, object, size)}: the global variable
    holding each futex word waited on (probes/sched/wait_names.h); bad lines skipped, counted."""
    return _jsonl_dict(path, warnings, lambda o: (
        (int(o["pid"]), int(o["addr"])),
        (str(o["symbol"]), int(o["offset"]), str(o["object"]), int(o.get("size", 0)))))


# the time columns that say how far each stream's records reach
_REACH = {"requests": "t_end_ns", "runq": "t_run_ns", "switches": "t_on_ns", "locks": "t_released_ns",
          "spans": "t_end_ns", "occupancy": "t_ns"}


def cut_span(run) -> dict:
    """A cut run (meta.json finished=false: the recorder never finished, e.g. killed): the
    time its records cover, {from_ns, to_ns, kept_s}, from the start of the recording to the
    latest record of any stream."""
    ends = [int(getattr(run, s)[c].max()) for s, c in _REACH.items()
            if s in run.present and c in getattr(run, s) and len(getattr(run, s))]
    t0 = int(run.meta.get("mono_start_ns") or 0)
    t1 = max(ends) if ends else t0
    return {"from_ns": t0, "to_ns": t1, "kept_s": max(t1 - t0, 0) / 1e9}


def load_run(run_dir) -> Run:
    """Load every stream present in run_dir. AnalysisError (one line) if it cannot be used."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AnalysisError(f"{run_dir}: no such run directory (pass a directory written by "
                            "run.sh, tailtrace --out or httpload --out)")
    try:
        schema = load_schema(run_dir)
    except (SchemaError, OSError) as e:
        raise AnalysisError(f"{run_dir}: {e}") from None
    run = Run(path=run_dir, schema=schema, meta=_read_json(run_dir / "meta.json"),
              workload=_read_json(run_dir / "workload.json"))
    cut = [] if run.meta.get("finished") is False else None
    for s in STREAMS:
        if (run_dir / STREAM_FILE[s]).exists():
            setattr(run, s, load_stream(run_dir, s, schema, cut))
            run.present.add(s)
    if cut is not None:
        run.cut = cut_span(run)
        run.warnings += cut
    if not run.present & {"requests", "spans", *PROBE_STREAMS}:
        raise MissingStreamError(run_dir / "requests.bin",
                                 f"{PRODUCER['requests']} (or spans.bin from {PRODUCER['spans']}, "
                                 f"or scheduler streams from tailtrace --out RUN_DIR)")
    run.gaps = split_gaps(run)
    set_request_source(run)
    run.stacks = load_stacks(run_dir / "stacks.jsonl", run.warnings)
    run.wait_names = load_wait_names(run_dir / "wait_names.jsonl", run.warnings)
    run.lost_events = _lost_events(run.meta, run_dir / "meta.json")
    return run


def per_run(run, attr: str, key: tuple, build, fits=None):
    """build()'s result, kept on the run under attr while key (ids of the streams it was
    built from) holds and, if given, fits(the kept result) says it serves this call."""
    c = getattr(run, attr, None)
    if c is not None and c[0] == key and (fits is None or fits(c[1])):
        return c[1]
    v = build()
    try:
        setattr(run, attr, (key, v))
    except AttributeError:
        pass
    return v


def per_run_release(run, *attrs: str) -> None:
    """Forget what per_run kept on the run under attrs (once no later phase needs it: its
    memory goes back before the phases that follow; a later call would build it again)."""
    for a in attrs:
        if getattr(run, a, None) is not None:
            setattr(run, a, None)
    heap_trim()
