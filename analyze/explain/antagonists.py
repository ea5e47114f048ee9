"""Who held the CPU while a traced thread waited for it: the antagonists of runnable time.

A runnable interval [t_runnable, t_run] of thread T (runq.bin) ended when T was switched in
on CPU c. Whatever ran on c in that interval kept T waiting: occupancy.bin (tailtrace's cpu
event) holds every switch on c around T's wait — untraced tasks, kernel threads and the idle
task included — so the interval splits exactly into the tasks that held c:

  occupant segments of c:  [t_k, t_k+1) held by task k        (df_occupancy)
  antagonists of a wait:   |segment ∩ [t_runnable, t_run]| per task, Σ = the wait, to the ns
                           (df_runnable_occupants; a part no record covers is "unknown")

Classes (CLASSES) decide the fix: sibling (another thread of T's own process:
oversubscription), peer (another traced process: the target and its --also-pid processes
are each other's peers, e.g. a client and the server it talks to), other
(another process: a neighbour), kernel (a kernel thread), irq (an interrupt: a hard IRQ
handler, the local timer, a softirq not run by a task's own syscall; recorded with the opt-in
irq event, else its time is the interrupted task's), idle (the CPU ran nothing: the wait was
the wakeup's own latency), unknown (no record: the per-CPU ring was overrun, or before the
stream began).

How waits are counted: a wait is charged to the CPU the thread finally ran on. A thread
migrated while runnable spent the part before its migration in another CPU's queue; that
part is still split by what ran on the final CPU (the runq records do not say when it
moved), so for such waits the split is an approximation — counted in summary.json
`antagonists_migrated_share` from the tasks' migrations.

Windows (requests, critical-path hops, thread lifetimes) are measured with
antagonists_in_windows: the overlap rows of each thread are disjoint and sorted in time, so
each window takes a contiguous run of them (np.searchsorted), clipped at its edges.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..load.load import (OCC_HARDIRQ, OCC_IRQ_SHIFT, OCC_IRQ_TIMER, OCC_KTHREAD, OCC_SOFTIRQ,
                         OCC_TRUNC, SOFTIRQ_NAMES, per_run)
from .containers import container_of
from .intervals import Axis
from .order import argsort_unless_sorted, search_in_order, thread_time_order
from .peer import also_comm, peer_pids

CLASSES = ["sibling", "peer", "other", "kernel", "irq", "idle", "unknown"]
IRQ_BITS = OCC_HARDIRQ | OCC_SOFTIRQ
# what each class says, and the fix it points to (sentences in attribute.py / report)
CLASS_WORDS = {
    "sibling": "other threads of the same process",
    "peer": "the process it talks to",
    "other": "other processes",
    "kernel": "kernel threads",
    "irq": "interrupts (hard IRQs and softirqs)",
    "idle": "nothing (the CPU was idle: wakeup latency)",
    "unknown": "unknown (not recorded)",
}
ROW_COLS = ["runq_idx", "victim_tid", "victim_pid", "cpu", "t_from_ns", "t_to_ns", "tid", "pid",
            "cls", "irq", "ns"]


def irq_code(flags) -> np.ndarray:
    """The interrupt a record names (its kind bit and number), 0 for a task."""
    f = np.asarray(flags, dtype=np.int64) & 0xffffffff
    return np.where((f & IRQ_BITS) != 0, f & ~np.int64(0xffff ^ IRQ_BITS), 0)


def irq_label(run, code: int) -> str:
    """'softirq NET_RX', 'timer interrupt', 'irq 41 (virtio3-rx)'."""
    num = (int(code) >> OCC_IRQ_SHIFT) & 0xffff
    if code & OCC_SOFTIRQ:
        return f"softirq {SOFTIRQ_NAMES[num] if num < len(SOFTIRQ_NAMES) else num}"
    if num == OCC_IRQ_TIMER:
        return "timer interrupt"
    name = ((run.meta or {}).get("irqs") or {}).get(str(num))
    return f"irq {num} ({name})" if name else f"irq {num}"


def has_occupancy(run) -> bool:
    return run.has("occupancy") and run.has("runq")


def df_occupancy(run) -> pd.DataFrame:
    """The CPUs' timelines known from occupancy.bin: one row per segment.

    Columns: cpu, t_from_ns, t_to_ns (the CPU's next record), tid, pid, flags. Records
    written twice (overlapping waits) count once. A segment followed by a truncated record
    (TT_OCC_TRUNC: switches between were lost) has tid -1: unknown. A CPU's last record
    opens no segment (its end is unknown). Built once per run (the rows, the trace and the
    CPU lanes all read it); callers do not modify it."""
    return per_run(run, "_occupancy_segments", (id(run.occupancy),), lambda: _segments(run))


def _segments(run) -> pd.DataFrame:
    oc = run.occupancy
    cols = ["cpu", "t_from_ns", "t_to_ns", "tid", "pid", "flags"]
    if not len(oc):
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in cols})
    cpu, t = oc["cpu"].to_numpy(np.int64), oc["t_ns"].to_numpy(np.int64)
    # by cpu, then time (stable: of records written twice, the first one stays first)
    o = np.lexsort((t, cpu))
    cpu, t = cpu[o], t[o]
    first = np.r_[True, (cpu[1:] != cpu[:-1]) | (t[1:] != t[:-1])]
    o, cpu, t = o[first], cpu[first], t[first]
    tid, pid = oc["tid"].to_numpy(np.int64)[o], oc["pid"].to_numpy(np.int64)[o]
    flags = oc["flags"].to_numpy(np.int64)[o]
    same_next = np.append(cpu[1:] == cpu[:-1], False)
    t_to = np.append(t[1:], 0)
    trunc_next = np.append((flags[1:] & OCC_TRUNC) != 0, False)
    tid = np.where(trunc_next, -1, tid)
    pid = np.where(trunc_next, -1, pid)
    keep = same_next
    return pd.DataFrame({"cpu": cpu[keep], "t_from_ns": t[keep], "t_to_ns": t_to[keep],
                         "tid": tid[keep], "pid": pid[keep], "flags": flags[keep]}, copy=False)


def traced_pids(run) -> set:
    """The processes traced together (the target and its --also-pid peers): each is the
    others' peer. None in a system-wide run, where "the other processes" are the machine."""
    tgt = (run.meta or {}).get("target")
    if isinstance(tgt, dict) and tgt.get("mode") == "all":
        return set()
    pids = set(int(p) for p in peer_pids(run, -1))
    pids |= set(int(p) for p in run.tasks["pid"]) if len(run.tasks) else set()
    if isinstance(tgt, dict) and tgt.get("pid"):
        pids.add(int(tgt["pid"]))
    return {p for p in pids if p > 0}


CODE = {c: np.int8(i) for i, c in enumerate(CLASSES)}


def _seg_codes(tid, pid, flags, peers: set) -> tuple[np.ndarray, np.ndarray]:
    """What an occupant's class owes to itself alone: (base, peer). base is the class
    (CODE) of an idle CPU, an interrupt, a kernel thread or an unknown occupant, and -1
    for a task, whose class (sibling, peer or other) depends on the waiting thread; peer
    marks the occupants of a traced process."""
    base = np.full(len(tid), -1, dtype=np.int8)
    base[((flags & OCC_KTHREAD) != 0) & (tid > 0)] = CODE["kernel"]
    idle = tid == 0
    base[idle] = CODE["idle"]
    base[idle & ((flags & IRQ_BITS) != 0)] = CODE["irq"]
    base[tid < 0] = CODE["unknown"]
    peer = (np.isin(pid, np.fromiter(peers, dtype=np.int64, count=len(peers))) if peers
            else np.zeros(len(pid), bool))
    return base, peer


def _task_codes(base, peer, victim_tid, victim_pid, tid, pid) -> np.ndarray:
    """The class of each occupant (CODE) relative to the waiting thread victim_tid of
    process victim_pid, from its _seg_codes: a task of the victim's process is a sibling,
    one of another traced process a peer, any other task other."""
    cls = base.copy()
    task = cls < 0
    same = pid == victim_pid
    cls[task] = CODE["other"]
    cls[task & peer & ~same] = CODE["peer"]
    cls[task & same & (tid != victim_tid)] = CODE["sibling"]
    return cls


def _classify_codes(victim_tid, victim_pid, tid, pid, flags, peers: set) -> np.ndarray:
    """The class of each occupant (CODE: an index into CLASSES) relative to the waiting
    thread victim_tid of process victim_pid (scalars or arrays); peers are the traced
    processes (the victim's own is no peer of itself)."""
    tid, pid = np.asarray(tid, np.int64), np.asarray(pid, np.int64)
    base, peer = _seg_codes(tid, pid, np.asarray(flags, np.int64), peers)
    return _task_codes(base, peer, victim_tid, victim_pid, tid, pid)


def classify(victim_tid, victim_pid, tid, pid, flags, peers: set) -> np.ndarray:
    """_classify_codes as class names (an object array)."""
    return np.asarray(CLASSES, dtype=object)[_classify_codes(victim_tid, victim_pid, tid, pid,
                                                               flags, peers)]


def df_runnable_occupants(run) -> pd.DataFrame:
    """One row per (runnable interval, task that held its CPU meanwhile).

    Columns ROW_COLS: runq_idx (row of run.runq), victim_tid, victim_pid, cpu, t_from_ns,
    t_to_ns (the overlap), tid, pid (of the occupant; -1: unknown, 0: idle), cls (CLASSES),
    irq (the interrupt, irq_code; 0 for a task), ns. For every interval the rows partition
    it: Σ ns = t_run − t_runnable exactly, the parts no record covers in rows of class
    unknown. Sorted by victim_tid then time, so each thread's rows are disjoint and in
    order. Cached on the run."""
    return _rows_cached(run)[0]


def _rows_cached(run) -> tuple[pd.DataFrame, dict]:
    """(the rows, the same columns as numpy arrays, cls as CODE): built once per run."""
    def build():
        cols = _rows(run)
        # the arrays themselves, not copies: the table has a row per (wait, switch
        # meanwhile), tens of millions on an oversubscribed run
        return pd.DataFrame({k: (pd.Categorical.from_codes(v, categories=CLASSES)
                                 if k == "cls" else v) for k, v in cols.items()},
                            copy=False), cols
    return per_run(run, "_antagonist_rows", (id(run.runq), id(run.occupancy)), build)


# Above this many (wait, segment) pairs the rows of one wait are merged by antagonist
# (_rows): the table would take several GB (naive/100 for 10 s: 56M pairs, 11 GB).
ROW_BUDGET = 12_000_000
_CHUNK = 2_000_000
# In the merged table, an occupant (process, interrupt) of a CPU whose (wait, segment) pairs
# there exceed HEAVY × the CPU's waits is summed from prefix sums (a few searches per wait)
# instead of pair by pair: the threads of an oversubscribed process hold the CPU in
# hundreds of slices during one wait.
HEAVY = 2.0


class _Occ:
    """The occupancy segments of a run as arrays (by CPU, then time: df_occupancy), with
    what each occupant is whoever waits (_seg_codes), its interrupt, and its antagonist
    `who` (rank()): the rank of (pid, irq) among the run's (pid_of[who], irq_of[who])."""

    def __init__(self, run):
        i64 = np.int64
        seg = df_occupancy(run)
        self.cpu = seg["cpu"].to_numpy(i64)
        self.S, self.E = seg["t_from_ns"].to_numpy(i64), seg["t_to_ns"].to_numpy(i64)
        self.tid, self.pid = seg["tid"].to_numpy(i64), seg["pid"].to_numpy(i64)
        flags = seg["flags"].to_numpy(i64)
        self.base, self.peer = _seg_codes(self.tid, self.pid, flags, traced_pids(run))
        self.irq = np.where(self.tid == 0, irq_code(flags), 0)

    def rank(self) -> None:
        """Name the antagonists (the merged rows' unit): who, pid_of, irq_of, uniform."""
        keys, self.who = np.unique((self.pid << 32) | self.irq, return_inverse=True)
        self.pid_of, self.irq_of = keys >> 32, keys & 0xffffffff
        # antagonists whose segments all have one base class (heavy ones must: _heavy)
        kinds = np.bincount(np.unique(self.who * 8 + self.base + 1) // 8, minlength=len(keys))
        self.uniform = kinds == 1

    def cpu_slice(self, cpu: int) -> slice:
        return slice(int(np.searchsorted(self.cpu, cpu, "left")),
                     int(np.searchsorted(self.cpu, cpu, "right")))


class _Waits:
    """The runnable intervals (run.runq) as arrays: a, b (its bounds), tid, pid, cpu (and
    tid32, pid32 to gather rows' columns from). A wait's throttled start (throttled_ns: its
    CPU quota held it back, whatever held the CPU) is not part of it: a starts after it."""

    def __init__(self, rq):
        i64 = np.int64
        self.a, self.b = rq["t_runnable_ns"].to_numpy(i64), rq["t_run_ns"].to_numpy(i64)
        if "throttled_ns" in rq:
            self.a = self.a + np.minimum(rq["throttled_ns"].to_numpy(i64), self.b - self.a)
        self.tid, self.pid, self.cpu = (rq[c].to_numpy(i64) for c in ("tid", "pid", "cpu"))
        self.tid32, self.pid32 = (rq[c].to_numpy(np.int32) for c in ("tid", "pid"))


def _overlaps(w: _Waits, S: np.ndarray, cpu_slice) -> tuple[np.ndarray, np.ndarray]:
    """Per runnable interval: the index in S (segment starts, by CPU then time) of the first
    segment of its CPU that may overlap it, and how many segments from there start before
    its end (cpu_slice(cpu): the CPU's segments)."""
    i64 = np.int64
    first, n = np.zeros(len(w.a), i64), np.zeros(len(w.a), i64)
    for cpu in np.unique(w.cpu):
        ri = np.flatnonzero(w.cpu == cpu)
        sl = cpu_slice(cpu)
        Sc, a, b = S[sl], w.a[ri], w.b[ri]
        by_a = argsort_unless_sorted(a)                         # both searches in order
        lo = search_in_order(Sc, a, "right", by_a) - 1          # segment holding t_runnable
        hi = search_in_order(Sc, b, "left", by_a)               # first segment from t_run on
        f = np.maximum(lo, 0)
        first[ri], n[ri] = sl.start + f, np.maximum(hi - f, 0)
    return first, n


def _expand(sel, first, n, a, b, S, E):
    """The (interval, segment) pairs of intervals sel, clipped: idx, s, e, k (segment)."""
    ns = n[sel]
    rep = np.repeat(sel, ns)
    k = np.arange(ns.sum()) + np.repeat(first[sel] - (np.cumsum(ns) - ns), ns)
    s = np.maximum(S[k], a[rep])
    e = np.minimum(E[k], b[rep])
    ok = e > s
    if ok.all():
        return rep, s, e, k
    return rep[ok], s[ok], e[ok], k[ok]


def _pair_cls(o: _Occ, w: _Waits, idx, k) -> np.ndarray:
    """The class (CODE) of segment k's occupant for wait idx."""
    return _task_codes(o.base[k], o.peer[k], w.tid[idx], w.pid[idx], o.tid[k], o.pid[k])


def _rows(run) -> dict:
    """df_runnable_occupants' columns as numpy arrays (cls as CODE). Beyond ROW_BUDGET
    pairs, each wait's parts are merged by (class, process, interrupt) (_merged_rows)."""
    rq = run.runq
    i64 = np.int64
    if not has_occupancy(run) or not len(rq):
        return {c: np.zeros(0, np.int8 if c == "cls" else i64) for c in ROW_COLS}
    o, w = _Occ(run), _Waits(rq)
    cpus = _cpu_waits(o, w)
    total = int(sum(npairs.sum() for _, _, npairs in cpus))
    if total > ROW_BUDGET:
        run.warnings.append(
            f"cpu occupancy: {total:,} (wait, switch) pairs: each wait's parts are merged by "
            "antagonist (process and class), named by the first of its threads, and laid "
            "back to back inside the wait; totals per wait stay exact")
        return _merged_rows(o, w, cpus)
    del cpus
    first, n = _overlaps(w, o.S, o.cpu_slice)
    idx, s, e, k = _expand(np.arange(len(rq)), first, n, w.a, w.b, o.S, o.E)
    tid, pid, irq, cls = o.tid[k], o.pid[k], o.irq[k], _pair_cls(o, w, idx, k)
    # what no segment covers: the rest of each interval, unknown
    covered = np.bincount(idx, weights=(e - s).astype(np.float64), minlength=len(rq))
    dur = (w.b - w.a).astype(np.float64)
    gap = np.flatnonzero(dur - covered > 0.5)
    if len(gap):  # one row per interval with a gap (its place in time is approximate)
        idx = np.concatenate([idx, gap])
        s = np.concatenate([s, w.a[gap]])
        e = np.concatenate([e, w.a[gap] + (dur[gap] - covered[gap]).astype(i64)])
        tid = np.concatenate([tid, np.full(len(gap), -1)])
        pid = np.concatenate([pid, np.full(len(gap), -1)])
        cls = np.concatenate([cls, np.full(len(gap), CODE["unknown"], np.int8)])
        irq = np.concatenate([irq, np.zeros(len(gap), i64)])
    return _row_columns(w, np.lexsort((s, w.tid[idx])), idx, s, e, tid, pid, cls, irq)


def _row_columns(w: _Waits, r, idx, s, e, tid, pid, cls, irq) -> dict:
    """ROW_COLS from the rows' columns, taken in order r (by victim, then time)."""
    i32 = np.int32                   # narrow columns: ids fit in 32 bits (pid_max 2^22)
    idx = idx[r]
    return {"runq_idx": idx.astype(i32), "victim_tid": w.tid[idx].astype(i32),
            "victim_pid": w.pid[idx].astype(i32), "cpu": w.cpu[idx].astype(np.int16),
            "t_from_ns": s[r], "t_to_ns": e[r], "tid": tid[r].astype(i32),
            "pid": pid[r].astype(i32), "cls": cls[r], "irq": irq[r].astype(np.uint32),
            "ns": (e - s)[r]}


def _cpu_waits(o: _Occ, w: _Waits) -> list[tuple[np.ndarray, slice, np.ndarray]]:
    """Per CPU with segments: (its waits by start, its segments' slice of o, each segment's
    count of (wait, segment) pairs: the waits with a < E, less those with b <= S, a subset
    as a < b; their sum is the pairs _overlaps counts from the waits' side)."""
    out = []
    for cpu in np.unique(w.cpu):
        sl = o.cpu_slice(cpu)
        if sl.stop == sl.start:
            continue
        ri = np.flatnonzero(w.cpu == cpu)
        ri = ri[np.argsort(w.a[ri], kind="stable")]  # by start: searches in order
        npairs = (np.searchsorted(w.a[ri], o.E[sl], "left")
                  - np.searchsorted(np.sort(w.b[ri]), o.S[sl], "right"))
        out.append((ri, sl, npairs))
    return out


def _merged_rows(o: _Occ, w: _Waits, cpus) -> dict:
    """ROW_COLS with one row per (wait, class, antagonist), named by its first thread in
    time (_merged_parts), and one of class unknown for the rest of the wait no record
    covers. A wait's rows are laid back to back from its start, by class then (pid, irq),
    the unknown rest last: Σ per wait exact, their order and place inside the wait lost."""
    o.rank()
    by_thread = thread_time_order(w.tid, w.a)
    by_thread = np.arange(len(w.a)) if by_thread is None else by_thread
    p = _merged_parts(o, w, by_thread, cpus)
    # rows by victim, then wait (a thread's waits are disjoint), then class and who (the
    # rest last: its who sorts after every antagonist's)
    rank = np.empty(len(w.a), np.int64)
    rank[by_thread] = np.arange(len(w.a))
    del by_thread
    key = rank[p["idx"]]
    del rank
    key <<= 3
    key |= p["cls"]
    key <<= 30
    key |= p["who"]
    order = np.argsort(key)
    del key
    idx, d, who = p["idx"][order], p["ns"][order], p["who"][order]
    start_of = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]]) if len(idx) else idx
    s = np.cumsum(d)
    s -= d                           # time before each row in the run of rows ...
    s -= np.repeat(s[start_of], np.diff(np.r_[start_of, len(idx)]))  # ... of its wait
    s += w.a[idx]
    return {"runq_idx": idx, "victim_tid": w.tid32[idx], "victim_pid": w.pid32[idx],
            "cpu": w.cpu[idx].astype(np.int16), "t_from_ns": s, "t_to_ns": s + d,
            "tid": p["tid"][order], "pid": np.r_[o.pid_of, -1].astype(np.int32)[who],
            "cls": p["cls"][order], "irq": np.r_[o.irq_of, 0].astype(np.uint32)[who],
            "ns": d}


