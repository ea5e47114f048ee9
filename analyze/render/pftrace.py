"""trace.perfetto-trace: the whole run as a native Perfetto trace (the TracePacket protos of
the `perfetto` package), every record, no event cap. ui.perfetto.dev draws its CPU tracks,
thread states and wakeups from the scheduler events, as from a trace Perfetto recorded.

Packets, in this order:
  - system_info: the kernel release (Perfetto reads a switch-out's state by it).
  - process_tree: every process and thread the run names (traced threads from tasks.bin, the
    other holders of a CPU from occupants.bin).
  - ftrace_events bundles per CPU, df_cpu_switches as compact_sched switches: one sched_switch
    per instant a CPU changed hands that a record saw (a traced thread's switch-out or
    switch-in, switches.bin; the end of a traced thread's run-queue wait, runq.bin, the only
    record of a new thread's first run; a switch-in the cpu event saw while a traced thread
    waited, occupancy.bin). A gap record (unmatched: an edge the kernel never reported) gives
    no edge. The holder a switch leaves is the one the CPU's previous switch brought in; its
    state is the kernel's sched_switch prev_state (R+ when preempted); when no record names
    who came in, the switch brings in pid 0, and the CPU track is blank until its next
    switch (idle, or a task nobody traced was waiting behind).
  - ftrace_events bundles of sched_waking events, df_wakings: one per wakeup of a traced
    thread (runq.bin's rows but the preemptions, which are the R+ switch-outs). The event's
    pid (Perfetto's waker) is the task that woke it; an interrupt's wakeup has pid 0 and the
    hard or soft IRQ flag. Priorities are not recorded: every event says 120.
  - track events (one sequence, interned names): each traced thread's requests as slices on
    its thread track, named by band (requests that overlap on one thread, an event loop's,
    go on lanes under its process), with the request's id, connection, status and its
    parts in ns (they add up to its latency) as arguments; and a flow per wakeup a traced
    task caused to another traced thread, from an instant "wakes" on the waker's track to
    an instant "woken" on the wakee's when it ran.

Timestamps are the records' CLOCK_MONOTONIC ns, unchanged. The bulk (wakings, request
slices, flow instants) is encoded a column at a time (protowire.py).

Read back: read_packets (the TracePackets), df_decoded (the switches and wakings as frames),
check_against_records (every record of the run found in the trace, counted; the e2e test
and bench/perfetto_trace.sh).
"""
from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..explain.antagonists import irq_code, occupant_names
from ..explain.decompose import PARTS
from ..explain.findings import Findings
from ..load.load import WAKER_BLAMES_TASK, thread_names
from . import protowire as pw
from .perfetto import _band_names, _lanes, _task_wakeups, tid_pids

TRACE_FILE = "trace.perfetto-trace"
SWITCHES_PER_BUNDLE = 20_000
WAKINGS_PER_BUNDLE = 5_000
PRIO = 120                 # not recorded
SEQ = 1                    # the track events' trusted sequence
# sched_switch prev_state as the kernel's trace event reports it (__trace_sched_switch_state)
TASK_REPORT, TASK_REPORT_MAX, TASK_IDLE_RAW, TASK_REPORT_IDLE = 0x7f, 0x100, 0x402, 0x80
TASK_RTLOCK_WAIT, TASK_UNINTERRUPTIBLE = 0x1000, 0x2
IRQ_FLAG = {"hardirq": 0x08, "softirq": 0x10}   # ftrace common_flags
_UUID_THREAD, _UUID_PROCESS, _UUID_LANE = 1 << 40, 2 << 40, 3 << 40


