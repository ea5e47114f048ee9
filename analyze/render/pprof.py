"""pprof profiles of a run: RUN/profiles/oncpu.pb.gz, offcpu.pb.gz and locks.pb.gz, read by
`go tool pprof`, Pyroscope, Parca and every tool that takes Google's profile format (a gzipped
perftools.profiles.Profile). docs/export.md maps each field.

df_offcpu_profile -> one row per (thread, wait reason, call, kernel stack, user stack) of the
                     switches: tid, comm, reason, call, kstack_id, ustack_id, count, ns. Every
                     off-CPU interval of switches.bin once, so ns sums to threads.csv offcpu_ns.
                     reason: lock, io, sleep or other for a blocked thread (waits.REASONS),
                     "preempted" for one switched out while runnable.
df_oncpu_profile  -> one row per (thread name, sampled stack) of oncpu.folded (perf's samples,
                     collapsed by run.sh): comm, frames (leaf first), samples, ns. ns is each
                     thread name's on-CPU time measured from the switches (threads.csv oncpu_ns)
                     split over its stacks in proportion to their samples, so it sums to the
                     run's on-CPU time; a traced thread name perf never sampled gets one
                     "[not sampled]" frame with its whole time.
df_locks_profile  -> one row per (thread, mutex, user stack) of locks.bin: tid, comm, mutex,
                     ustack_id, count, wait_ns, hold_ns (wait_ns sums to the run's lock wait).
write_profiles    -> the three files (each only when its records are there).

The messages are pprof's published profile.proto (package perftools.profiles), declared here
field by field and encoded by the protobuf runtime.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..explain.waits import REASONS, SYSCALLS, reason_codes
from ..load.frames import frame_parts
from ..load.load import thread_names, wall_start_ns

PROFILES_DIR = "profiles"
PROFILES = ["oncpu.pb.gz", "offcpu.pb.gz", "locks.pb.gz"]
NO_STACK = "[no stack recorded]"
PREEMPTED = "[preempted]"   # a switch-out while runnable records no stack
NOT_SAMPLED = "[not sampled]"

# profile.proto, message by message: (field, number, type, repeated, message type)
_I64, _U64, _STR, _BOOL, _MSG = "int64", "uint64", "string", "bool", "message"
_MESSAGES = {
    "Profile": [("sample_type", 1, _MSG, True, "ValueType"), ("sample", 2, _MSG, True, "Sample"),
                ("mapping", 3, _MSG, True, "Mapping"), ("location", 4, _MSG, True, "Location"),
                ("function", 5, _MSG, True, "Function"), ("string_table", 6, _STR, True, None),
                ("drop_frames", 7, _I64, False, None), ("keep_frames", 8, _I64, False, None),
                ("time_nanos", 9, _I64, False, None), ("duration_nanos", 10, _I64, False, None),
                ("period_type", 11, _MSG, False, "ValueType"), ("period", 12, _I64, False, None),
                ("comment", 13, _I64, True, None), ("default_sample_type", 14, _I64, False, None)],
    "ValueType": [("type", 1, _I64, False, None), ("unit", 2, _I64, False, None)],
    "Sample": [("location_id", 1, _U64, True, None), ("value", 2, _I64, True, None),
               ("label", 3, _MSG, True, "Label")],
    "Label": [("key", 1, _I64, False, None), ("str", 2, _I64, False, None),
              ("num", 3, _I64, False, None), ("num_unit", 4, _I64, False, None)],
    "Mapping": [("id", 1, _U64, False, None), ("memory_start", 2, _U64, False, None),
                ("memory_limit", 3, _U64, False, None), ("file_offset", 4, _U64, False, None),
                ("filename", 5, _I64, False, None), ("build_id", 6, _I64, False, None),
                ("has_functions", 7, _BOOL, False, None),
                ("has_filenames", 8, _BOOL, False, None),
                ("has_line_numbers", 9, _BOOL, False, None),
                ("has_inline_frames", 10, _BOOL, False, None)],
    "Location": [("id", 1, _U64, False, None), ("mapping_id", 2, _U64, False, None),
                 ("address", 3, _U64, False, None), ("line", 4, _MSG, True, "Line"),
                 ("is_folded", 5, _BOOL, False, None)],
    "Line": [("function_id", 1, _U64, False, None), ("line", 2, _I64, False, None)],
    "Function": [("id", 1, _U64, False, None), ("name", 2, _I64, False, None),
                 ("system_name", 3, _I64, False, None), ("filename", 4, _I64, False, None),
                 ("start_line", 5, _I64, False, None)],
}
_CLASSES = {}


def profile_class():
    """The perftools.profiles.Profile message class (built once from _MESSAGES)."""
    if "Profile" not in _CLASSES:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        F = descriptor_pb2.FieldDescriptorProto
        kinds = {_I64: F.TYPE_INT64, _U64: F.TYPE_UINT64, _STR: F.TYPE_STRING,
                 _BOOL: F.TYPE_BOOL, _MSG: F.TYPE_MESSAGE}
        f = descriptor_pb2.FileDescriptorProto(name="tailtrace/pprof/profile.proto",
                                               package="perftools.profiles", syntax="proto3")
        for name, fields in _MESSAGES.items():
            m = f.message_type.add(name=name)
            for fname, number, kind, repeated, msg in fields:
                fd = m.field.add(name=fname, number=number, type=kinds[kind],
                                 label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
                if msg:
                    fd.type_name = f".perftools.profiles.{msg}"
        pool = descriptor_pool.DescriptorPool()
        pool.Add(f)
        _CLASSES["Profile"] = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("perftools.profiles.Profile"))
    return _CLASSES["Profile"]


class ProfileBuilder:
    """One profile: sample types [(type, unit)], samples of leaf-first frames with labels."""

    def __init__(self, sample_types, default: str, meta: dict | None = None, comment=()):
        self.p = profile_class()()
        self._strings, self._functions, self._locations, self._mappings = {}, {}, {}, {}
        self.s("")
        for t, u in sample_types:
            self.p.sample_type.add(type=self.s(t), unit=self.s(u))
        self.p.default_sample_type = self.s(default)
        meta = meta or {}
        t0, t1 = meta.get("mono_start_ns"), meta.get("mono_end_ns")
        if isinstance(t0, int) and isinstance(t1, int) and t1 >= t0:
            self.p.duration_nanos = t1 - t0
        wall = wall_start_ns(meta)
        if wall:
            self.p.time_nanos = wall
        for c in comment:
            self.p.comment.append(self.s(c))

    def s(self, text: str) -> int:
        """text's index in the string table."""
        i = self._strings.get(text)
        if i is None:
            i = self._strings[text] = len(self.p.string_table)
            self.p.string_table.append(text)
        return i

    def location(self, frame: str) -> int:
        loc = self._locations.get(frame)
        if loc is None:
            name, filename = frame_parts(frame)
            fid = self._functions.get((name, filename))
            if fid is None:
                fid = self._functions[(name, filename)] = len(self._functions) + 1
                self.p.function.add(id=fid, name=self.s(name), system_name=self.s(name),
                                    filename=self.s(filename))
            loc = self._locations[frame] = len(self._locations) + 1
            self.p.location.add(id=loc, mapping_id=self.mapping(filename)).line.add(
                function_id=fid)
        return loc

    def mapping(self, filename: str) -> int:
        """The mapping of one file (no addresses: the frames come symbolized)."""
        mid = self._mappings.get(filename)
        if mid is None:
            mid = self._mappings[filename] = len(self._mappings) + 1
            self.p.mapping.add(id=mid, filename=self.s(filename or "[unknown]"),
                               has_functions=True)
        return mid

    def add(self, frames, values, labels: dict, empty: str = NO_STACK) -> None:
        """One sample: frames leaf first (none: the one frame `empty`), values in sample-type
        order, labels {key: str or int (a number label)}."""
        smp = self.p.sample.add()
        smp.location_id.extend(self.location(f) for f in (frames or [empty]))
        smp.value.extend(int(v) for v in values)
        for k, v in labels.items():
            if isinstance(v, (int, np.integer)):
                smp.label.add(key=self.s(k), num=int(v))
            elif v:
                smp.label.add(key=self.s(k), str=self.s(str(v)))

    def write(self, path: Path) -> Path:
        """The gzipped profile at path (written whole, then renamed into place)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(gzip.compress(self.p.SerializeToString(), mtime=0))
        os.replace(tmp, path)
        return path


def _stack(run, stream: str, sid) -> list:
    return run.stacks.get((stream, int(sid)), []) if sid >= 0 else []


def _comms(run, tids: np.ndarray) -> list:
    names = thread_names(run)
    return [names.get(int(t), "") or f"tid {int(t)}" for t in tids]


def df_offcpu_profile(run) -> pd.DataFrame:
    """Off-CPU time by thread, wait reason, call and stacks (see the module's doc). Grouped
    on integer codes (a preemption's reason code is len(REASONS), its call -1), named after."""
    sw = run.switches
    vol = sw["voluntary"].to_numpy(bool)
    nr = sw["syscall"].to_numpy(np.int64) if "syscall" in sw else np.full(len(sw), -1)
    df = pd.DataFrame({"tid": sw["tid"].to_numpy(),   # the streams' narrow ids, not copies
                       "reason": np.where(vol, reason_codes(nr), len(REASONS)).astype(np.int8),
                       "call": np.where(vol, nr, -1).astype(np.int32),
                       "kstack_id": sw["kstack_id"].to_numpy(),
                       "ustack_id": sw["ustack_id"].to_numpy(),
                       "ns": sw["t_on_ns"].to_numpy(np.int64) - sw["t_off_ns"].to_numpy(np.int64)},
                      copy=False)
    keys = ["tid", "reason", "call", "kstack_id", "ustack_id"]
    g = df.groupby(keys, sort=False).agg(count=("ns", "size"), ns=("ns", "sum")).reset_index()
    del df
    g["tid"] = g["tid"].astype(np.int64)
    g["kstack_id"], g["ustack_id"] = (g[c].astype(np.int64) for c in ("kstack_id", "ustack_id"))
    g["reason"] = np.array(REASONS + ["preempted"], dtype=object)[g["reason"].to_numpy()]
    g["call"] = [SYSCALLS.get(int(n), f"syscall {int(n)}") if n >= 0 else ""
                 for n in g["call"].to_numpy()]
    g = g.sort_values(keys, kind="stable").reset_index(drop=True)
    g.insert(1, "comm", _comms(run, g["tid"].to_numpy()))
    return g


def df_oncpu_profile(run, folded: Path, threads: pd.DataFrame) -> pd.DataFrame:
    """On-CPU stacks of oncpu.folded weighted by the switches' on-CPU time (module doc)."""
    rows = []
    with open(folded, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = stack.split(";")
            rows.append((frames[0], tuple(reversed(frames[1:])), int(count)))
    df = pd.DataFrame(rows, columns=["comm", "frames", "samples"])
    df = df.groupby(["comm", "frames"], sort=True, as_index=False)["samples"].sum()
    oncpu = threads.groupby(threads["comm"].astype(str))["oncpu_ns"].sum()
    oncpu = oncpu[oncpu > 0]
    df = df[df["comm"].isin(oncpu.index)].copy()
    share = df["samples"] / df.groupby("comm")["samples"].transform("sum")
    df["ns"] = _split(oncpu.reindex(df["comm"]).to_numpy(np.int64), share.to_numpy(),
                      df["comm"].to_numpy())
    missing = [c for c in oncpu.index if c not in set(df["comm"])]
    extra = pd.DataFrame({"comm": missing, "frames": [(NOT_SAMPLED,)] * len(missing),
                          "samples": 0, "ns": oncpu.reindex(missing).to_numpy(np.int64)})
    return pd.concat([df, extra], ignore_index=True) if missing else df.reset_index(drop=True)


def _split(total: np.ndarray, share: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each row's share of its group's total in whole ns, the rounding remainder given to the
    group's last row so that every group sums to its total exactly."""
    ns = np.floor(total * share).astype(np.int64)
    if not len(ns):
        return ns
    s = pd.Series(ns).groupby(group).transform("sum").to_numpy()
    last = ~pd.Series(group).duplicated(keep="last").to_numpy()
    ns[last] += (total - s)[last]
    return ns


def df_locks_profile(run) -> pd.DataFrame:
    """Mutex acquisitions by thread, mutex and user stack (see the module's doc)."""
    lk = run.locks
    hold = np.nan_to_num(lk["hold_ns"].to_numpy(np.float64)).astype(np.int64)  # NaN: not released
    df = pd.DataFrame({"tid": lk["tid"].to_numpy(np.int64),
                       "mutex": lk["mutex"].to_numpy(np.uint64),
                       "ustack_id": lk["ustack_id"].to_numpy(np.int64),
                       "wait_ns": lk["wait_ns"].to_numpy(np.int64),
                       "hold_ns": hold})
    g = df.groupby(["tid", "mutex", "ustack_id"], sort=True).agg(
        count=("wait_ns", "size"), wait_ns=("wait_ns", "sum"), hold_ns=("hold_ns", "sum"))
    g = g.reset_index()
    g.insert(1, "comm", _comms(run, g["tid"].to_numpy()))
    return g


def write_profiles(run, out: Path, threads: pd.DataFrame | None = None) -> list[str]:
    """Write out/profiles/*.pb.gz for the records the run has; their names, relative to out."""
    d = Path(out) / PROFILES_DIR
    written = []
    jobs = []
    if run.has("switches"):
        jobs.append(("offcpu.pb.gz", lambda: _offcpu(run)))
        folded = Path(out) / "oncpu.folded"
        if threads is not None and folded.exists() and folded.stat().st_size:
            jobs.append(("oncpu.pb.gz", lambda: _oncpu(run, folded, threads)))
    if run.has("locks") and len(run.locks):
        jobs.append(("locks.pb.gz", lambda: _locks(run)))
    for name, build in jobs:
        d.mkdir(exist_ok=True)
        build().write(d / name)
        written.append(f"{PROFILES_DIR}/{name}")
    return written


def _offcpu(run) -> ProfileBuilder:
    b = ProfileBuilder([("waits", "count"), ("off_cpu", "nanoseconds")], "off_cpu", run.meta,
                       ["tailtrace off-CPU: every switch-out to its switch-in, kernel stack "
                        "above the user stack; label reason: lock, io, sleep, other or "
                        "preempted"])
    for r in df_offcpu_profile(run).itertuples(index=False):
        frames = _stack(run, "offcpu", r.kstack_id) + _stack(run, "offcpu", r.ustack_id)
        b.add(frames, (r.count, r.ns), {"thread": r.comm, "tid": r.tid, "reason": r.reason,
                                        "call": r.call},
              PREEMPTED if r.reason == "preempted" else NO_STACK)
    return b


def _oncpu(run, folded: Path, threads: pd.DataFrame) -> ProfileBuilder:
    b = ProfileBuilder([("samples", "count"), ("cpu", "nanoseconds")], "cpu", run.meta,
                       ["tailtrace on-CPU: perf's sampled stacks; cpu is each thread name's "
                        "on-CPU time from the switches, split by its samples"])
    for r in df_oncpu_profile(run, folded, threads).itertuples(index=False):
        b.add(list(r.frames), (r.samples, r.ns), {"thread": r.comm})
    return b


def _locks(run) -> ProfileBuilder:
    b = ProfileBuilder([("acquisitions", "count"), ("wait", "nanoseconds"),
                        ("hold", "nanoseconds")], "wait", run.meta,
                       ["tailtrace locks: pthread mutex acquisitions by the stack that took "
                        "them"])
    for r in df_locks_profile(run).itertuples(index=False):
        b.add(_stack(run, "locks", r.ustack_id), (r.count, r.wait_ns, r.hold_ns),
              {"thread": r.comm, "tid": r.tid, "mutex": f"{int(r.mutex):#x}"})
    return b
