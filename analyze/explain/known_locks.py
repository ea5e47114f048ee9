"""Locks named by what they are, not by their address.

The loader names each futex word the traced threads waited on by the global variable that
holds it (probes/sched/wait_names.c: the process's symbols, its debug file's where the
distribution keeps one): `run.wait_names[(pid, addr)] = (symbol, offset, object, size)`. A table
of well-known locks then says some of them in words:

  CPython's GIL     `_PyRuntime` of python3.8–3.13 (the interpreter or libpython): the main
                    interpreter's GIL is a struct _gil_runtime_state at a known offset in it
                    (GIL_OFFSET, from each version's own headers: scripts/gil_offsets.sh)
  glibc             `main_arena` (malloc's first arena and its lock), `_IO_stdfile_*_lock`
  the loader        `_rtld_global` (ld.so: dlopen, dlsym, TLS setup take its locks)

Heap-allocated locks have no symbol; glibc's other malloc arenas are told by the stack
(malloc's functions above the lock wait). A condition variable waits on one of two words
(glibc's __g_signals[0] and [1], 4 bytes apart): `condvar_word` takes both to one object.

word_name(run, pid, addr) -> 'LOCK_open in mariadbd', '_PyRuntime+0x1b0 in python3.11' or ''.
known_lock(run, pid, addr, frames) -> 'the GIL' and the like, or ''; lock_group: the lock a
word is part of ('the GIL' for each of its fields).
"""
from __future__ import annotations

import re

import numpy as np

from ..load.frames import frame_function

# offsetof(_PyRuntimeState, <the main interpreter's GIL>) on x86-64, release builds:
# ceval.gil (3.8–3.11), _main_interpreter._gil (3.12, 3.13)
GIL_OFFSET = {(3, 8): 1152, (3, 9): 352, (3, 10): 352, (3, 11): 360, (3, 12): 77432,
              (3, 13): 96104}
GIL_SIZE = 208
# the struct's fields a thread waits on, by offset in it: [from, to)
GIL_FIELDS = [(32, 80, "the GIL"), (80, 120, "the GIL's mutex"),
              (120, 168, "the GIL's switch condition"), (168, 208, "the GIL's switch mutex")]
_PYTHON = re.compile(r"^(?:lib)?python(\d)\.(\d+)")
GLOBAL_LOCKS = {  # (object prefix, symbol) -> what it is
    ("libc.so", "main_arena"): "glibc's main malloc arena lock",
    ("libc.so", "_IO_stdfile_0_lock"): "stdin's lock (glibc stdio)",
    ("libc.so", "_IO_stdfile_1_lock"): "stdout's lock (glibc stdio)",
    ("libc.so", "_IO_stdfile_2_lock"): "stderr's lock (glibc stdio)",
    ("ld-linux", "_rtld_global"): "the dynamic loader's lock (dlopen, dlsym, TLS setup)",
}
_MALLOC_FN = re.compile(r"^(_int_malloc|_int_free|arena_get2|arena_get_retry|__libc_malloc|"
                        r"__libc_free|__libc_realloc|__libc_calloc|tcache_init|malloc|free|"
                        r"realloc|calloc)(\.|$)")
CONDVAR_MASK = ~np.int64(7)
PTHREAD_OBJECT_MAX = 48   # bytes of a pthread_cond_t, the largest of glibc's lock objects


def condvar_word(addr: np.ndarray) -> np.ndarray:
    """The one word that stands for a condition variable's pair (the 8-aligned one)."""
    return np.asarray(addr, np.int64) & CONDVAR_MASK


def _name(run, pid: int, addr: int):
    names = getattr(run, "wait_names", None) or {}
    return names.get((int(pid), int(addr))) or names.get((int(pid), int(addr) & ~7))


def word_name(run, pid: int, addr: int) -> str:
    """The global variable holding the word: 'LOCK_open in mariadbd', 'x+0x8 in app'; ''."""
    n = _name(run, pid, addr)
    if not n:
        return ""
    sym, off, obj, size = n
    # a variable that is the lock itself (a pthread_cond_t is 48 bytes, a mutex 40): its name
    whole = size <= PTHREAD_OBJECT_MAX
    return f"{sym}{f'+0x{off:x}' if off and not whole else ''} in {obj}"


def lock_group(run, pid: int, addr: int) -> str:
    """The lock a word is part of, when the table knows it: 'the GIL' for each of its fields
    (its condvar, its mutex: one object), 'glibc's main malloc arena lock'; else ''."""
    what = known_lock(run, pid, addr)
    return "the GIL" if what.startswith("the GIL") else what


def _gil_field(sym: str, off: int, obj: str) -> str:
    m = _PYTHON.match(obj)
    if sym != "_PyRuntime" or not m:
        return ""
    base = GIL_OFFSET.get((int(m.group(1)), int(m.group(2))))
    if base is None or not base <= off < base + GIL_SIZE:
        return ""
    return next((what for lo, hi, what in GIL_FIELDS if lo <= off - base < hi), "the GIL")


def known_lock(run, pid: int, addr: int, frames: list | None = None) -> str:
    """What a futex word is, in words, when the table knows it: 'the GIL', "glibc's main
    malloc arena lock", 'a glibc malloc arena lock' (by the stack); else ''."""
    n = _name(run, pid, addr)
    if n:
        sym, off, obj, _ = n
        gil = _gil_field(sym, off, obj)
        if gil:
            return gil
        for (prefix, s), what in GLOBAL_LOCKS.items():
            if obj.startswith(prefix) and sym == s:
                return what
    for f in (frames or [])[:6]:
        if _MALLOC_FN.match(frame_function(f)):
            return "a glibc malloc arena lock"
    return ""
