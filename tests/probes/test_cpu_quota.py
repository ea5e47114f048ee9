"""The throttled part on this machine (docs/containers.md, "The throttled part"): a service that
needs 44% of a CPU under a quota of 20% is throttled most of each period, and its requests say
so, by as much as the kernel counted; the same service without a quota is never throttled.
Real BPF and real cgroups: root. The kernel suite runs the same case on cgroup v2 in each VM
(tests/kernels/test_kernel_suite.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from analyze.explain.decompose import decomposed, df_decompose
from analyze.load.load import load_run
from analyze.render.summary import records_throttled_ns
from quota_case import PERIOD_US, QUOTA_US, QuotaGroup, quota_root, run_service
from tt_run import ROOT, needs_root, tailtrace

pytestmark = [needs_root, pytest.mark.serial]   # its oracle is a share of one CPU: load would move it


def traced_service(out, name: str, quota_us: int | None, duration_s: float):
    """The service in a new group (quota_us per period, or none) traced for duration_s: the
    tailtrace result, the kernel's count over a bracketing window, the group's path."""
    where = quota_root()
    if where is None:
        pytest.skip("no cgroup hierarchy with the cpu controller is mounted")
    g = QuotaGroup(*where, f"{name}-{os.getpid()}", quota_us)
    try:
        p, bracket_ns = run_service(tailtrace, out, g, duration_s=duration_s, timeout=120)
    finally:
        g.close()
    assert p.returncode == 0, p.stderr
    return p, bracket_ns, g.path


def test_a_quota_s_throttling_is_a_part_of_each_request_as_the_kernel_counts_it(tmp_path):
    p, bracket_ns, path = traced_service(tmp_path, "tt-quota", QUOTA_US, duration_s=8)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["evidence"]["throttle"] != "none", meta["evidence"]
    quota = next(q for q in meta["cpu_quotas"] if q["path"] == path)
    assert (quota["quota_us"], quota["period_us"]) == (QUOTA_US, PERIOD_US)
    kernel_ns = quota["throttled_ns"][1] - quota["throttled_ns"][0]
    # throttled for most of each period: 8 s of which about 4.5 s (2 s or more under load)
    assert 2e9 <= kernel_ns <= bracket_ns, (kernel_ns, bracket_ns)

    run = load_run(tmp_path)
    # the run-queue records switched in between the kernel's two reads: its window
    ours = records_throttled_ns(run.runq, quota)
    assert abs(ours - kernel_ns) <= 0.05 * kernel_ns, (ours, kernel_ns)
    d = df_decompose(run)
    d = d[decomposed(d)]
    assert len(d) >= 300, len(d)
    assert d["closes"].mean() >= 0.95
    # every throttle falls in a request but at the run's two edges (a request cut there)
    total = d["throttled_ns"].sum()
    assert abs(total - kernel_ns) <= 0.10 * kernel_ns, (total, kernel_ns)

    rep = subprocess.run([sys.executable, "-m", "analyze", "report", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr
    head = json.loads((tmp_path / "summary.json").read_text())["headline"]
    assert f"throttled by the CPU quota of cgroup {path} (20 ms per 100 ms)" in head, head
    share = int(head.split(" for ")[1].split("%")[0])
    assert share >= 50, head


def test_without_a_quota_nothing_is_throttled(tmp_path):
    p, bracket_ns, path = traced_service(tmp_path, "tt-noquota", None, duration_s=1)
    assert bracket_ns == 0
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert not any(q["path"] == path for q in meta["cpu_quotas"]), meta["cpu_quotas"]
    run = load_run(tmp_path)
    assert len(run.runq) >= 100 and (run.runq["throttled_ns"] == 0).all()
    d = df_decompose(run)
    d = d[decomposed(d)]
    assert len(d) >= 50 and (d["throttled_ns"] == 0).all() and d["closes"].mean() >= 0.95