def protos():
    """The perfetto_trace_pb2 module (ImportError naming the fix when missing)."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as e:
        raise ImportError(f"the perfetto package is missing ({e}): pip install perfetto") from e
    return perfetto_trace_pb2


@dataclass
class PerfettoInfo:
    """What went into trace.perfetto-trace (summary.json outputs_info)."""
    switches: int = 0      # sched_switch events
    wakings: int = 0       # sched_waking events
    requests: int = 0      # request slices
    flows: int = 0         # wakeup flows
    events: int = 0        # all of them: switches + wakings + 2 per request + 2 per flow
    bytes: int = 0


def ftrace_state(raw, voluntary) -> np.ndarray:
    """sched_switch's prev_state as the kernel's trace event reports it: TASK_REPORT_MAX when
    preempted, else one bit of the task's reported state (S 1, D 2, T 4, ... I 0x80), 0 for
    runnable."""
    raw = np.asarray(raw, np.int64)
    low = raw & TASK_REPORT
    top = np.where(low > 0, 1 << (np.log2(np.maximum(low, 1)).astype(np.int64)), 0)
    top = np.where(raw == TASK_IDLE_RAW, TASK_REPORT_IDLE, top)
    top = np.where(raw & TASK_RTLOCK_WAIT, TASK_UNINTERRUPTIBLE, top)
    return np.where(np.asarray(voluntary, bool), top, TASK_REPORT_MAX)


SLICE_EDGES = 1 << 21      # a CPU's edges in memory at once (a time slice of them)
_SWITCH_COLS = ["cpu", "t_ns", "next_tid", "prev_state"]
_WAKING_COLS = ["t_ns", "tid", "cpu", "waker", "flags"]


def _cpu_rows(cpu: np.ndarray, keep: np.ndarray) -> dict:
    """{cpu: the row numbers keep holds on it, ascending}, CPU by CPU (int32 rows when they
    fit: the index of every record is the biggest array a stream costs here)."""
    rows = np.flatnonzero(keep)
    if len(keep) < 1 << 31:
        rows = rows.astype(np.int32)
    c = cpu[rows]
    order = np.argsort(c, kind="stable")
    rows, c = rows[order], c[order]
    del order
    cuts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]]) if len(c) else np.zeros(0, np.int64)
    return {int(c[lo]): rows[lo:hi] for lo, hi in zip(cuts, np.r_[cuts[1:], len(c)])}


def _time_cuts(times: list, per_slice: int) -> np.ndarray:
    """Boundaries that split these times into slices of about per_slice each (slice k:
    cuts[k] <= t < cuts[k + 1]; the first and last are open)."""
    total = sum(len(t) for t in times)
    k = -(-total // per_slice)
    if k <= 1:
        return np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    stride = max(1, total // (64 * k))
    sample = np.sort(np.concatenate([t[::stride] for t in times]))
    inner = np.unique(sample[(np.arange(1, k) * len(sample)) // k])
    return np.r_[np.iinfo(np.int64).min, inner, np.iinfo(np.int64).max]


def _switch_sources(run) -> list:
    """Every record that says a CPU changed hands, as (cpu, keep, t, next_tid, prev_state):
    the CPU and time columns, the rows to take and getters of the other two over a set of
    rows: the switch-outs, the switch-ins, the ends of run-queue waits, the occupancy
    switch-ins."""
    out = []
    sw = run.switches
    if len(sw):
        ok = ~sw["unmatched"].to_numpy(bool)
        tid, state, vol = sw["tid"], sw["prev_state"], sw["voluntary"]
        out.append((sw["cpu_off"].to_numpy(), ok, sw["t_off_ns"].to_numpy(np.int64),
                    lambda r: np.full(len(r), -1, np.int64),
                    lambda r: ftrace_state(state.to_numpy()[r], vol.to_numpy()[r])))
        out.append((sw["cpu_on"].to_numpy(), ok, sw["t_on_ns"].to_numpy(np.int64),
                    lambda r: tid.to_numpy(np.int64)[r], lambda r: np.full(len(r), -1, np.int64)))
    rq = run.runq
    if len(rq):   # a wait's end is a switch-in: the only record of a new thread's first run
        rtid = rq["tid"]
        out.append((rq["cpu"].to_numpy(), np.ones(len(rq), bool), rq["t_run_ns"].to_numpy(np.int64),
                    lambda r: rtid.to_numpy(np.int64)[r], lambda r: np.full(len(r), -1, np.int64)))
    oc = getattr(run, "occupancy", None)
    if oc is not None and len(oc):
        otid = oc["tid"].to_numpy(np.int64)
        out.append((oc["cpu"].to_numpy(), irq_code(oc["flags"].to_numpy()) == 0,
                    oc["t_ns"].to_numpy(np.int64), lambda r: otid[r],
                    lambda r: np.full(len(r), -1, np.int64)))
    return out


def _cpu_switch_slices(run):
    """df_cpu_switches' rows a CPU at a time, and of a CPU a time slice of at most about
    SLICE_EDGES edges at a time, in (cpu, t) order: dicts of _SWITCH_COLS arrays."""
    sources = _switch_sources(run)
    per_source = [_cpu_rows(cpu, keep) for cpu, keep, *_ in sources]
    for c in sorted(set().union(*per_source)):
        rows = [p.get(c, np.zeros(0, np.int32)) for p in per_source]
        times = [src[2][r] for src, r in zip(sources, rows)]
        cuts = _time_cuts(times, SLICE_EDGES)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            pick = [(t >= lo) & (t < hi) & (t > 0) for t in times]
            sel = [r[m] for r, m in zip(rows, pick)]
            t = np.concatenate([tt[m] for tt, m in zip(times, pick)])
            if not len(t):
                continue
            nxt = np.concatenate([src[3](r) for src, r in zip(sources, sel)])
            st = np.concatenate([src[4](r) for src, r in zip(sources, sel)])
            order = np.argsort(t, kind="stable")
            t = t[order]
            first = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
            yield {"cpu": np.full(len(first), c, np.int64), "t_ns": t[first],
                   "next_tid": np.maximum(np.maximum.reduceat(nxt[order], first), 0),
                   "prev_state": np.maximum(np.maximum.reduceat(st[order], first), 0)}


def _frame_of(slices, cols: list) -> pd.DataFrame:
    parts = list(slices)
    if not parts:
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in cols})
    return pd.DataFrame({c: np.concatenate([p[c] for p in parts]) for c in cols})


def df_cpu_switches(run) -> pd.DataFrame:
    """One row per instant a CPU changed hands that a record saw (module doc): cpu, t_ns,
    next_tid (0: not known), prev_state (of the holder it leaves; 0 when no record says),
    sorted by CPU and time. The trace is written from the same rows a slice at a time."""
    return _frame_of(_cpu_switch_slices(run), _SWITCH_COLS)


def _waking_slices(run):
    """df_wakings' rows a CPU and a time slice at a time, in (cpu, t) order (the records'
    order among equal times): dicts of _WAKING_COLS arrays."""
    rq = run.runq
    if not len(rq):
        return
    ctx = rq["waker_ctx"]
    flag_of = np.zeros(len(ctx.cat.categories), np.int64)
    task = np.isin(np.asarray(ctx.cat.categories, dtype=object), WAKER_BLAMES_TASK)
    for k, v in IRQ_FLAG.items():
        if k in ctx.cat.categories:
            flag_of[ctx.cat.categories.get_loc(k)] = v
    codes = ctx.cat.codes.to_numpy()
    t_all, tid, waker = (rq[c].to_numpy(np.int64) for c in ("t_runnable_ns", "tid", "waker_tid"))
    for c, rows in _cpu_rows(rq["cpu"].to_numpy(), (rq["kind"] != "preempt").to_numpy()).items():
        times = t_all[rows]
        cuts = _time_cuts([times], SLICE_EDGES)
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            m = (times >= lo) & (times < hi)
            r = rows[m][np.argsort(times[m], kind="stable")]
            if not len(r):
                continue
            code = codes[r]
            yield {"t_ns": t_all[r], "tid": tid[r], "cpu": np.full(len(r), c, np.int64),
                   "waker": np.where((code >= 0) & task[code], waker[r], 0),
                   "flags": np.where(code >= 0, flag_of[code], 0)}


def df_wakings(run) -> pd.DataFrame:
    """One row per wakeup of a traced thread (runq.bin rows but preemptions): t_ns (when it
    became runnable), tid, cpu (it ran on), waker (the task that woke it; 0: an interrupt or
    unknown), flags (ftrace common_flags: the IRQ kind); by CPU, then time."""
    return _frame_of(_waking_slices(run), _WAKING_COLS)


def _pids(run, decomp: pd.DataFrame) -> dict:
    """tid -> pid of every thread the run names (the last word of each source)."""
    pids = tid_pids(getattr(run, "occupants", None), decomp, run.switches, run.runq, run.tasks)
    pids.pop(0, None)
    return pids


def _names(run) -> dict:
    names = occupant_names(run)
    names.update(thread_names(run))
    return names


class _Writer:
    """Writes TracePackets as a Trace (field 1, length-delimited), counting bytes. The file
    writes run on a thread of their own, a few chunks behind the encoding (a write waits on
    the disk, with the GIL released, while the next chunk is encoded); close() waits for
    them and raises what a write raised."""

    QUEUED = 8        # chunks in flight at most (each a bundle or CHUNK packets: a few MB)

    def __init__(self, out):
        self.out, self.bytes, self.error = out, 0, None
        self._q = queue.Queue(self.QUEUED)
        self._thread = threading.Thread(target=self._drain, name="perfetto writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while (data := self._q.get()) is not None:
            if self.error is None:
                try:
                    self.out.write(data)
                except BaseException as e:   # noqa: BLE001 - handed to close()
                    self.error = e

    def put(self, packet) -> None:
        body = packet.SerializeToString()
        self.put_framed(b"\x0a" + pw.varint_bytes(len(body)) + body)

    def put_framed(self, data: bytes) -> None:
        """Packets already framed as Trace fields (protowire)."""
        if self.error is not None:
            raise self.error
        self._q.put(data)
        self.bytes += len(data)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error


def _process_tree(pb, pids: dict, names: dict):
    pk = pb.TracePacket()
    tree = pk.process_tree
    for pid in sorted(set(pids.values())):
        p = tree.processes.add(pid=pid)
        p.cmdline.append(names.get(pid, f"pid {pid}"))
    for tid, pid in sorted(pids.items()):
        tree.threads.add(tid=tid, tgid=pid, name=names.get(tid, ""))
    return pk


def _bundles_of(slices, per_bundle: int):
    """The slices' rows regrouped CPU by CPU into chunks of per_bundle rows (a CPU's last
    chunk may be shorter): the bundles the old whole-run frames gave, row for row."""
    pending, cpu = [], None

    def cut(final: bool):
        nonlocal pending
        rows = {k: np.concatenate([p[k] for p in pending]) for k in pending[0]}
        n = len(rows["t_ns"])
        stop = n if final else n - n % per_bundle
        for lo in range(0, stop, per_bundle):
            yield cpu, {k: v[lo:min(lo + per_bundle, stop)] for k, v in rows.items()}
        pending = [{k: v[stop:] for k, v in rows.items()}] if stop < n else []

    for sl in slices:
        c = int(sl["cpu"][0])
        if pending and c != cpu:
            yield from cut(True)
        cpu = c
        pending.append(sl)
        if sum(len(p["t_ns"]) for p in pending) >= per_bundle:
            yield from cut(False)
    if pending:
        yield from cut(True)


def _switch_bundles(pb, slices, names: dict):
    """Framed packets: compact_sched bundles of each CPU's switches (timestamps
    delta-encoded, the first of a bundle absolute; comms interned per bundle), encoded a
    column at a time (protowire)."""
    FB, CS = pb.FtraceEventBundle, pb.FtraceEventBundle.CompactSched
    n = pw.number
    for cpu, c in _bundles_of(slices, SWITCHES_PER_BUNDLE):
        t, nxt = c["t_ns"], c["next_tid"]
        comms, idx = _comms(nxt, names)
        sched = b"".join([
            pw.packed_varint(n(CS, "switch_timestamp"), np.diff(t, prepend=0)),
            pw.packed_varint(n(CS, "switch_prev_state"), c["prev_state"]),
            pw.packed_varint(n(CS, "switch_next_pid"), nxt),
            pw.packed_varint(n(CS, "switch_next_prio"), np.full(len(t), PRIO)),
            pw.rows_bytes(pw.field_len(n(CS, "intern_table"),
                                       pw.table([x.encode() for x in comms],
                                                np.arange(len(comms))))),
            pw.packed_varint(n(CS, "switch_next_comm_index"), idx)])
        bundle = pw.rows_bytes(pw.field_varint(n(FB, "cpu"), [cpu])) \
            + pw.framed(n(FB, "compact_sched"), sched)
        yield pw.framed(1, pw.framed(n(pb.TracePacket, "ftrace_events"), bundle))


def _comms(tids: np.ndarray, names: dict) -> tuple[list, np.ndarray]:
    """(the comm of each distinct tid, ascending, each row's index among them); pid 0 is
    swapper. A hash table's pass (pandas' factorize), not a sort: a few distinct tids in
    thousands of rows, for every bundle."""
    idx, uniq = pd.factorize(tids, sort=True)
    return [names.get(int(t), "") if t else "swapper" for t in uniq], idx


def _waking_bundles(pb, slices, names: dict):
    """Framed packets of FtraceEventBundles of sched_waking events, per target CPU."""
    FE, SW, FB = pb.FtraceEvent, pb.SchedWakingFtraceEvent, pb.FtraceEventBundle
    n = pw.number
    for cpu, col in _bundles_of(slices, WAKINGS_PER_BUNDLE):
        comms, idx = _comms(col["tid"], names)
        k = len(col["t_ns"])
        waking = pw.concat(
            pw.field_len(n(SW, "comm"), pw.table([x.encode() for x in comms], idx)),
            pw.field_varint(n(SW, "pid"), col["tid"]),
            pw.field_varint(n(SW, "prio"), np.full(k, PRIO)),
            pw.field_varint(n(SW, "success"), np.ones(k, np.int64)),
            pw.field_varint(n(SW, "target_cpu"), col["cpu"]))
        event = pw.concat(
            pw.field_varint(n(FE, "timestamp"), col["t_ns"]),
            pw.field_varint(n(FE, "pid"), col["waker"]),
            pw.present(pw.field_varint(n(FE, "common_flags"), col["flags"]),
                       col["flags"] != 0),
            pw.field_len(n(FE, "sched_waking"), waking))
        bundle = pw.rows_bytes(pw.field_varint(n(FB, "cpu"), [int(cpu)])) \
            + pw.rows_bytes(pw.field_len(n(FB, "event"), event))
        yield pw.framed(1, pw.framed(n(pb.TracePacket, "ftrace_events"), bundle))


class _Interned:
    """Event and argument names interned on the track events' sequence."""

    def __init__(self):
        self.events, self.args = {}, {}

    def event(self, name: str) -> int:
        return self.events.setdefault(name, len(self.events) + 1)

    def arg(self, name: str) -> int:
        return self.args.setdefault(name, len(self.args) + 1)

    def packet(self, pb):
        pk = pb.TracePacket(trusted_packet_sequence_id=SEQ, sequence_flags=1)
        for n, i in self.events.items():
            pk.interned_data.event_names.add(iid=i, name=n)
        for n, i in self.args.items():
            pk.interned_data.debug_annotation_names.add(iid=i, name=n)
        return pk


