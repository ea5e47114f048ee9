#!/usr/bin/env python3
"""How many records a second one loader CPU drains, and what that predicts for big machines.

tailtrace's loader takes every ring buffer on one thread. This runs a context-switch-bound
producer (tests/probes/pingpong.c: two threads handing a byte over pipes, two switches and two
wakeups a round trip) under tailtrace with its default events, ROUNDS times, and reads each
run's meta.json: the records written (every stream's: runq, switch, cpu, tasks; offcpu counts
the switch records that carry a stack) over the loader's own CPU time while it
recorded (cost loader_cpu_ns: the poll loop, its ring drains and writes to disk; not the
start-up nor the end's symbolization), and the records per
context switch. From the median it predicts the loader's load on a machine of N CPUs at RATE
switches a second per CPU (the issue's 50,000): records a second needed, loader CPUs that
needs, and the share of records lost when that is more than the one CPU the loader has.

  python3 bench/drain_rate.py [--rounds 5] [--trips 200000] [--rate 50000] [--cpus 64,128,256]

Run as root, from the checkout, after cmake --build build.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TOP = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("BUILD", TOP / "build"))
TAILTRACE = BUILD / "probes" / "tailtrace"
PRODUCER = BUILD / "tests" / "probes" / "tt-pingpong"


def one_run(trips: int) -> dict:
    """One traced run: {records, switches, loader_s, seconds, lost, refused}; refused: the
    updates each BPF map refused for want of room (meta.json map_full), by map."""
    with tempfile.TemporaryDirectory(prefix="tt-drain-") as d:
        p = subprocess.run([str(TAILTRACE), "--out", d, "--", str(PRODUCER), str(trips)],
                           capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise SystemExit(f"drain_rate: tailtrace failed: {p.stderr.strip().splitlines()[-1:]}")
        m = json.loads((Path(d) / "meta.json").read_text())
    c = m["cost"]
    # offcpu counts the switch records that carry stacks, not records of its own
    records = sum(n for s, n in m["events"].items() if s != "offcpu")
    return {"records": records, "switches": m["events"]["switch"],
            "loader_s": c["loader_cpu_ns"] / 1e9,   # the poll loop's: drains and writes
            "seconds": c["traced_wall_ns"] / 1e9, "lost": sum(m["lost_events"].values()),
            "refused": {k: v["refused"] for k, v in m.get("map_full", {}).items()}}


def predict(rate_per_loader_s: float, per_switch: float, cpus: int, switch_rate: float) -> dict:
    need = cpus * switch_rate * per_switch
    loader = need / rate_per_loader_s
    return {"cpus": cpus, "records_per_s": need, "loader_cpus": loader,
            "lost_share": max(0.0, 1 - 1 / loader)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trips", type=int, default=200000, help="round trips a run")
    ap.add_argument("--rate", type=float, default=50000, help="switches a second per CPU")
    ap.add_argument("--cpus", default="64,128,256")
    a = ap.parse_args(argv[1:])
    for exe in (TAILTRACE, PRODUCER):
        if not exe.exists():
            print(f"drain_rate: {exe} missing: cmake --build {BUILD}", file=sys.stderr)
            return 1
    runs = [one_run(a.trips) for _ in range(a.rounds)]
    rates = [r["records"] / r["loader_s"] for r in runs]
    per_switch = statistics.median(r["records"] / r["switches"] for r in runs)
    rate = statistics.median(rates)
    for i, r in enumerate(runs, 1):
        print(f"run {i}: {r['records']:,} records ({r['switches']:,} switches) in {r['seconds']:.2f} s,"
              f" loader {r['loader_s'] * 1e3:.0f} ms CPU: {rates[i - 1]:,.0f} records a loader "
              f"CPU second; lost {r['lost']}; maps refused "
              + (", ".join(f"{k} {v}" for k, v in r["refused"].items()) or "(none counted)"))
    print(f"median: {rate:,.0f} records a loader CPU second, {per_switch:.2f} records a switch")
    print(f"{'CPUs':>5} {'records/s at ' + format(a.rate, ',.0f') + ' switches/s/CPU':>34} "
          f"{'loader CPUs':>12} {'lost':>6}")
    for n in (int(x) for x in a.cpus.split(",")):
        p = predict(rate, per_switch, n, a.rate)
        print(f"{n:>5} {p['records_per_s']:>34,.0f} {p['loader_cpus']:>12.2f} "
              f"{100 * p['lost_share']:>5.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