# the merged parts' columns and their types (narrow: a row per (wait, antagonist))
_PART_COLS = {"idx": np.int32, "cls": np.int8, "who": np.int32, "tid": np.int32,
              "ns": np.int64}


def _merged_parts(o: _Occ, w: _Waits, by_thread, cpus) -> dict:
    """Each wait's time per antagonist: one part per (wait, class, who) with ns > 0, named
    (tid) by the first of its segments in time; then, for each wait not covered to the ns,
    a part of class unknown, who len(pid_of), tid -1, for the rest. Per CPU, an antagonist
    with many pairs is summed by _heavy_parts, the others pair by pair (_light_parts).
    by_thread: the waits by (tid, a); cpus: _cpu_waits."""
    out = {c: [] for c in _PART_COLS}
    covered = np.zeros(len(w.a), np.float64)

    def add(part):
        nonlocal covered
        covered += np.bincount(part["idx"], weights=part["ns"], minlength=len(w.a))
        for c, t in _PART_COLS.items():
            out[c].append(part[c].astype(t, copy=False))

    for ri, sl, npairs in cpus:
        cpu = w.cpu[ri[0]]
        heavy = _heavy(o, ri, sl, npairs)
        in_heavy = np.isin(o.who[sl], heavy)
        for part in _light_parts(o, w, ri, sl.start + np.flatnonzero(~in_heavy)):
            add(part)
        own = _own_pairs(o, w, by_thread[w.cpu[by_thread] == cpu],
                         sl.start + np.flatnonzero(in_heavy & (o.base[sl] < 0)))
        for g in heavy:
            for part in _heavy_parts(o, w, ri, sl.start + np.flatnonzero(o.who[sl] == g), own):
                add(part)
    dur = (w.b - w.a).astype(np.float64)
    gap = np.flatnonzero(dur - covered > 0.5)
    add({"idx": gap, "cls": np.full(len(gap), CODE["unknown"]),
         "who": np.full(len(gap), len(o.pid_of)), "tid": np.full(len(gap), -1),
         "ns": (dur[gap] - covered[gap]).astype(np.int64)})
    return {c: np.concatenate(v) for c, v in out.items()}