def _request_columns(req: pd.DataFrame) -> list[str]:
    outcome = "ret" if "ret" in req else "status"
    return ["id", "conn", outcome] + [f"{p}_ns" for p in PARTS if f"{p}_ns" in req] \
        + [c for c in ("latency_ns",) if c in req]


def _tracks(pb, pids: dict, names: dict, threads, lanes):
    """TrackDescriptors: a thread track per traced thread with requests or flows, a process
    track for each process with lanes, a lane track per extra lane."""
    for tid in sorted(threads):
        pk = pb.TracePacket()
        d = pk.track_descriptor
        d.uuid = _UUID_THREAD + tid
        d.thread.pid, d.thread.tid = pids.get(tid, tid), tid
        d.thread.thread_name = names.get(tid, "")
        yield pk
    for pid in sorted({pids.get(t, t) for t, _ in lanes}):
        pk = pb.TracePacket()
        d = pk.track_descriptor
        d.uuid = _UUID_PROCESS + pid
        d.process.pid = pid
        d.process.process_name = names.get(pid, "")
        yield pk
    for tid, lane in sorted(lanes):
        pk = pb.TracePacket()
        d = pk.track_descriptor
        d.uuid = _lane_uuid(tid, lane)
        d.parent_uuid = _UUID_PROCESS + pids.get(tid, tid)
        d.name = f"{names.get(tid, 'tid')} {tid} · requests lane {lane}"
        yield pk


