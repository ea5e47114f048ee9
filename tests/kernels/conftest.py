"""The kernel suite's helpers live beside the probe tests (tests/probes/tt_run.py)."""
import sys
from pathlib import Path

PROBES = Path(__file__).resolve().parents[1] / "probes"
if str(PROBES) not in sys.path:
    sys.path.insert(0, str(PROBES))