def _heavy(o: _Occ, ri, sl, npairs) -> np.ndarray:
    """The antagonists (who) of one CPU's segments sl summed by prefix sums for its waits
    ri: more (wait, segment) pairs (npairs: _cpu_waits) than HEAVY × the waits, all
    segments of one base class (a heavy part takes its class from one)."""
    pairs = np.bincount(o.who[sl], weights=npairs, minlength=len(o.uniform))
    return np.flatnonzero((pairs > HEAVY * len(ri)) & o.uniform)


def _reduce_pairs(o: _Occ, idx, pos, s, e, k, cls) -> dict:
    """Pairs (by wait position pos, then time) -> parts: one per (wait, class, who), named
    by its first pair in time."""
    who = o.who[k]
    packed = ((pos - pos[0]) << 34) | (cls.astype(np.int64) << 30) | who
    key = np.argsort(packed, kind="stable")
    packed = packed[key]
    at = np.flatnonzero(np.r_[True, packed[1:] != packed[:-1]])
    f = key[at]
    return {"idx": idx[f], "cls": cls[f], "who": who[f], "tid": o.tid[k[f]],
            "ns": np.add.reduceat((e - s)[key], at)}


def _light_parts(o: _Occ, w: _Waits, ri, light):
    """The parts of waits ri (one CPU's, by start) with the segments `light` (that CPU's,
    in time order), pair by pair, in chunks of about _CHUNK pairs (a generator)."""
    if not len(light):
        return
    S, E = o.S[light], o.E[light]
    a, b = w.a[ri], w.b[ri]
    f = np.maximum(np.searchsorted(S, a, "right") - 1, 0)
    n = np.maximum(np.searchsorted(S, b, "left") - f, 0)
    cum = np.cumsum(n)
    if not len(cum) or not cum[-1]:
        return
    cuts = np.searchsorted(cum, np.arange(_CHUNK, cum[-1] + _CHUNK, _CHUNK), "left") + 1
    lo = 0
    for hi in np.unique(np.minimum(np.r_[cuts, len(ri)], len(ri))):
        if hi <= lo:
            continue
        pos, s, e, k = _expand(np.arange(lo, hi), f, n, a, b, S, E)
        lo = hi
        if len(pos):
            idx, k = ri[pos], light[k]
            yield _reduce_pairs(o, idx, pos, s, e, k, _pair_cls(o, w, idx, k))


