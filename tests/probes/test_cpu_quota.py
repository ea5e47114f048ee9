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


def quota_group(name: str, quota_us: int | None) -> QuotaGroup:
    """A new group of quota_us per period (None: no quota), or a skip without the cpu
    controller."""
    where = quota_root()
    if where is None:
        pytest.skip("no cgroup hierarchy with the cpu controller is mounted")
    return QuotaGroup(*where, f"{name}-{os.getpid()}", quota_us)


def traced_service(out, name: str, quota_us: int | None, duration_s: float, *args: str):
    """The service in a new group (quota_us per period, or none) traced for duration_s (with
    args; default its spans): the tailtrace result, the kernel's count over a bracketing
    window, the group's path."""
    g = quota_group(name, quota_us)
    try:
        p, bracket_ns = run_service(tailtrace, out, g, duration_s=duration_s, timeout=120,
                                    args=args or None)
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


def kernel_window_ns(out, path: str) -> int:
    """The kernel's throttled count over the run (meta.json cpu_quotas, read as the records
    began and ended) of the group at path."""
    meta = json.loads((out / "meta.json").read_text())
    assert meta["evidence"]["throttle"] != "none", meta["evidence"]
    quota = next(q for q in meta["cpu_quotas"] if q["path"] == path)
    return quota["throttled_ns"][1] - quota["throttled_ns"][0]


def test_aggregate_counts_each_wait_s_throttled_part(tmp_path):
    """--aggregate: a histogram of the run-queue waits' throttled parts beside the run-queue
    latency one; its sum is the kernel's count over the run (a throttle whose wait began
    before tailtrace attached is left out: 1 of ~40)."""
    p, _, path = traced_service(tmp_path, "tt-quota-agg", QUOTA_US, 4, "--aggregate")
    assert "throttled, all 1 threads" in p.stdout + p.stderr, p.stdout
    kernel_ns = kernel_window_ns(tmp_path, path)
    assert kernel_ns >= 1e9, kernel_ns
    hist = json.loads((tmp_path / "aggregate.json").read_text())["metrics"]["throttled"]
    assert abs(hist["total"]["sum_ns"] - kernel_ns) <= 0.10 * kernel_ns, (hist["total"], kernel_ns)
    # one throttle a period, each most of the 80 ms the quota leaves (the wait after it)
    assert 0.5 * kernel_ns / (PERIOD_US * 1000) <= hist["total"]["count"], hist["total"]


def test_the_exporter_serves_each_process_s_throttled_time(tmp_path):
    """--listen: tailtrace_throttled_seconds for the service's pid, scraped after 3 s, within
    15% of what the kernel counted from its attach to the scrape."""
    import time

    from test_exporter import exporter, parse, pick, scrape
    g = quota_group("tt-quota-listen", QUOTA_US)
    svc = g.start(requests=100_000)
    try:
        time.sleep(0.3)
        with exporter(tmp_path, "--pid", str(svc.pid)) as (url, _, _):
            before = g.throttled_ns()
            time.sleep(3)
            text = scrape(url)
            kernel_ns = g.throttled_ns() - before
    finally:
        svc.kill()
        svc.wait()
        g.close()
    samples = parse(text)
    (labels, total_s), = pick(samples, "tailtrace_throttled_seconds_sum", pid=str(svc.pid))
    (_, count), = pick(samples, "tailtrace_throttled_seconds_count", pid=str(svc.pid))
    assert kernel_ns >= 1e9, kernel_ns
    assert abs(total_s * 1e9 - kernel_ns) <= 0.15 * kernel_ns, (total_s, kernel_ns, labels)
    assert count >= 15, count
    assert "# TYPE tailtrace_throttled_seconds histogram" in text
    # the series names the group its CPU limit comes from, on cgroup v1 as on v2
    assert labels["cgroup"] == g.path, (labels, g.path)