def _lane_uuid(tid: int, lane: int) -> int:
    return _UUID_LANE + (lane << 23) + tid


CHUNK = 100_000             # packets encoded at once (bounds the encoder's memory)


def _track_event_packets(pb, ts, track_event: "pw.Col") -> bytes:
    """Framed TracePackets on the track events' sequence, one per row."""
    TP = pb.TracePacket
    k = len(ts)
    packet = pw.concat(
        pw.field_varint(pw.number(TP, "timestamp"), ts),
        pw.field_varint(pw.number(TP, "trusted_packet_sequence_id"), np.full(k, SEQ)),
        pw.field_len(pw.number(TP, "track_event"), track_event),
        pw.field_varint(pw.number(TP, "sequence_flags"), np.full(k, 2)))
    return pw.rows_bytes(pw.field_len(1, packet))


def _request_slices(pb, req: pd.DataFrame, names_band: np.ndarray, lane: np.ndarray,
                    interned: _Interned):
    """Framed packets: each request's SLICE_BEGIN (named by band, its columns as int
    arguments) and SLICE_END on its thread's track or its lane's."""
    TE, DA = pb.TrackEvent, pb.DebugAnnotation
    cols = _request_columns(req)
    tid = req["tid"].to_numpy(np.int64)
    track = np.where(lane == 0, _UUID_THREAD + tid, _lane_uuid(tid, lane))
    codes, distinct = pd.factorize(names_band)
    name = np.array([interned.event(b) for b in distinct], np.int64)[codes]
    vals = {c: req[c].fillna(0).to_numpy(np.int64) for c in cols}
    s, e = req["t_start_ns"].to_numpy(np.int64), req["t_end_ns"].to_numpy(np.int64)
    for lo in range(0, len(req), CHUNK):
        sl = slice(lo, lo + CHUNK)
        k = len(tid[sl])
        args = [pw.field_len(pw.number(TE, "debug_annotations"), pw.concat(
            pw.field_varint(pw.number(DA, "name_iid"), np.full(k, interned.arg(c))),
            pw.field_varint(pw.number(DA, "int_value"), vals[c][sl]))) for c in cols]
        begin = pw.concat(*args,
                          pw.field_varint(pw.number(TE, "type"), np.full(k, TE.TYPE_SLICE_BEGIN)),
                          pw.field_varint(pw.number(TE, "name_iid"), name[sl]),
                          pw.field_varint(pw.number(TE, "track_uuid"), track[sl]))
        yield _track_event_packets(pb, s[sl], begin)
        end = pw.concat(pw.field_varint(pw.number(TE, "type"), np.full(k, TE.TYPE_SLICE_END)),
                        pw.field_varint(pw.number(TE, "track_uuid"), track[sl]))
        yield _track_event_packets(pb, e[sl], end)


