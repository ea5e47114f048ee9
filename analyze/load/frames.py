"""Frames as stacks.jsonl and the folded files write them, taken apart.

A user frame is 'function+0xOFF (module)', a kernel frame 'function+0xOFF', an unnamed one
'[unknown] (module+0xOFF)' or '[unknown] (0xADDR)'. A C++ function's demangled name holds
spaces and parentheses of its own ('std::vector<int, std::allocator<int> >::push_back(int
const&)'), so the module is the last ' (...)' and the offset the last '+0x' before it.

A frame of JIT code, named from the runtime's perf map, has the module 'perf-PID.map'.

frame_function(frame) -> 'push_back(...)'-style function name, no offset or module
frame_parts(frame)    -> (function, module), for profiles (pprof)
is_jit_frame(frame)   -> named from a perf map (JIT-compiled code)
unnamed_at(frame)     -> 'mariadbd+0xefef8d' for a frame without a name in a file, else ''

jit_stack_count(stacks) -> how many of a run's stacks ({key: frames}) hold one
"""
from __future__ import annotations

import re

_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
_PERF_MAP = re.compile(r"perf-\d+\.map")
_UNNAMED = re.compile(r"^\[unknown\] \((.+\+0x[0-9a-fA-F]+)\)$")


def _split(frame: str) -> tuple[str, str]:
    """(name with its offset, module) of a frame; module '' when it has none."""
    i = frame.rfind(" (")
    if i < 0 or not frame.endswith(")"):
        return frame, ""
    return frame[:i], frame[i + 2:-1]


def frame_function(frame: str) -> str:
    """'ns::f(int)+0x1a (app)' -> 'ns::f(int)'; '[unknown] (libc.so.6+0x8a0)' -> '[unknown]'."""
    return _OFFSET.sub("", _split(frame)[0])


def frame_parts(frame: str) -> tuple[str, str]:
    """(function, file) of one frame: 'epoll_wait+0x13 (libc.so.6)' -> ('epoll_wait',
    'libc.so.6'); '__schedule+0x618' (a kernel stack's) -> ('__schedule', ''); 'do_epoll_wait_[k]'
    (a folded kernel frame) -> ('do_epoll_wait', '[kernel]'); an unnamed frame keeps its
    address: '[unknown] (libc.so.6+0x8a0)' -> ('[unknown] libc.so.6+0x8a0', 'libc.so.6')."""
    name, module = _split(frame)
    if name.endswith("_[k]"):
        return name[:-4], "[kernel]"
    if name.startswith("[unknown]") and module:
        return f"[unknown] {module}", _OFFSET.sub("", module)
    return _OFFSET.sub("", name), _OFFSET.sub("", module)


def is_jit_frame(frame: str) -> bool:
    """'JS:*handleRequest /srv/app.js:7+0x1c (perf-4242.map)' -> True."""
    return bool(_PERF_MAP.fullmatch(_split(frame)[1]))


def jit_stack_count(stacks: dict) -> int:
    """The stacks (load_stacks' {(stream, id): frames}) with a frame of JIT code."""
    return sum(any(is_jit_frame(f) for f in frames) for frames in (stacks or {}).values())


def unnamed_at(frame: str) -> str:
    """Where a frame without a name is, 'mariadbd+0xefef8d' (its file and the offset in it,
    for addr2line -e FILE), or '' (a named frame, or an address outside any file)."""
    m = _UNNAMED.match(frame)
    return m.group(1) if m else ""
