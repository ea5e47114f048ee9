"""Why a thread was blocked, and who ended the wait: one row per blocked interval.

Every voluntary switch-out in switches.bin carries the syscall the thread slept
in and its first argument (probes/sched/sched.bpf.c reads them from the thread's
user registers, as /proc/PID/syscall does), and the wakeup that ended the
interval is in runq.bin with the waker taken at sched_waking (the same object).
The two records of one wakeup share their switch-in timestamp (one clock per
sched_switch: t_run_ns == t_on_ns), so they join exactly on (tid, time).

Reasons (REASONS), from the syscall:
  lock   futex() / futex_waitv(): a mutex, condition variable or other futex wait
         (kind "mutex" when the futex op is FUTEX_WAIT, as glibc's lock slow path;
         "condvar" for FUTEX_WAIT_BITSET, as pthread_cond_*wait and sem_*wait)
  io     read/recv/poll/epoll/select/accept/connect/write/send...: socket, pipe, file
  sleep  nanosleep, clock_nanosleep, pause
  other  any other syscall (mmap/mprotect/munmap: "address-space lock", the kernel's
         mmap_lock), or not blocked in a syscall (page fault), or unknown
The syscall numbers are x86_64's (meta.json evidence.arch; the probes read
registers on x86 only).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..load.frames import frame_function, unnamed_at
from ..load.load import RUNQ_KINDS, per_run
from .known_locks import known_lock, word_name
from .order import Lookup, argsort_unless_sorted, row_index, switch_order, unique_of

REASONS = ["lock", "io", "sleep", "other"]

# x86_64 syscall numbers of the calls a thread commonly blocks in.
SYSCALLS = {0: "read", 1: "write", 7: "poll", 9: "mmap", 10: "mprotect", 11: "munmap",
            17: "pread64", 18: "pwrite64", 19: "readv",
            20: "writev", 23: "select", 34: "pause", 35: "nanosleep", 40: "sendfile",
            42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
            47: "recvmsg", 61: "wait4", 74: "fsync", 202: "futex", 230: "clock_nanosleep",
            232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait",
            288: "accept4", 295: "preadv", 299: "recvmmsg", 307: "sendmmsg", 441: "epoll_pwait2",
            449: "futex_waitv"}
_LOCK = {"futex", "futex_waitv"}
_SLEEP = {"nanosleep", "clock_nanosleep", "pause"}
# mmap/mprotect/munmap block on the process's address-space lock (mmap_lock), which
# threads growing malloc arenas contend for: a kernel lock, not I/O and not a futex
_VM = {"mmap", "mprotect", "munmap"}
_IO = {n for n in SYSCALLS.values()} - _LOCK - _SLEEP - _VM - {"wait4", "waitid"}
_FD_ARG0 = {"read", "write", "pread64", "pwrite64", "readv", "writev", "connect", "accept",
            "accept4", "sendto", "recvfrom", "sendmsg", "recvmsg", "recvmmsg", "sendmmsg",
            "preadv", "fsync", "sendfile"}
_EPOLL = {"epoll_wait", "epoll_pwait", "epoll_pwait2"}
FUTEX_CMD_MASK = 0x7F   # without FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256)
FUTEX_WAIT, FUTEX_WAIT_BITSET = 0, 9

WAIT_COLS = ["tid", "pid", "t_off_ns", "t_wake_ns", "t_on_ns", "syscall", "call", "reason",
             "wait_addr", "wait_aux", "ustack_id", "waker_tid", "waker_pid", "waker_ctx"]
# what wait_core keeps of them; the rest are the switch record's fields, read through
# sw_row (the wait's row in run.switches) by switch_fields
CORE_COLS = ["tid", "t_off_ns", "t_wake_ns", "call", "reason", "waker_tid", "waker_pid",
             "waker_ctx", "sw_row"]
SWITCH_FIELDS = ["pid", "t_on_ns", "syscall", "wait_addr", "wait_aux", "ustack_id"]


def _reason_table() -> np.ndarray:
    """reason index (into REASONS) of each syscall number 0..511."""
    t = np.full(512, REASONS.index("other"), dtype=np.int8)
    for nr, name in SYSCALLS.items():
        t[nr] = REASONS.index("lock" if name in _LOCK else "sleep" if name in _SLEEP
                              else "io" if name in _IO else "other")
    return t


_REASON_OF = _reason_table()


def reason_codes(syscall: np.ndarray) -> np.ndarray:
    """Index into REASONS of each syscall number (-1 / unknown numbers: "other")."""
    nr = np.asarray(syscall, dtype=np.int64)
    ok = (nr >= 0) & (nr < len(_REASON_OF))
    return np.where(ok, _REASON_OF[np.clip(nr, 0, len(_REASON_OF) - 1)],
                    REASONS.index("other")).astype(np.int8)


def has_reasons(run) -> bool:
    """Do the switches carry wait reasons (any blocked switch-out with a syscall)?"""
    sw = run.switches
    return "syscall" in sw and bool(len(sw)) and bool((sw["syscall"].to_numpy() >= 0).any())


def df_waits(run) -> pd.DataFrame:
    """One row per blocked (voluntary) off-CPU interval of switches.bin, columns WAIT_COLS.

    t_wake_ns is the wakeup that ended it (runq.bin, joined on tid and switch-in time);
    [t_off_ns, t_wake_ns] is the blocked part, [t_wake_ns, t_on_ns] the runnable part.
    Without a matching wakeup record t_wake_ns = t_on_ns and the waker is unknown
    (waker_tid 0, waker_ctx "unknown"). call is the syscall's name ("syscall N" when not
    in SYSCALLS, "" when not in a syscall, a Categorical); reason one of REASONS. Ids are
    int32 as in the streams, times int64. Rows by (tid, t_off_ns). Built from wait_core
    (cached) and the switch records (not cached)."""
    w = wait_core(run)
    cols = {c: w[c] for c in CORE_COLS if c != "sw_row"}
    cols.update(switch_fields(run, w, None, SWITCH_FIELDS))
    return pd.DataFrame({c: cols[c] for c in WAIT_COLS}, copy=False)


def wait_core(run) -> pd.DataFrame:
    """df_waits' rows with the columns CORE_COLS: what the critical path reads of every
    wait; the switch record's own fields (SWITCH_FIELDS) stay in run.switches, at sw_row
    (switch_fields). Cached on the run while its switches and runq frames are the same
    objects (at 10M switches, 7.5M waits: 0.25 GB, where the whole of WAIT_COLS is 0.5)."""
    key = (id(run.switches), len(run.switches), id(run.runq), len(run.runq))
    return per_run(run, "_waits", key, lambda: _waits(run))


def switch_fields(run, w: pd.DataFrame, rows, cols) -> dict[str, np.ndarray]:
    """The switch record's fields cols (of SWITCH_FIELDS) of wait_core rows w[rows] (all
    rows when None), as arrays."""
    at = w["sw_row"].to_numpy()
    at = at if rows is None else at[rows]
    sw = run.switches
    return {c: sw[c].to_numpy()[at] for c in cols}


def _waits(run) -> pd.DataFrame:
    sw = run.switches
    vol = sw["voluntary"].to_numpy(bool)
    order = switch_order(run)                # by (tid, t_off), stable
    rows = np.flatnonzero(vol) if order is None else order[vol[order]]
    del vol, order
    rows = row_index(rows, len(sw))
    w_tid, t_off = sw["tid"].to_numpy()[rows], sw["t_off_ns"].to_numpy()[rows]
    w = {"tid": w_tid, "t_off_ns": t_off, "sw_row": rows}
    w_on = sw["t_on_ns"].to_numpy()[rows]
    # each wait's wakeup: the non-preempt runnable interval ending where it ends (same tid,
    # t_run == t_on; of several, the last), joined on one packed key by a sorted search
    rq = run.runq
    wk = np.flatnonzero(rq["kind"].cat.codes.to_numpy() != RUNQ_KINDS.index("preempt"))
    pos, found = _match(rq["tid"].to_numpy()[wk], rq["t_run_ns"].to_numpy()[wk], w_tid, w_on)
    src = wk[pos[found]]                     # the matched runq rows
    del wk, pos

    def matched(values, unmatched, dtype=np.int64):
        out = np.full(len(rows), unmatched, dtype=dtype)
        out[found] = np.asarray(values)[src]
        return out

    t_wake = matched(rq["t_runnable_ns"].to_numpy(), 0)
    t_wake[~found] = w_on[~found]            # no wakeup seen: woken as it ran
    w["t_wake_ns"] = np.clip(t_wake, t_off, w_on, out=t_wake)
    del w_on
    nr = sw["syscall"].to_numpy()[rows]
    w["call"] = _call_names(nr)
    w["reason"] = pd.Categorical.from_codes(reason_codes(nr), categories=REASONS)
    del nr
    w["waker_tid"] = matched(rq["waker_tid"].to_numpy(), 0, np.int32)
    w["waker_pid"] = matched(rq["waker_pid"].to_numpy(), 0, np.int32)
    ctx = rq["waker_ctx"].cat
    cats = list(ctx.categories)
    codes = matched(ctx.codes.to_numpy(), cats.index("unknown") if "unknown" in cats else -1,
                    np.int8)
    w["waker_ctx"] = pd.Categorical.from_codes(codes, categories=cats)
    return pd.DataFrame({c: w[c] for c in CORE_COLS}, copy=False)


def _match(r_tid, r_t, w_tid, w_t) -> tuple[np.ndarray, np.ndarray]:
    """For each (w_tid, w_t): the index of the last (r_tid, r_t) equal to it, and whether
    there is one (index 0 where not)."""
    if not len(r_tid) or not len(w_tid):
        return np.zeros(len(w_tid), np.int64), np.zeros(len(w_tid), bool)
    r_t, w_t = np.asarray(r_t, np.int64), np.asarray(w_t, np.int64)
    lo = min(int(r_t.min()), int(w_t.min()))
    span = max(int(r_t.max()), int(w_t.max())) - lo + 1
    rank = Lookup(unique_of(r_tid, w_tid))
    if len(rank.keys) * span >= 1 << 62:     # too long a run for ns: rank the times
        times, inv = np.unique(np.concatenate([r_t, w_t]), return_inverse=True)
        r_t, w_t, lo, span = inv[:len(r_t)], inv[len(r_t):], 0, len(times)
    rk = rank(r_tid)[0] * span + (r_t - lo)  # thread rank, then time
    wk = rank(w_tid)[0] * span + (w_t - lo)
    order = argsort_unless_sorted(rk, stable=True)
    keys = rk if order is None else rk[order]
    del rk
    wo = argsort_unless_sorted(wk)                        # searched in order: the cache follows
    j = np.empty(len(wk), np.int64)
    if wo is None:
        j[:] = np.searchsorted(keys, wk, side="right")
    else:
        j[wo] = np.searchsorted(keys, wk[wo], side="right")
    j -= 1                                   # the last equal one, if any
    jj = np.maximum(j, 0)
    ok = (j >= 0) & (keys[jj] == wk)
    return np.where(ok, jj if order is None else order[jj], 0), ok


def call_name(nr: int) -> str:
    """'futex', 'read', 'syscall 333'; '' when not in a syscall."""
    return "" if nr < 0 else SYSCALLS.get(nr, f"syscall {nr}")


def _call_names(nr: np.ndarray) -> pd.Categorical:
    """call_name of each syscall number, as a Categorical (one category per name)."""
    u, inv = np.unique(nr, return_inverse=True)
    names = [call_name(int(x)) for x in u]
    cats = list(dict.fromkeys(names))
    code = np.array([cats.index(n) for n in names], dtype=np.int16)
    return pd.Categorical.from_codes(code[inv.reshape(-1)], categories=cats)


# ---- naming what was waited for (report sentences) --------------------------

_LOCK_FN = re.compile(r"pthread_mutex_|__lll_lock|lll_lock|mutex_lock")
_COND_FN = re.compile(r"pthread_cond_|sem_(timed)?wait|__new_sem_wait")


_SYSTEM_LIB = ("libc.so", "ld-linux", "vdso", "libstdc++", "libpthread")


def _is_lib(frame: str) -> bool:
    return any(lib in frame for lib in _SYSTEM_LIB) or (
        "[unknown]" in frame and not unnamed_at(frame))


def _frame_name(frame: str) -> str:
    """A frame's function, or where it is when it has no name: 'mariadbd+0xefef8d' (a
    stripped program's static function)."""
    return unnamed_at(frame) or frame_function(frame)


