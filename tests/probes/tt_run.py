"""Helpers of the tailtrace integration tests (test_probes_*.py): run the
loader on a workload with known behaviour, read the run directory back."""
from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from analyze.load.schema import load_schema, read_records

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TT_BUILD", ROOT / os.environ.get("BUILD", "build")))
TAILTRACE = Path(os.environ.get("TAILTRACE", BUILD / "probes" / "tailtrace"))
HELPERS = BUILD / "tests" / "probes"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="loads BPF programs: needs root")


def helper(name: str) -> str:
    p = HELPERS / f"tt-{name}"
    assert p.exists(), f"{p} missing: build first (cmake --build build)"
    return str(p)


def free_port() -> int:
    """A loopback TCP port free now (for --listen)."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def tailtrace(out: Path, *args: str, env: dict | None = None, timeout: float = 60,
              **kw) -> subprocess.CompletedProcess:
    assert TAILTRACE.exists(), f"{TAILTRACE} missing: build first (cmake --build build)"
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([str(TAILTRACE), "--out", str(out), *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, **kw)


def wait_target_running(loader_pid: int, exe: str, threads: int = 1,
                        timeout_s: float = 30) -> int:
    """Wait until the loader's child has exec'd `exe` and runs >= `threads` threads; its pid.
    The loader prints "attached" before it releases the held child, so a test that must
    stall the loader while the target runs waits for this, not for a fixed time."""
    comm = Path(exe).name[:15]
    children = Path(f"/proc/{loader_pid}/task/{loader_pid}/children")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in children.read_text().split():
            try:
                if (Path(f"/proc/{pid}/comm").read_text().strip() == comm
                        and len(os.listdir(f"/proc/{pid}/task")) >= threads):
                    return int(pid)
            except FileNotFoundError:
                pass
        time.sleep(0.002)
    raise AssertionError(f"{exe} not running with {threads} threads after {timeout_s} s")


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, or None."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        f = line.split()
        if f[2] == "cgroup2":
            return Path(f[1])
    return None


def read_line(stream, pattern: str, timeout: float) -> str:
    """The first line of stream (an unbuffered pipe: bufsize=0, so select sees every byte
    not read yet) that matches pattern, within timeout seconds."""
    end, seen = time.monotonic() + timeout, []
    while time.monotonic() < end:
        if select.select([stream], [], [], 0.1)[0]:
            line = stream.readline().decode()
            if not line:
                break
            seen.append(line)
            if re.search(pattern, line):
                return line
    raise AssertionError(f"no line matching {pattern!r} in {timeout} s: {seen}")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "meta.json").read_text())


def records(run_dir: Path, kind: str) -> np.ndarray:
    schema = load_schema(run_dir)
    return read_records(run_dir / schema["records"][kind]["file"], schema, kind)


def intervals(run_dir: Path) -> np.ndarray:
    """switches.bin without its gap records (unmatched: a switch edge the kernel never
    reported, docs/probes/sched.md): the off-CPU intervals proper."""
    sw = records(run_dir, "switch")
    return sw[sw["unmatched"] == 0]


def clipped_sum(t0: np.ndarray, t1: np.ndarray, lo: int, hi: int) -> int:
    """Total length of the intervals [t0, t1) inside [lo, hi)."""
    a = np.clip(t0.astype(np.int64), lo, hi)
    b = np.clip(t1.astype(np.int64), lo, hi)
    return int((b - a).sum())


def stolen_ns(cpu: int) -> int:
    """The time the hypervisor has taken from CPU cpu so far (/proc/stat's steal, in
    USER_HZ ticks), in ns, plus one tick for the counter's granularity. A thread's CPU clock
    leaves it out where the kernel accounts steal (CONFIG_PARAVIRT_TIME_ACCOUNTING) while the
    scheduler's switches, and so tailtrace's on-CPU time, take it in: an oracle that compares
    the two allows the steal between two reads."""
    tick_ns = 10**9 // os.sysconf("SC_CLK_TCK")
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f[0] == f"cpu{cpu}":
            return int(f[8]) * tick_ns + tick_ns
    return 0
