"""analyze/load/phases.py: each phase's peak is its own (the high-water mark is reset at its
start), its time is its own, and the table names every phase in order. In a child process:
the memory measured must not be a neighbouring test's (or its malloc settings')."""
import json
import subprocess
import sys
from pathlib import Path

from analyze.load.phases import NoPhases

ROOT = Path(__file__).resolve().parents[3]

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from analyze.load.phases import Phases

ph = Phases()
with ph.phase("big"):
    a = np.ones(200 * 2**17)       # 200 MiB touched, then let go (glibc unmaps it)
    del a
with ph.phase("small"):
    b = np.ones(2**17)             # 1 MiB
    del b
    time.sleep(0.05)
print(json.dumps({"rows": ph.as_dicts(), "table": ph.table()}))
"""


def test_each_phase_has_its_own_peak_and_time():
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    got = json.loads(out)
    big, small = got["rows"]
    assert (big["name"], small["name"]) == ("big", "small")
    assert not big["peak_since_start"] and not small["peak_since_start"]  # Linux resets VmHWM
    assert big["peak_mib"] - big["end_mib"] > 150, big
    assert small["peak_mib"] < big["peak_mib"] - 150, (big, small)
    assert 0.05 <= small["seconds"] < 5
    lines = got["table"].splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["big", "small", "total"]


def test_no_phases_measures_nothing():
    ph = NoPhases()
    with ph.phase("x"):
        pass
    assert ph.rows == []