def _own_pairs(o: _Occ, w: _Waits, ri, cand) -> dict:
    """The (wait, segment) pairs where a heavy task segment (cand, one CPU's) is the waiting
    thread itself, whose class is not its siblings': idx, s, e, k, by wait then time; ri:
    the CPU's waits by (tid, a).
    A runnable thread holds no CPU: these are clock-edge slivers, if any. Searched on the
    decomposition's thread axis (decompose.Axis: one key per (thread, time))."""
    i64 = np.int64
    cand = cand[np.lexsort((o.S[cand], o.tid[cand]))]        # by thread, then time
    idx, s, e, k = (np.zeros(0, i64),) * 4
    if len(cand):
        ax = Axis(o.tid[cand], int(o.S[cand].min()), int(o.E[cand].max()))
        gs, _ = ax.index(o.tid[cand])
        gw, mine = ax.index(w.tid[ri])
        wi, gw = ri[mine], gw[mine]
        a, b = w.a[wi], w.b[wi]
        f = np.searchsorted(ax.key(gs, o.E[cand]), ax.key(gw, a), "right")  # ends after a
        n = np.searchsorted(ax.key(gs, o.S[cand]), ax.key(gw, b), "left") - f
        some = np.flatnonzero(n > 0)                            # almost always none
        pos, s, e, k = _expand(np.arange(len(some)), f[some], n[some], a[some], b[some],
                               o.S[cand], o.E[cand])
        idx, k = wi[some[pos]], cand[k]
        same = o.pid[k] == w.pid[idx]
        idx, s, e, k = idx[same], s[same], e[same], k[same]
    r = np.lexsort((s, idx))
    return {"idx": idx[r], "s": s[r], "e": e[r], "k": k[r]}


