"""The bench scripts, at smoke size: the perf-sched oracle must agree with
tailtrace per thread (independent tool, same run), and the overhead bench
must measure every mode and report tailtrace's losses."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from tt_run import BUILD, ROOT, needs_root

pytestmark = needs_root
ENV = dict(os.environ, BUILD=str(BUILD))


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                          timeout=300, env=ENV, stdin=subprocess.DEVNULL)


def test_oracle_agrees_with_perf_sched(tmp_path):
    # 10,000 requests: with 3,000 a thread's total was ~20 ms, and one interval whose
    # switch-in never reached the tracepoint (counted as unmatched, ~0.1-0.5 % on this VM)
    # could alone put it 10 % off perf (1 run in 10-15)
    # perf drops events silently on these VMs; when it dropped so many that it saw less than
    # 70 % of a thread's intervals whole, the oracle says inconclusive (exit 3) rather than
    # vouching: one more run then (a CI run once had a thread at 59 %, all within 0.9 %)
    oracle = ["oracle_perf_sched.sh", "--requests", "10000", "--conns", "10", "--out", str(tmp_path)]
    p = run(*oracle)
    if p.returncode == 3:
        print(p.stdout)
        shutil.rmtree(tmp_path)
        p = run(*oracle)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout.splitlines()[-1]
    rows = [l for l in p.stdout.splitlines() if l.strip().split(" ")[0].isdigit()]
    assert len(rows) == 10  # the 10 busiest of httpload's 10 connection threads + main
    meta = json.loads((tmp_path / "tailtrace" / "meta.json").read_text())
    assert meta["lost_events"]["runq"] == 0


def test_overhead_bench_measures_every_mode(tmp_path):
    p = run("overhead.sh", "--requests", "2000", "--conns", "10", "--repeats", "1", "--out",
            str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(l) for l in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["mode"] for r in rows] == ["none", "default", "aggregate", "perf"]
    assert all(r["rps"] > 0 and r["errors"] == 0 and r["requests"] == 2000 for r in rows)
    for r in rows[1:3]:
        assert r["lost"] and set(r["lost"].values()) == {0}
    table = p.stdout[p.stdout.index("mode "):]
    for mode in ("none", "default", "aggregate", "perf"):
        assert f"\n{mode}" in "\n" + table


def scrapers() -> list[str]:
    """overhead.sh's scraper processes (start_scraper) alive now."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if "GET /metrics HTTP/1.0" in l]


def test_overhead_bench_scrapes_listen_rounds_and_stops_its_scraper(tmp_path):
    """listen rounds run the exporter while one scraper process, started once for the
    whole bench, GETs /metrics every second; it is gone when the bench ends."""
    assert not scrapers()
    p = run("overhead.sh", "--duration", "3", "--conns", "10", "--repeats", "1", "--modes",
            "none,listen", "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(l) for l in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["mode"] for r in rows] == ["none", "listen"]
    assert rows[1]["lost"] and set(rows[1]["lost"].values()) == {0}
    assert not scrapers()
    sizes = [int(l.split()[1]) for l in (tmp_path / "scrapes.txt").read_text().splitlines()]
    assert 1 <= len(sizes) <= 4 and min(sizes) > 1000, sizes  # the exposition, in 3 s


def test_hook_floor_attaches_only_while_its_command_runs():
    """overhead.sh's `hooks` mode: the empty programs are attached while the command runs,
    gone after it, and the command's exit status is hook_floor's."""
    floor = BUILD / "bench" / "hook_floor"
    assert floor.exists(), f"{floor} missing: build first"
    show = ["bpftool", "-j", "prog", "show"]
    p = subprocess.run([str(floor), "--out", "ignored", "--", *show], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    names = {(q.get("name"), q.get("type")) for q in json.loads(p.stdout)}
    assert {("floor_switch", "tracing"), ("floor_waking", "tracing")} <= names
    deadline = time.monotonic() + 20  # the kernel frees programs after an RCU grace period
    while {"floor_switch", "floor_waking"} & {q.get("name") for q in json.loads(subprocess.run(
            show, capture_output=True, text=True, check=True).stdout)}:
        assert time.monotonic() < deadline, "hook_floor's programs outlived it"
        time.sleep(0.1)
    assert subprocess.run([str(floor), "--", "sh", "-c", "exit 7"], timeout=60).returncode == 7
    assert subprocess.run([str(floor), "sh"], capture_output=True, timeout=60).returncode == 2
