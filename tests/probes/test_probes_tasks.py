"""tasks.bin (migrations, comm) and the flame-graph input.

A thread that re-pins itself alternately to two CPUs N times migrates at
least N - 1 times (sched_migrate_task; the first pin may be a no-op):
tasks.bin must count that for it, and
its switch records must show it leaving one CPU and coming back on the other.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tt_run import helper, json_lines, needs_root, records, tailtrace

pytestmark = needs_root
HOPS = 100


def test_migrations_counted_per_thread(tmp_path):
    p = tailtrace(tmp_path, "--events", "switch", "--", helper("hopper"), str(HOPS))
    assert p.returncode == 0, p.stderr
    info = json_lines(p.stdout)[0]
    tasks = records(tmp_path, "task")
    row = tasks[tasks["tid"] == info["tid"]]
    assert len(row) == 1 and row["comm"][0].decode() == "tt-hopper"
    # the first pin may find it on that CPU already
    assert HOPS - 1 <= int(row["migrations"][0]) <= 3 * HOPS
    sw = records(tmp_path, "switch")
    mine = sw[sw["tid"] == info["tid"]]
    # a gap record stands for a switch-in the kernel never reported (docs/probes/sched.md,
    # "Unmatched intervals"): that hop's arrival CPU is unknown
    gaps = int(mine["unmatched"].sum())
    crossed = mine[(mine["cpu_off"] != mine["cpu_on"]) & (mine["unmatched"] == 0)]
    assert len(crossed) + gaps >= HOPS - 2, (len(crossed), gaps)
    assert gaps <= HOPS // 5
    assert set(crossed["cpu_on"].tolist()) <= set(info["cpus"])


def test_offcpu_folded_renders_as_a_flame_graph(tmp_path):
    exe = shutil.which("inferno-flamegraph")
    if not exe:
        pytest.skip("inferno-flamegraph not installed (scripts/install-deps.sh installs it)")
    p = tailtrace(tmp_path, "--events", "switch,offcpu", "--", helper("sleeper"), "200", "100")
    assert p.returncode == 0, p.stderr
    folded = (tmp_path / "offcpu.folded").read_text()
    svg = subprocess.run([exe], input=folded, capture_output=True, text=True, timeout=60)
    assert svg.returncode == 0, svg.stderr
    assert svg.stdout.lstrip().startswith("<?xml") and "tt-sleeper" in svg.stdout
    assert ">__schedule<" in svg.stdout  # kernel frame (inferno drops the _[k] marker)
