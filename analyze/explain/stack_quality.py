"""Say what the stacks lack, and how to get it: where off-CPU user stacks stopped before their
thread's start, and which objects' frames have no name.

df_stack_ends(run) -> object, stacks: the off-CPU user stacks that stop before a thread's or
the program's start, by the object of their outermost frame (the one the walk could not get
past). df_unnamed(run) -> object, frames, share: frames without a symbol, by object.
stack_notes(run) -> the report's sentences about both, each naming the fix; meta.json
user_stacks (probes/sched/copied_stacks.c) says how the copies were unwound.
"""
from __future__ import annotations

import re

import pandas as pd

from ..load.frames import frame_parts, is_jit_frame, unnamed_at

# a stack that reaches one of these reached its thread's (or the program's) start
_START = re.compile(r"^(start_thread|__?clone3?|_start|__libc_start_call_main|"
                    r"__libc_start_main.*|main|thread_start|runtime\.goexit.*|runtime\.main)$")
NOTE_SHARE = 0.10   # of the stacks (or of an object's frames) before a note is worth it


def _user_stacks(run) -> list:
    return [fr for (stream, _), fr in (run.stacks or {}).items()
            if stream == "offcpu" and fr and " (" in fr[0]]


def _object(frame: str) -> str:
    at = unnamed_at(frame)
    return at.rpartition("+0x")[0] if at else frame_parts(frame)[1]


def df_stack_ends(run) -> pd.DataFrame:
    """The stacks that stop before a start, by their outermost frame's object, most first."""
    ends: dict = {}
    for fr in _user_stacks(run):
        if any(_START.match(frame_parts(f)[0]) for f in fr[-3:]):
            continue
        obj = "JIT code" if is_jit_frame(fr[-1]) else _object(fr[-1]) or "no file"
        ends[obj] = ends.get(obj, 0) + 1
    return pd.DataFrame(sorted(ends.items(), key=lambda kv: -kv[1]),
                        columns=["object", "stacks"])


def df_unnamed(run) -> pd.DataFrame:
    """Frames without a symbol, by object: how many, and their share of its frames."""
    named: dict = {}
    unnamed: dict = {}
    for fr in _user_stacks(run):
        for f in fr:
            obj = _object(f)
            if not obj or obj.startswith("0x"):
                continue
            d = unnamed if f.startswith("[unknown]") else named
            d[obj] = d.get(obj, 0) + 1
    rows = [(o, n, n / (n + named.get(o, 0))) for o, n in unnamed.items()]
    return pd.DataFrame(sorted(rows, key=lambda r: -r[1]), columns=["object", "frames", "share"])


def _dwarf_causes(us: dict) -> str:
    """Why the copies' unwinds stopped early, by cause (meta.json user_stacks ended), each
    with its fix, most first."""
    ended = us.get("ended") or {}
    objects = ", ".join(us.get("stopped_in") or {}) or "JIT code"
    causes = [
        (ended.get("no_cfi", 0) + ended.get("no_object", 0),
         f"in an object without call-frame information or frame pointers ({objects}): keep "
         "frame pointers in the runtime (Java -XX:+PreserveFramePointer, Python 3.12+ -X perf) "
         "or install the object's debug symbols"),
        (ended.get("copy_ended", 0),
         f"deeper than the copy ({us.get('copy_bytes', 8192):,} bytes), gone on by frame "
         "pointer only: --user-stacks dwarf,16384 copies more"),
        (ended.get("depth", 0), "at the 64 frames kept"),
        (ended.get("process_gone", 0),
         "of processes that had exited when the loader came to them (short-lived children), "
         "so neither unwound nor named: their frame-pointer walk only"),
    ]
    parts = [f"{n:,} {why}" for n, why in sorted(causes, key=lambda c: -c[0]) if n]
    if not parts:
        return "the unwind reached no start frame (a thread started by code without one)"
    return f"of the {us.get('unwound', 0):,} copies unwound, " + "; ".join(parts)


def stack_notes(run) -> list[str]:
    """The report's sentences on what the stacks lack, each with its fix."""
    stacks = _user_stacks(run)
    if not stacks:
        return []
    notes = []
    ends = df_stack_ends(run)
    us = (run.meta or {}).get("user_stacks") or {}
    short = int(ends["stacks"].sum()) if len(ends) else 0
    if short >= NOTE_SHARE * len(stacks):
        where = ", ".join(f"{o} {n:,}" for o, n in zip(ends["object"][:3], ends["stacks"][:3]))
        if us.get("unwind") == "frame_pointer":
            fix = ("they were walked by frame pointer, which stops at the first function built "
                   "without one (Debian's libc, python3): --user-stacks dwarf unwinds through "
                   "them by call-frame information")
        else:
            fix = _dwarf_causes(us)
        notes.append(f"{short:,} of the {len(stacks):,} off-CPU user stacks stop before their "
                     f"thread's start, in {where}: {fix}")
    unnamed = df_unnamed(run)
    bad = unnamed[unnamed["share"] >= NOTE_SHARE]
    if len(bad):
        objs = ", ".join(f"{o} ({s * 100:.0f}% of its frames)"
                         for o, s in zip(bad["object"][:3], bad["share"][:3]))
        notes.append(f"frames without a name in {objs}: the files are stripped; install their "
                     "debug symbols (Debian: the package's -dbg, or its -dbgsym from the "
                     "debian-debug archive), which tailtrace reads from /usr/lib/debug, or set "
                     "DEBUGINFOD_URLS to fetch them")
    return notes