def _flow_rows(run, traced) -> np.ndarray:
    """The runq rows of the wakeups a traced task caused to another traced thread."""
    rq = run.runq
    if not len(rq):
        return np.zeros(0, np.int64)
    m = (_task_wakeups(rq) & rq["tid"].isin(traced).to_numpy() & rq["waker_tid"].isin(traced).to_numpy()
         & (rq["t_run_ns"] >= rq["t_runnable_ns"]).to_numpy())
    return np.flatnonzero(m)


def _flow_frame(rq, rows: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"t_wake_ns": rq["t_runnable_ns"].to_numpy(np.int64)[rows],
                         "t_run_ns": rq["t_run_ns"].to_numpy(np.int64)[rows],
                         "waker_tid": rq["waker_tid"].to_numpy(np.int64)[rows],
                         "tid": rq["tid"].to_numpy(np.int64)[rows]})


def df_wakeup_flows(run, traced) -> pd.DataFrame:
    """The wakeups a traced task caused to another traced thread: t_wake_ns, t_run_ns,
    waker_tid, tid."""
    return _flow_frame(run.runq, _flow_rows(run, traced))


def _flow_instants(pb, rq, rows: np.ndarray, interned: _Interned):
    """Framed packets: per flow (id = its place among the flows + 1) an instant "wakes" on
    the waker's track at the wakeup and an instant "woken" on the woken thread's when it
    ran; rows: the flows' runq rows, taken CHUNK at a time."""
    TE = pb.TrackEvent
    for lo in range(0, len(rows), CHUNK):
        f = _flow_frame(rq, rows[lo:lo + CHUNK])
        k = len(f)
        ids = np.arange(lo + 1, lo + k + 1, dtype=np.int64)
        for t, who, name, flow in (("t_wake_ns", "waker_tid", "wakes", "flow_ids"),
                                   ("t_run_ns", "tid", "woken", "terminating_flow_ids")):
            ev = pw.concat(
                pw.field_varint(pw.number(TE, "type"), np.full(k, TE.TYPE_INSTANT)),
                pw.field_varint(pw.number(TE, "name_iid"), np.full(k, interned.event(name))),
                pw.field_varint(pw.number(TE, "track_uuid"),
                                _UUID_THREAD + f[who].to_numpy(np.int64)),
                pw.field_fixed64(pw.number(TE, flow), ids))
            yield _track_event_packets(pb, f[t].to_numpy(np.int64), ev)


