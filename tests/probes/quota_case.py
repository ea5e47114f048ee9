"""A service under a CPU quota, for the throttled part's tests (tests/probes/test_cpu_quota.py
on the host, the kernel suite in each VM): its cgroup, its run, and the kernel's own count.

The service is span_target serve: each request sleeps SLEEP_US, then spins until its thread has
used CPU_US of CPU time. 5 ms asleep and 4 ms of CPU is 44% of a CPU; under a quota of 20 ms per
100 ms it spends its quota early in each period and waits, runnable, for the next one.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tt_run import BUILD, cgroup2_root

SERVICE = str(BUILD / "tests" / "probes" / "span_target")

SLEEP_US, CPU_US = 5000, 4000
QUOTA_US, PERIOD_US = 20000, 100000


def cpu_v1_root() -> Path | None:
    """Where cgroup v1's cpu controller is mounted, or None."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        f = line.split()
        if f[2] == "cgroup" and "cpu" in f[3].split(","):
            return Path(f[1])
    return None


class QuotaGroup:
    """A new cgroup (v1's cpu controller, or v2 with cpu enabled below the root) with a quota
    of quota_us per PERIOD_US, or none (quota_us None); removed by close()."""

    def __init__(self, root: Path, version: int, name: str, quota_us: int | None):
        self.version, self.dir = version, root / name
        if version == 2:
            ctl = root / "cgroup.subtree_control"
            if "cpu" not in ctl.read_text().split():
                ctl.write_text("+cpu")
        self.dir.mkdir()
        q = quota_us if quota_us else None
        if version == 1:
            (self.dir / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.dir / "cpu.cfs_quota_us").write_text(str(q or -1))
        else:
            (self.dir / "cpu.max").write_text(f"{q or 'max'} {PERIOD_US}")
        self.path = "/" + name

    def throttled_ns(self) -> int:
        """The kernel's count: cpu.stat throttled_time (v1, ns) or throttled_usec (v2)."""
        stat = dict(line.split() for line in (self.dir / "cpu.stat").read_text().splitlines())
        return int(stat["throttled_time"]) if self.version == 1 else int(stat["throttled_usec"]) * 1000

    def start(self, requests: int, sleep_us: int = SLEEP_US) -> subprocess.Popen:
        """The service, moved into this cgroup before it execs."""
        cmd = f'echo $$ > {self.dir}/cgroup.procs && exec "$0" serve {requests} {sleep_us} {CPU_US}'
        return subprocess.Popen(["sh", "-c", cmd, SERVICE],
                                stdout=subprocess.DEVNULL)

    def close(self) -> None:
        for _ in range(50):
            try:
                self.dir.rmdir()
                return
            except OSError:          # its last task is still leaving
                time.sleep(0.05)


def quota_root(prefer_v1: bool = True) -> tuple[Path, int] | None:
    """The hierarchy to make the group in: v1's cpu controller where it is mounted (this
    machine), else cgroup v2; None if neither is."""
    v1 = cpu_v1_root()
    if v1 is not None and prefer_v1:
        return v1, 1
    v2 = cgroup2_root()
    return (v2, 2) if v2 is not None else None


def run_service(tailtrace, out: Path, group: QuotaGroup, duration_s: float, timeout: float,
                sleep_us: int = SLEEP_US, args: tuple[str, ...] | None = None):
    """Trace the service in group for duration_s by its pid (with args; default --span
    tt_span_serve); the tailtrace process result and the kernel's count over a window
    bracketing the run. sleep_us 0: a service that never sleeps, runnable whenever it is
    not running."""
    svc = group.start(requests=100_000, sleep_us=sleep_us)
    if args is None:
        args = ("--span", f"{SERVICE}:tt_span_serve")
    try:
        time.sleep(0.3)                  # in its cgroup, serving
        before = group.throttled_ns()
        p = tailtrace(out, "--pid", str(svc.pid), *args, "--duration", str(duration_s),
                      timeout=timeout)
        after = group.throttled_ns()
    finally:
        svc.kill()
        svc.wait()
    return p, after - before