def _heavy_parts(o: _Occ, w: _Waits, ri, segs, own: dict) -> list[dict]:
    """The parts of waits ri (by start) with one heavy antagonist, its segments segs (one
    CPU's, in time order): its time inside [a, b] from prefix sums of its segments'
    lengths, named by its first segment in time; the waiting thread's own segments (own)
    apart."""
    S, E = o.S[segs], o.E[segs]
    L = np.r_[0, np.cumsum(E - S)]
    i = np.searchsorted(E, w.a[ri], "right")     # first segment ending after a
    j = np.searchsorted(S, w.b[ri], "left")      # first segment starting at b or later
    has = j > i
    idx, i, j = ri[has], i[has], j[has]
    a, b = w.a[idx], w.b[idx]
    ns = L[j] - L[i] - np.maximum(a - S[i], 0) - np.maximum(E[j - 1] - b, 0)
    out = []
    mine = np.isin(own["k"], segs)
    if mine.any():
        oi, os_, oe, ok = (own[c][mine] for c in ("idx", "s", "e", "k"))
        at = np.argsort(idx, kind="stable")
        np.subtract.at(ns, at[np.searchsorted(idx[at], oi)], oe - os_)
        out.append(_reduce_pairs(o, oi, oi, os_, oe, ok, _pair_cls(o, w, oi, ok)))
        # the part's name: its first segment that is not the waiting thread's
        bad = (o.tid[segs[i]] == w.tid[idx]) & (o.pid[segs[i]] == w.pid[idx])
        while bad.any():
            i[bad] += 1
            bad &= i < j
            bi = np.flatnonzero(bad)
            k = segs[i[bi]]
            bad[bi] = (o.tid[k] == w.tid[idx[bi]]) & (o.pid[k] == w.pid[idx[bi]])
        keep = ns > 0
        idx, i, ns = idx[keep], i[keep], ns[keep]
    k = segs[i]
    out.append({"idx": idx, "cls": _pair_cls(o, w, idx, k), "who": o.who[k],
                "tid": o.tid[k], "ns": ns})
    return out


