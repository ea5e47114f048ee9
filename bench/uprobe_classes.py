#!/usr/bin/env python3
"""What a uprobe costs by the class of its site, measured against tailtrace's prediction.

    python3 bench/uprobe_classes.py [--rounds R]

For each function of tests/probes/uprobe_sites.c (first instruction push, nop, 5-byte nop,
mov, endbr64; and a mov followed by a push, where tailtrace's entry probe moves to the push):
untraced and with `tailtrace --events spans --span uprobe_sites:site_X` (entry uprobe +
uretprobe), alternating in every round; the extra ns a call (median over rounds) against
meta.json's cost_ns_per_call (the classes' costs tailtrace measured at start). PASS when every
site is within 2x of its prediction. Run as root on a quiet machine (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
SITES = BUILD / "tests" / "probes" / "uprobe_sites"
TAILTRACE = BUILD / "probes" / "tailtrace"
CALLS = {"push": 20000, "nop": 20000, "nop5": 20000, "mov": 2000, "endbr": 2000,
         "mov_push": 20000}


def ns_per_call(text: str) -> float:
    return float(re.search(r"ns_per_call ([\d.]+)", text)[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for site, n in CALLS.items():
            base, trac, pred, cls = [], [], None, None
            for r in range(a.rounds):
                for mode in (("none", "traced") if r % 2 == 0 else ("traced", "none")):
                    if mode == "none":
                        out = subprocess.run([str(SITES), site, str(n)], capture_output=True,
                                             text=True, check=True).stdout
                        base.append(ns_per_call(out))
                        continue
                    d = Path(tmp) / f"{site}{r}"
                    p = subprocess.run([str(TAILTRACE), "--out", str(d), "--events", "spans",
                                        "--span", f"{SITES}:site_{site}", "--", str(SITES),
                                        site, str(n)], capture_output=True, text=True)
                    if p.returncode:
                        print(p.stderr, file=sys.stderr)
                        return 2
                    trac.append(ns_per_call(p.stdout))
                    plan = json.loads((d / "meta.json").read_text())["span_sites"][0]
                    pred, cls = plan["cost_ns_per_call"], plan["entry"]["class"]
            extra = statistics.median(trac) - statistics.median(base)
            rows.append((site, cls, pred, extra, extra / pred))
    print(f"{'site':9} {'entry class':15} {'predicted ns':>12} {'measured ns':>12} {'ratio':>6}")
    for site, cls, pred, extra, ratio in rows:
        print(f"{site:9} {cls:15} {pred:12,.0f} {extra:12,.0f} {ratio:6.2f}")
    ok = all(0.5 <= r[4] <= 2 for r in rows)
    print("PASS: every site within 2x of its prediction" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
