#!/usr/bin/env python3
"""Throughput with the programs attached vs detached, inside one workload run
(bench/overhead_interleave.sh): tailtrace --toggle-ms P attaches and detaches
every program in turn (RUN/toggles.txt) while httpload writes its requests
(HL/requests.bin). This machine's throughput moves by ~10 % from one 1 s run
to the next and within a run (naive/100: 28-60k req/s in 100 ms bins, with
runs of a few hundred ms), so separate runs need hundreds of rounds to see 1 %;
windows next to each other share the machine's state.

Per window: completions (t_end_ns) from the end of a change (an attach can take
seconds on a busy machine) plus a guard band, to the beginning of the next,
over that time; only windows inside the workload's run. Per triplet of
neighbouring windows (on, off, on or off, on, off): the attached rate over the
detached one, each side the mean of its windows, which cancels a linear drift;
triplets do not overlap, so their ratios are independent samples, and their
geometric mean gets a 95 % interval (ab_stats.geomean_ci).

  bench/interleave_stats.py [--guard-ms G] RUN_DIR HL_DIR [RUN_DIR HL_DIR ...]

Prints one JSON object per run pair, then the pooled summary.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from ab_stats import geomean_ci  # noqa: E402
from analyze.load.schema import load_schema, read_records  # noqa: E402


def read_toggles(path: Path) -> list[tuple[int, int, str]]:
    """[(begin_ns, end_ns, "on"|"off"|"end"), ...] in time order (probes/core/toggle.h):
    between begin and end a change was under way; starts with "on"."""
    rows = []
    for line in path.read_text().splitlines():
        t0, t1, state = line.split()
        rows.append((int(t0), int(t1), state))
    if not rows or rows[0][2] != "on":
        raise SystemExit(f"interleave_stats.py: {path}: no toggles (was --toggle-ms given?)")
    return rows


def window_rates(toggles: list[tuple[int, int, str]], t_start: np.ndarray, t_end: np.ndarray,
                 guard_ns: int) -> list[tuple[str, float]]:
    """(state, completions per second) of every window from the end of one change (plus
    the guard) to the beginning of the next, while the workload ran: from its first
    request's start (plus the guard) to its last completion."""
    t_end = np.sort(t_end)
    first, last = int(t_start.min()) + guard_ns, int(t_end[-1])
    out = []
    for (_, t_set, state), (t_next, _, _) in zip(toggles, toggles[1:]):
        lo, hi = t_set + guard_ns, t_next
        if state not in ("on", "off") or lo < first or hi > last or hi <= lo:
            continue
        n = np.searchsorted(t_end, hi) - np.searchsorted(t_end, lo)
        out.append((state, n / ((hi - lo) / 1e9)))
    return out


def triplet_ratios(rates: list[tuple[str, float]]) -> list[float]:
    """Attached over detached rate of consecutive, disjoint triplets of windows:
    on-off-on gives mean(on, on) / off, off-on-off gives on / mean(off, off); either
    cancels a drift linear over the triplet. A triplet that is neither (a window
    left out: it fell outside the workload's run) is skipped one window on."""
    out, i = [], 0
    while i + 2 < len(rates):
        (s0, a), (s1, b), (s2, c) = rates[i:i + 3]
        if min(a, b, c) > 0 and (s0, s1, s2) == ("on", "off", "on"):
            out.append((a + c) / 2 / b)
            i += 3
        elif min(a, b, c) > 0 and (s0, s1, s2) == ("off", "on", "off"):
            out.append(b / ((a + c) / 2))
            i += 3
        else:
            i += 1
    return out


def run_pair(run_dir: Path, hl_dir: Path, guard_ns: int) -> dict:
    toggles = read_toggles(run_dir / "toggles.txt")
    schema = load_schema(hl_dir)
    req = read_records(hl_dir / "requests.bin", schema, "request")
    ok = req[req["status"] == 200]
    rates = window_rates(toggles, ok["t_start_ns"].astype(np.int64),
                         ok["t_end_ns"].astype(np.int64), guard_ns)
    ratios = triplet_ratios(rates)
    meta = json.loads((run_dir / "meta.json").read_text())
    cost = meta.get("cost") or {}
    wall, ncpus = cost.get("traced_wall_ns"), cost.get("ncpus")
    loader = cost.get("loader_cpu_ns", 0) / (wall * ncpus) if wall and ncpus else None
    on = [r for s, r in rates if s == "on"]
    off = [r for s, r in rates if s == "off"]
    return {"run": str(run_dir), "windows": len(rates), "triplets": len(ratios),
            "on_rps": float(np.mean(on)) if on else None,
            "off_rps": float(np.mean(off)) if off else None,
            "ratios": ratios, "loader_share": loader, "lost": meta.get("lost_events")}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guard-ms", type=float, default=50.0)
    ap.add_argument("dirs", nargs="+", type=Path)
    a = ap.parse_args(argv)
    if len(a.dirs) % 2:
        ap.error("give RUN_DIR HL_DIR pairs")
    runs = [run_pair(a.dirs[i], a.dirs[i + 1], int(a.guard_ms * 1e6))
            for i in range(0, len(a.dirs), 2)]
    for r in runs:
        print(json.dumps({k: v for k, v in r.items() if k != "ratios"}))
    ratios = [x for r in runs for x in r["ratios"]]
    if len(ratios) < 2:
        print("interleave_stats.py: fewer than 2 on-off-on triplets: run longer or toggle faster",
              file=sys.stderr)
        return 1
    g, lo, hi = geomean_ci(ratios)
    loaders = [r["loader_share"] for r in runs if r["loader_share"] is not None]
    loader = float(np.mean(loaders)) if loaders else 0.0
    print(f"attached/detached throughput: {g:.4f} [95% CI {lo:.4f}, {hi:.4f}] over "
          f"{len(ratios)} triplets in {len(runs)} runs; the loader (in both halves, not in "
          f"the ratio) used {100 * loader:.2f} % of the machine: with it {g - loader:.4f} "
          f"[{lo - loader:.4f}, {hi - loader:.4f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