def _window_index(r: dict) -> dict:
    """The occupant rows' per-thread blocks (rows lie sorted by victim thread, then time):
    tids, start, end, and the combined search keys (thread rank · span + time since base)
    of their starts and ends, when they fit in 63 bits (span 0: they do not)."""
    vt, rs, re_ = r["victim_tid"], r["t_from_ns"], r["t_to_ns"]
    brk = np.flatnonzero(vt[1:] != vt[:-1]) + 1
    start = np.r_[0, brk].astype(np.int64)
    tids = vt[start].astype(np.int64)
    end = np.append(start[1:], len(vt))
    base = int(rs.min())
    span = int(re_.max()) - base + 2
    if (len(tids) + 1) * span >= 1 << 62:
        return {"tids": tids, "start": start, "end": end, "base": base, "span": 0}
    rank = np.repeat(np.arange(len(tids), dtype=np.int64) * span, end - start)
    return {"tids": tids, "start": start, "end": end, "base": base, "span": span,
            "key_end": rank + (re_ - base), "key_start": rank + (rs - base)}


def antagonists_in_windows(run, tid, w_start, w_end) -> pd.DataFrame:
    """Occupant time inside windows: for window i of thread tid[i], the part of each
    occupant row of that thread inside [w_start[i], w_end[i]].

    Columns: win (index of the window), tid, pid, cls, irq, ns; one row per (window, occupant
    row) with ns > 0. Windows may overlap each other."""
    _, r = _rows_cached(run)
    cols = ["win", "tid", "pid", "cls", "irq", "ns"]
    tid = np.asarray(tid, dtype=np.int64)
    ws, we = np.asarray(w_start, dtype=np.int64), np.asarray(w_end, dtype=np.int64)
    if not len(r["ns"]) or not len(tid):
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in cols})
    rs, re_ = r["t_from_ns"], r["t_to_ns"]
    ix = per_run(run, "_antagonist_index", (id(r["ns"]),), lambda: _window_index(r))
    tids, start, end = ix["tids"], ix["start"], ix["end"]
    g = np.minimum(np.searchsorted(tids, tid), len(tids) - 1)
    known = tids[g] == tid
    if ix["span"]:
        # within the thread's block: rows ending after w_start, starting before w_end,
        # found with one search over the combined key (thread rank · span + time);
        # windows clipped to the rows' time range select the same rows
        base, span = ix["base"], ix["span"]
        wrank = g.astype(np.int64) * span
        q = wrank + (np.clip(ws, base, None) - base)
        by_key = argsort_unless_sorted(q)     # both searches in (thread, start) order
        first = search_in_order(ix["key_end"], q, "right", by_key)
        last = search_in_order(ix["key_start"], wrank + (np.clip(we, None, base + span - 1)
                                                          - base), "left", by_key)
    else:
        first = np.zeros(len(tid), np.int64)
        last = np.zeros(len(tid), np.int64)
        for gi in np.unique(g[known]):
            m = known & (g == gi)
            blk = slice(start[gi], end[gi])
            first[m] = start[gi] + np.searchsorted(re_[blk], ws[m], side="right")
            last[m] = start[gi] + np.searchsorted(rs[blk], we[m], side="left")
    first = np.clip(first, start[g], end[g])
    last = np.clip(last, start[g], end[g])
    n = np.where(known, np.maximum(last - first, 0), 0)
    win = np.repeat(np.arange(len(tid)), n)
    k = first[win] + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    ns = np.minimum(re_[k], we[win]) - np.maximum(rs[k], ws[win])
    ok = ns > 0
    k = k[ok]
    return pd.DataFrame({"win": win[ok], "tid": r["tid"][k], "pid": r["pid"][k],
                         "cls": pd.Categorical.from_codes(r["cls"][k], categories=CLASSES),
                         "irq": r["irq"][k], "ns": ns[ok]}, copy=False)