def futex_kind(op: int, frames: list | None) -> str:
    """'mutex' or 'condvar' (or 'futex'): the stack's pthread function when it shows one,
    else the futex op (FUTEX_WAIT: glibc's lock slow path; FUTEX_WAIT_BITSET: cond/sem)."""
    for f in frames or []:
        fn = frame_function(f)
        if _COND_FN.search(fn):
            return "condvar"
        if _LOCK_FN.search(fn):
            return "mutex"
    cmd = int(op) & FUTEX_CMD_MASK
    return "mutex" if cmd == FUTEX_WAIT else "condvar" if cmd == FUTEX_WAIT_BITSET else "futex"


def caller_of(frames: list | None) -> str:
    """The first frame outside libc (the program's function that waited), or ''. (libc has
    no frame pointers: its callers are often lost; describe then names the libc function,
    e.g. __lll_lock_wait_private, glibc's internal locks such as malloc's arenas.)"""
    for f in frames or []:
        if not _is_lib(f):
            return _frame_name(f)
    return ""


def wait_object(call: str, addr: int, aux: int) -> str:
    """What the thread waited on, for a sentence: '0x7f12...', 'fd 5', 'epoll fd 4', '1 fd'."""
    if call in _LOCK:
        return f"0x{int(addr):x}"
    if call in ("poll", "ppoll"):
        return f"{int(aux)} fd{'' if int(aux) == 1 else 's'}"
    if call in _EPOLL:
        return f"epoll fd {int(addr)}"
    if call in _FD_ARG0:
        return f"fd {int(addr)}"
    return ""


