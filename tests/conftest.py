"""Make the repo root importable (the analyze package) when pytest runs from anywhere."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):  # the analyze package; helpers shared by the test dirs
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