# ---- names ------------------------------------------------------------------

def occupant_names(run) -> dict[int, str]:
    """tid -> comm of every task seen holding a CPU (occupants.bin), traced threads too."""
    names = {}
    for df in (run.occupants, run.tasks):
        if len(df):
            names.update(zip(df["tid"].astype(int), df["comm"].astype(str)))
    names[0] = "idle"
    return names


def cgroup_path(run, cgroup_id: int) -> str | None:
    """meta.json cgroups: the path of a cgroup v2 id; None when unknown or gone."""
    cg = (run.meta or {}).get("cgroups") or {}
    p = cg.get(str(int(cgroup_id)))
    return p if isinstance(p, str) else None


def process_table(run) -> pd.DataFrame:
    """One row per process seen holding a CPU: pid, comm (its main thread's, else a
    thread's), cgroup (path, or "cgroup N (gone)"), container (its label,
    explain/containers.py, or "" outside any container), kernel (bool)."""
    occ = run.occupants
    cols = ["pid", "comm", "cgroup", "container", "kernel"]
    if not len(occ):
        return pd.DataFrame({c: [] for c in cols})
    # a traced process's name as tasks.bin last saw its main thread: occupants.bin keeps
    # the first one, which for a command tailtrace started is "tailtrace" (before its exec)
    traced = dict(zip(run.tasks["tid"].astype(int), run.tasks["comm"].astype(str))) \
        if len(run.tasks) else {}
    rows = []
    for pid, g in occ.groupby("pid", sort=True):
        main = g[g["tid"] == pid]
        one = main.iloc[0] if len(main) else g.iloc[0]
        cid = int(one["cgroup_id"])
        path = cgroup_path(run, cid)
        comm = (traced.get(int(pid)) or also_comm(run, int(pid))
                or str(one["comm"]))   # --also-pid's name when its main thread never ran
        container = container_of(path)
        rows.append({"pid": int(pid), "comm": comm if pid else "idle",
                     "cgroup": path if path is not None else
                     (f"cgroup {cid} (gone)" if cid else ""),
                     "container": container.label() if container else "",
                     "kernel": bool(int(one["flags"]) & OCC_KTHREAD)})
    return pd.DataFrame(rows, columns=cols)


# ---- summaries --------------------------------------------------------------

def summarize(part: pd.DataFrame, run, victim_pids=(), top: int = 8) -> list[dict]:
    """Rows (tid, pid, cls, irq, ns) -> the antagonists by process and class, largest
    first: [{pid, comm, cgroup, container, class, threads, ms, share}] (container: its label,
    or None outside any), share of the rows' total; the
    victims' own process is named with its thread count (siblings), an interrupt by its
    kind and number ('softirq NET_RX', pid None). The rest beyond `top` is folded into one
    row of class "rest"."""
    if not len(part):
        return []
    total = float(part["ns"].sum())
    if "irq" not in part:
        part = part.assign(irq=0)
    g = part.groupby(["cls", "pid", "irq"], observed=True).agg(ns=("ns", "sum"),
                                                               threads=("tid", "nunique"))
    g = g.reset_index().sort_values("ns", ascending=False, kind="stable")
    procs = process_table(run).set_index("pid") if len(run.occupants) else None
    out = []
    for _, r in g.head(top).iterrows():
        pid, cls = int(r["pid"]), str(r["cls"])
        comm, cgroup, container = "", "", ""
        if procs is not None and pid in procs.index:
            comm, cgroup = str(procs.at[pid, "comm"]), str(procs.at[pid, "cgroup"])
            container = str(procs.at[pid, "container"])
        if cls == "idle":
            comm = "idle"
        elif cls == "unknown":
            comm = "unknown"
        elif cls == "irq":
            comm = irq_label(run, int(r["irq"]))
        out.append({"pid": pid if cls not in ("idle", "unknown", "irq") else None, "comm": comm,
                    "cgroup": cgroup or None, "container": container or None, "class": cls,
                    "threads": int(r["threads"]),
                    "ms": float(r["ns"]) / 1e6, "share": float(r["ns"]) / total})
    rest = g.iloc[top:]
    if len(rest):
        out.append({"pid": None, "comm": f"{len(rest)} more", "cgroup": None,
                    "container": None, "class": "rest",
                    "threads": int(rest["threads"].sum()), "ms": float(rest["ns"].sum()) / 1e6,
                    "share": float(rest["ns"].sum()) / total})
    return out


def class_processes(part: pd.DataFrame) -> dict[str, int]:
    """{class: how many distinct processes (pids) of it held the CPU in the rows} over
    CLASSES: what 'N processes' counts, whatever `top` summarize kept."""
    if not len(part):
        return {c: 0 for c in CLASSES}
    n = part[part["pid"] > 0].groupby("cls", observed=True)["pid"].nunique()
    return {c: int(n.get(c, 0)) for c in CLASSES}


