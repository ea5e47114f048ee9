"""Where a report's time and memory go: the wall time and the peak resident memory of each
phase of build_report (`python3 -m analyze report RUN --timings`, bench/analyze_scale.py).

The peak of a phase is the process's high-water mark of resident memory (VmHWM) from the
phase's start, which Linux lets a process reset (writing 5 to /proc/self/clear_refs,
Linux 4.0+). Where that cannot be done the peak is the process's since it started, and the
rows say so (`peak_since_start`).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

_STATUS = "/proc/self/status"


def _status_kib(key: str) -> int | None:
    try:
        with open(_STATUS, encoding="ascii") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


@dataclass
class Phase:
    name: str
    seconds: float
    peak_mib: float | None     # the highest resident memory during the phase
    end_mib: float | None      # resident memory when it ended
    peak_since_start: bool     # the peak could not be reset: it is the process's


@dataclass
class Phases:
    """The phases measured so far, in order (a no-op sink unless asked for)."""
    rows: list[Phase] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str):
        reset = _reset_peak()
        t = time.perf_counter()
        try:
            yield
        finally:
            peak, now = _status_kib("VmHWM:"), _status_kib("VmRSS:")
            self.rows.append(Phase(name, time.perf_counter() - t,
                                   peak / 1024 if peak is not None else None,
                                   now / 1024 if now is not None else None, not reset))

    def table(self) -> str:
        """One line a phase: name, seconds, peak and end RSS in MiB; then the total."""
        lines = [f"{'phase':<22}{'s':>8}{'peak MiB':>10}{'end MiB':>9}"]
        for r in self.rows:
            peak = f"{r.peak_mib:,.0f}{'*' if r.peak_since_start else ''}" \
                if r.peak_mib is not None else "?"
            end = f"{r.end_mib:,.0f}" if r.end_mib is not None else "?"
            lines.append(f"{r.name:<22}{r.seconds:8.2f}{peak:>10}{end:>9}")
        peaks = [r.peak_mib for r in self.rows if r.peak_mib is not None]
        lines.append(f"{'total':<22}{sum(r.seconds for r in self.rows):8.2f}"
                     f"{max(peaks, default=0):>10,.0f}")
        if any(r.peak_since_start for r in self.rows):
            lines.append("* since the process started (/proc/self/clear_refs refused)")
        return "\n".join(lines)

    def as_dicts(self) -> list[dict]:
        return [r.__dict__.copy() for r in self.rows]


class NoPhases(Phases):
    """Measures nothing (the default of build_report)."""

    @contextmanager
    def phase(self, name: str):
        yield