MAX_WRAPPERS = 4   # wrapper frames looked through above a wait


def program_frames(frames: list | None) -> list[str]:
    """The function names of a user stack's frames outside libc, innermost first (an
    unnamed one as its file and offset)."""
    return [_frame_name(f) for f in frames or [] if not _is_lib(f)]


def wait_wrappers(run) -> frozenset:
    """The program's own wait wrappers: functions that, innermost in the off-CPU stacks of
    blocked waits (under any wrappers already found), are called from more than one place —
    an event-loop or latch wrapper, a generic wait helper — so that they say nothing of why
    the thread waited. Found level by level up to MAX_WRAPPERS deep; cached on the run."""
    return per_run(run, "_wait_wrappers", (id(run.stacks),), lambda: _wait_wrappers(run))


def _wait_wrappers(run) -> frozenset:
    stacks = {sid: program_frames(fr) for (stream, sid), fr in run.stacks.items()
              if stream == "offcpu"}
    found: set = set()
    # a function with one caller, looked through to see whether that caller is a wrapper:
    # then it is the wrapper's own helper (latch_block, only ever called by latch_wait; the
    # frame-pointer walk skips such a leaf's caller, an unwind by call-frame information
    # shows it)
    helper_of: dict = {}
    for depth in range(MAX_WRAPPERS):
        callers: dict = {}
        for fr in stacks.values():
            if len(fr) > depth + 1 and all(f in found or f in helper_of for f in fr[:depth]):
                callers.setdefault(fr[depth], set()).add(fr[depth + 1])
        new = {f for f, cs in callers.items() if len(cs) > 1} - found
        one = {f: next(iter(cs)) for f, cs in callers.items()
               if len(cs) == 1 and f not in found and f not in helper_of}
        if not new and not one:
            break
        found |= new
        helper_of.update(one)
    grew = True
    while grew:                       # helpers of wrappers, and helpers of those helpers
        add = {f for f, c in helper_of.items() if c in found and f not in found}
        found |= add
        grew = bool(add)
    return frozenset(found)