def write_perfetto_trace(f: Findings, path) -> PerfettoInfo:
    """Write the run of the findings (f.run, f.decomp, f.band) as a native Perfetto trace at
    path (module doc); returns what it holds. ImportError without the perfetto package."""
    pb = protos()
    run, decomp = f.run, f.decomp
    info = PerfettoInfo()
    names = _names(run)
    pids = _pids(run, decomp)
    req = decomp[decomp["t_end_ns"] >= decomp["t_start_ns"]] if len(decomp) else decomp
    traced = set(thread_names(run)) or set(run.switches["tid"].astype(int).tolist())
    flows = _flow_rows(run, list(traced))
    flow_tids = np.unique(np.r_[run.runq["waker_tid"].to_numpy(np.int64)[flows],
                                run.runq["tid"].to_numpy(np.int64)[flows]]) if len(flows) \
        else np.zeros(0, np.int64)
    interned = _Interned()
    if len(req):
        rtid = req["tid"].to_numpy(np.int64)
        lane = _lanes(rtid, req["t_start_ns"].to_numpy(np.int64),
                      req["t_end_ns"].to_numpy(np.int64))
        band = _band_names(f.band.loc[req.index])
        for c in _request_columns(req):
            interned.arg(c)
        for b in np.unique(band):
            interned.event(b)
    else:
        rtid, lane, band = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object)
    interned.event("wakes"), interned.event("woken")
    thread_tracks = set(rtid[lane == 0].tolist()) | set(flow_tids.tolist())
    lanes = {(int(t), int(k)) for t, k in zip(rtid, lane) if k}
    counts = {"switches": 0, "wakings": 0}
    tmp = os.fspath(path) + ".tmp"
    with open(tmp, "wb") as out:
        w = _Writer(out)
        try:
            _write_packets(w, pb, run, names, pids, req, band, lane, interned, flows,
                           thread_tracks, lanes, counts)
        finally:
            w.close()
    os.replace(tmp, path)
    info.switches, info.wakings = counts["switches"], counts["wakings"]
    info.requests, info.flows = len(req), len(flows)
    info.events = info.switches + info.wakings + 2 * info.requests + 2 * info.flows
    info.bytes = w.bytes
    return info


