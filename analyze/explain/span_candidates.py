"""What --span could take in this program: the note of a report without requests suggests
functions of the traced program itself, not of nginx or curl.

df_span_candidates(run) -> function (a C++ name without its parameters, as --span takes it),
module, stacks: the traced program's own functions
(outside the C library, the loader and the language runtimes' support libraries) that its
off-CPU user stacks pass through, the program's entry points left out (main, a thread's
start), most stacks first. interpreter(run) -> 'Python' (or Ruby, Perl, PHP, the JVM) when
the traced program's code runs in an interpreter, whose own functions a request does not map
to: '' otherwise.
"""
from __future__ import annotations

import re

import pandas as pd

from ..load.frames import frame_parts, is_jit_frame

CANDIDATE_COLS = ["function", "module", "stacks"]
# modules whose functions are nobody's request
_SYSTEM = re.compile(r"^(libc\.so|ld-linux|libpthread|libm\.so|libdl|librt|libgcc_s|"
                     r"libstdc\+\+|libc\+\+|libz\.so|libcrypto|libssl|libsystemd|linux-vdso|"
                     r"\[)")
_ENTRY = re.compile(r"^(main|_start|__libc_start_call_main|__libc_start_main.*|start_thread|"
                    r"__?clone3?|_GLOBAL__.*|__static_initialization.*)$")
_PARAMS = re.compile(r"\((?:[^()]|\([^()]*\))*\)( const)?$")   # a C++ name's parameter list
INTERPRETERS = [(re.compile(r"^(lib)?python\d"), "Python"), (re.compile(r"^(lib)?ruby"), "Ruby"),
                (re.compile(r"^(lib)?perl"), "Perl"), (re.compile(r"^(php|libphp)"), "PHP"),
                (re.compile(r"^libjvm\.so"), "the JVM")]


def _user_stacks(run):
    return [fr for (stream, _), fr in (run.stacks or {}).items()
            if stream == "offcpu" and fr and "+0x" in fr[0] and " (" in fr[0]]


def interpreter(run) -> str:
    """The language whose interpreter most off-CPU user stacks run in, or ''."""
    counts: dict = {}
    for fr in _user_stacks(run):
        mods = {frame_parts(f)[1] for f in fr}
        for rx, name in INTERPRETERS:
            if any(rx.match(m) for m in mods):
                counts[name] = counts.get(name, 0) + 1
                break
    return max(counts, key=counts.get) if counts else ""


def df_span_candidates(run, top: int = 3) -> pd.DataFrame:
    """The program's own functions its blocked stacks pass through (CANDIDATE_COLS)."""
    seen: dict = {}
    for fr in _user_stacks(run):
        for f in {f for f in fr if not is_jit_frame(f)}:
            fn, mod = frame_parts(f)
            if not mod or not fn or fn.startswith("[unknown]") or _SYSTEM.match(mod) or \
                    _ENTRY.match(fn):
                continue
            fn = _PARAMS.sub("", fn) or fn          # --span takes it without them
            seen[(fn, mod)] = seen.get((fn, mod), 0) + 1
    rows = sorted(((n, fn, mod) for (fn, mod), n in seen.items()), key=lambda r: (-r[0], r[1]))
    return pd.DataFrame([{"function": fn, "module": mod, "stacks": n} for n, fn, mod in rows[:top]],
                        columns=CANDIDATE_COLS)