def occupant_summary(part: pd.DataFrame, run, runnable_ms: float, top: int = 8) -> dict:
    """What held the CPU in the rows (tid, pid, cls, irq, ns): {runnable_ms, by_class (each
    class's share), processes (each class's count), top (summarize), containers
    (by_container)}: the form summary.json's antagonists take, and the sentences
    (render/words.py) read."""
    return {"runnable_ms": runnable_ms, "by_class": class_shares(part),
            "processes": class_processes(part), "top": summarize(part, run, top=top),
            "containers": by_container(part, run, top=top)}


def by_container(part: pd.DataFrame, run, top: int = 8) -> list[dict]:
    """The rows' time grouped by the container its processes run in, largest first:
    [{container (label), processes, ms, share}] (share of the rows' total), at most `top`;
    [] when no process of the rows runs in a container (explain/containers.py)."""
    if not len(part) or not len(run.occupants):
        return []
    procs = process_table(run)
    label = dict(zip(procs["pid"].to_numpy(), procs["container"].to_numpy()))
    tasks = part[part["pid"].to_numpy() > 0]
    where = tasks["pid"].map(label).fillna("")
    inside = tasks[where.to_numpy() != ""].assign(container=where[where != ""])
    if not len(inside):
        return []
    total = float(part["ns"].sum())
    g = inside.groupby("container").agg(ns=("ns", "sum"), processes=("pid", "nunique"))
    g = g.sort_values("ns", ascending=False, kind="stable").head(top)
    return [{"container": str(c), "processes": int(r["processes"]), "ms": float(r["ns"]) / 1e6,
             "share": float(r["ns"]) / total} for c, r in g.iterrows()]


def class_shares(part: pd.DataFrame) -> dict[str, float]:
    """{class: share of the rows' time} over CLASSES (0 for absent ones)."""
    total = float(part["ns"].sum()) if len(part) else 0.0
    if not total:
        return {c: 0.0 for c in CLASSES}
    s = part.groupby("cls", observed=True)["ns"].sum()
    return {c: float(s.get(c, 0)) / total for c in CLASSES}


def df_request_antagonists(run, decomp: pd.DataFrame) -> pd.DataFrame:
    """Occupant time inside each request's window on its own thread: rows of
    antagonists_in_windows with win = the decomposition's row."""
    if not has_occupancy(run) or not len(decomp):
        return pd.DataFrame({c: np.zeros(0, np.int64)
                             for c in ["win", "tid", "pid", "cls", "irq", "ns"]})
    return antagonists_in_windows(run, decomp["tid"].to_numpy(), decomp["t_start_ns"].to_numpy(),
                                  decomp["t_end_ns"].to_numpy())


def band_antagonists(run, decomp: pd.DataFrame, bands_of_rows: pd.Series,
                     top: int = 8) -> dict | None:
    """summary.json `antagonists`: {band: occupant_summary} for the requests' own runnable
    time (runnable_ms: the mean per request); None without the cpu event."""
    if not has_occupancy(run):
        return None
    per = df_request_antagonists(run, decomp)
    out = {}
    for band in pd.unique(bands_of_rows.dropna()):
        rows = np.flatnonzero((bands_of_rows == band).to_numpy())
        part = per[np.isin(per["win"].to_numpy(), rows)]
        n = max(len(rows), 1)
        out[str(band)] = occupant_summary(part, run, float(part["ns"].sum()) / 1e6 / n, top)
    return out


def thread_antagonists(run) -> pd.DataFrame:
    """Per traced thread: its whole runnable time split by class, and its main antagonist.

    Columns: tid, runnable_ms, <class>_share for each class, top_antagonist (name), top_share."""
    _, r = _rows_cached(run)
    cols = ["tid", "runnable_ms"] + [f"{c}_share" for c in CLASSES] + ["top_antagonist",
                                                                       "top_share"]
    vt, ns = r["victim_tid"], r["ns"]
    if not len(ns):
        return pd.DataFrame({c: [] for c in cols})
    # rows lie by victim thread: one block each
    start = np.flatnonzero(np.r_[True, vt[1:] != vt[:-1]])
    g = np.repeat(np.arange(len(start)), np.diff(np.r_[start, len(vt)]))
    tot = np.add.reduceat(ns, start)
    ncls = len(CLASSES)
    by = np.bincount(g * ncls + r["cls"], weights=ns, minlength=len(start) * ncls)
    out = pd.DataFrame({"tid": vt[start].astype(np.int64), "runnable_ms": tot / 1e6})
    for i, c in enumerate(CLASSES):
        out[f"{c}_share"] = by[i::ncls] / np.maximum(tot, 1)
    # the process that held the CPU longest while each thread waited (ties: lowest pid)
    task = r["pid"] > 0
    keys, inv = np.unique((g[task].astype(np.int64) << 32) | r["pid"][task], return_inverse=True)
    held = np.bincount(inv, weights=ns[task])
    kg = keys >> 32
    o = np.lexsort((-held, kg))
    first = o[np.r_[True, kg[o][1:] != kg[o][:-1]]] if len(o) else o
    names = dict(zip(*(process_table(run)[c].to_numpy() for c in ("pid", "comm"))))
    top_name, top_share = np.full(len(start), "", dtype=object), np.zeros(len(start))
    for k, h in zip(first, held[first]):
        pid = int(keys[k] & 0xffffffff)
        top_name[kg[k]] = f"{names.get(pid, '?')} (pid {pid})"
        top_share[kg[k]] = float(h) / max(tot[kg[k]], 1)
    out["top_antagonist"], out["top_share"] = top_name, top_share
    return out[cols]