def _write_packets(w: _Writer, pb, run, names, pids, req, band, lane, interned, flows,
                   thread_tracks, lanes, counts) -> None:
    """Every packet of the trace, in the module doc's order."""

    def counted(slices, kind):
        for sl in slices:
            counts[kind] += len(sl["t_ns"])
            yield sl

    pk = pb.TracePacket()
    uts = pk.system_info.utsname
    uts.sysname, uts.release = "Linux", str((run.meta or {}).get("kernel") or "")
    w.put(pk)
    w.put(_process_tree(pb, pids, names))
    for data in _switch_bundles(pb, counted(_cpu_switch_slices(run), "switches"), names):
        w.put_framed(data)
    for data in _waking_bundles(pb, counted(_waking_slices(run), "wakings"), names):
        w.put_framed(data)
    w.put(interned.packet(pb))
    for pk in _tracks(pb, pids, names, thread_tracks, lanes):
        w.put(pk)
    if len(req):
        for data in _request_slices(pb, req, band, lane, interned):
            w.put_framed(data)
    for data in _flow_instants(pb, run.runq, flows, interned):
        w.put_framed(data)


def read_packets(path) -> list:
    """The TracePackets of a trace file."""
    pb = protos()
    trace = pb.Trace()
    trace.ParseFromString(Path(path).read_bytes())
    return list(trace.packet)