def waited_in(run, frames: list | None) -> str:
    """Where the program waited, in its own words: the first frame outside libc that is not
    one of its wait wrappers, with the wrappers it went through ('order_lock_wait (via
    latch_wait)'); else the first frame outside libc; '' without a stack."""
    prog = program_frames(frames)
    if not prog:
        return ""
    wrappers = wait_wrappers(run)
    via = []
    for f in prog[:MAX_WRAPPERS + 1]:
        if f not in wrappers:
            return f"{f} (via {' ← '.join(via)})" if via else f
        via.append(f)
    return prog[0]


def futex_object(run, row, kind: str, frames: list | None) -> str:
    """A futex wait's object in words: 'the GIL (condvar _PyRuntime+0x1b0 in python3.11)',
    'mutex LOCK_open in mariadbd', 'condvar 0x7f…' (known_locks.py)."""
    pid, addr = int(row.get("pid", 0) or 0), int(row["wait_addr"])
    named = word_name(run, pid, addr)
    obj = named or f"0x{addr:x}"
    known = known_lock(run, pid, addr, frames)
    return f"{known} ({kind} {obj})" if known else f"{kind} {obj}"


def describe(run, row) -> str:
    """One blocked interval in words: 'mutex 0x55d0... in tp_submit', 'read fd 5',
    'epoll_wait epoll fd 9 in order_lock_wait (via latch_wait)', 'clock_nanosleep'; '' when
    it was not blocked in a syscall or no reason was recorded."""
    call = str(row["call"])
    frames = run.stacks.get(("offcpu", int(row["ustack_id"]))) if row["ustack_id"] >= 0 else None
    caller = waited_in(run, frames) or (frame_function(frames[0]) if frames else "")
    where = f" in {caller}" if caller and caller != call and caller != "[unknown]" else ""
    if call in _LOCK:
        kind = futex_kind(int(row["wait_aux"]), frames)
        return f"{futex_object(run, row, kind, frames)}{where}"
    if not call:
        return ""      # not in a syscall (a page fault), or no wait reason recorded
    if call in _VM:
        return f"{call} (address-space lock){where}"
    obj = wait_object(call, row["wait_addr"], row["wait_aux"])
    return f"{call}{' ' + obj if obj else ''}{where}"