def df_decoded(path) -> dict:
    """The scheduler events of a trace file read back: "switches" (cpu, t_ns, prev_tid: the
    CPU's previous switch's next_tid, -1 for its first; next_tid, prev_state) and "wakings"
    (t_ns, tid, cpu, waker, flags), and "requests": the number of request slices."""
    sw, wk, nreq = [], [], 0
    for p in read_packets(path):
        if p.HasField("ftrace_events"):
            b = p.ftrace_events
            cs = b.compact_sched
            if len(cs.switch_timestamp):
                sw.append(pd.DataFrame({
                    "cpu": b.cpu, "t_ns": np.cumsum(np.array(cs.switch_timestamp, np.int64)),
                    "next_tid": np.array(cs.switch_next_pid, np.int64),
                    "prev_state": np.array(cs.switch_prev_state, np.int64)}))
            if len(b.event):
                wk.append(pd.DataFrame([(e.timestamp, e.sched_waking.pid,
                                         e.sched_waking.target_cpu, e.pid, e.common_flags)
                                        for e in b.event],
                                       columns=["t_ns", "tid", "cpu", "waker", "flags"]))
        elif p.HasField("track_event") and p.track_event.type == 1:   # TYPE_SLICE_BEGIN
            nreq += 1
    sw = pd.concat(sw, ignore_index=True) if sw else pd.DataFrame(
        columns=["cpu", "t_ns", "next_tid", "prev_state"], dtype=np.int64)
    sw = sw.sort_values(["cpu", "t_ns"], kind="stable").reset_index(drop=True)
    sw.insert(2, "prev_tid", sw.groupby("cpu")["next_tid"].shift(1).fillna(-1).astype(np.int64))
    wk = pd.concat(wk, ignore_index=True) if wk else pd.DataFrame(
        columns=["t_ns", "tid", "cpu", "waker", "flags"], dtype=np.int64)
    return {"switches": sw, "wakings": wk, "requests": nreq}


def check_against_records(run, path) -> dict:
    """Read the trace back and find every record of the run in it: each switch record's
    switch-out (its CPU, time, the thread leaving, its state) and switch-in (the thread
    coming in), each wakeup (time, thread, CPU, waker), each preemption (an R+ switch-out of
    the thread at its time). Returns the counts found and missed, per kind."""
    d = df_decoded(path)
    sw, wk = d["switches"], d["wakings"]
    at = pd.MultiIndex.from_arrays([sw["cpu"], sw["t_ns"]])
    rec = run.switches

    def found(cpu, t, col, want, state=None):
        i = at.get_indexer(pd.MultiIndex.from_arrays([cpu, t]))
        ok = i >= 0
        got = np.where(ok, sw[col].to_numpy()[np.maximum(i, 0)], -2)
        ok &= got == want
        if state is not None:
            ok &= sw["prev_state"].to_numpy()[np.maximum(i, 0)] == state
        return int(ok.sum())

    out = {"switch_records": len(rec), "gap_records": len(run.gaps) if run.gaps is not None
           else 0}
    if len(rec):
        tid = rec["tid"].to_numpy(np.int64)
        out["switch_outs_found"] = found(rec["cpu_off"].to_numpy(np.int64),
                                         rec["t_off_ns"].to_numpy(np.int64), "prev_tid", tid,
                                         ftrace_state(rec["prev_state"], rec["voluntary"]))
        out["switch_ins_found"] = found(rec["cpu_on"].to_numpy(np.int64),
                                        rec["t_on_ns"].to_numpy(np.int64), "next_tid", tid)
    rq = run.runq
    pre = (rq["kind"] == "preempt").to_numpy() if len(rq) else np.zeros(0, bool)
    out["runq_records"], out["preemptions"] = len(rq), int(pre.sum())
    if len(rq):
        p = rq[pre]
        out["preemptions_found"] = _preemptions_found(sw, p)
        want = df_wakings(run)
        key = ["t_ns", "tid", "cpu", "waker", "flags"]
        m = want.merge(wk.astype(np.int64), on=key, how="left", indicator=True)
        out["wakeups"] = len(want)
        out["wakeups_found"] = int((m["_merge"] == "both").sum())
    out["wakings_in_trace"], out["switches_in_trace"] = len(wk), len(sw)
    out["request_slices"] = d["requests"]
    return out


def _preemptions_found(sw: pd.DataFrame, pre: pd.DataFrame) -> int:
    """Preemption records with an R+ switch-out of their thread at their time (on any CPU)."""
    r = sw[sw["prev_state"] == TASK_REPORT_MAX][["t_ns", "prev_tid"]]
    m = pd.DataFrame({"t_ns": pre["t_runnable_ns"].to_numpy(np.int64),
                      "prev_tid": pre["tid"].to_numpy(np.int64)}).merge(
        r.drop_duplicates(), on=["t_ns", "prev_tid"], how="left", indicator=True)
    return int((m["_merge"] == "both").sum())
